"""The one status server of the daemon and the audit follower, over real sockets."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client import CollectorRegistry, Counter

from prober.common.statusserver import StatusServer


async def test_routes_checks_head_and_keep_alive() -> None:
    registry = CollectorRegistry()
    Counter("prober_test", "a counter", registry=registry).inc()
    unhealthy = ["the last poll failed"]
    server = StatusServer(registry, healthz=lambda: unhealthy)
    port = await server.start("127.0.0.1", 0)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            sick = await client.get("/healthz")
            unhealthy.clear()
            well = await client.get("/healthz")
            ready = await client.get("/readyz?verbose")
            head = await client.head("/metrics")
            metrics = await client.get("/metrics")
            missing, posted = await client.get("/nope"), await client.post("/metrics")
    finally:
        await server.close()
    assert (sick.status_code, sick.text) == (503, "[-] the last poll failed\nnot healthy\n")
    assert (well.status_code, well.text) == (200, "ok\n")
    assert (ready.status_code, ready.text) == (200, "ok\n")
    assert (head.status_code, head.content) == (200, b"")
    assert "prober_test_total 1.0" in metrics.text
    assert (missing.status_code, posted.status_code) == (404, 405)


async def test_a_request_that_is_not_http_gets_400_and_the_server_goes_on() -> None:
    server = StatusServer(CollectorRegistry())
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x16\x03\x01 not http at all\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        async with httpx.AsyncClient() as client:
            after = await client.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        await server.close()
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert after.status_code == 200
