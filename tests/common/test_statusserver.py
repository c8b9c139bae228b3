"""The one status server of the daemon and the audit follower, over real sockets."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from prober.common.statusserver import Limits, StatusServer


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


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything until the server closes, within a bound far above any limit under test."""
    return await asyncio.wait_for(reader.read(), 30)


async def _write_until_reset(writer: asyncio.StreamWriter, data: bytes) -> None:
    async with asyncio.timeout(30):
        while True:  # each drain() blocks until the server reads, or closes
            writer.write(data)
            await writer.drain()


async def test_a_head_sent_a_byte_at_a_time_is_cut_off() -> None:
    server = StatusServer(CollectorRegistry(), limits=Limits(head=0.5))
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"G")  # and no more: the head's deadline runs from this byte
        assert await _closed_by_server(reader) == b""
        writer.close()
    finally:
        await server.close()


async def test_a_client_that_never_reads_is_dropped() -> None:
    registry = CollectorRegistry()
    for n in range(200):  # a /metrics answer of some 20 kB
        Counter(f"prober_test_{n}", "a counter with a long help text " * 3, registry=registry)
    server = StatusServer(registry, limits=Limits(write=0.5))
    port = await server.start("127.0.0.1", 0)
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # Requests for 40 MB of answers at a time, never reading one: the server's drain()
        # blocks, it gives up and closes, and our own drain() then meets the reset.
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            await _write_until_reset(writer, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n" * 2000)
        writer.close()
        assert server.connections == 0
    finally:
        await server.close()


async def test_connections_past_the_cap_are_closed_at_once() -> None:
    server = StatusServer(CollectorRegistry(), limits=Limits(connections=2))
    port = await server.start("127.0.0.1", 0)
    kept = []
    try:
        for _ in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            assert (await reader.readuntil(b"ok\n")).startswith(b"HTTP/1.1 200")
            kept.append(writer)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await _closed_by_server(reader) == b""  # the third, closed before a request
        writer.close()
    finally:
        for each in kept:
            each.close()
        await server.close()
