"""The whole lifecycle over real TLS sockets with httpx (HTTP/1.1 and HTTP/2, reused and
fresh connections) and a raw HTTP/2 client; time is a manual clock, so every phase is
reached exactly, without waiting for it."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest

from prober.core.header import RESPONSE_HEADER, ShutdownHeader, parse_shutdown_header
from prober.core.truthlog import (
    ConnectionClosed,
    ConnectionOpened,
    GoawaySent,
    HTTPServerStoppedListening,
    RetryAfterTotal,
    of_kind,
)
from prober.fakeapiserver import Signal
from tests.fakeapiserver.rawclient import RawH2, open_tls
from tests.fakeapiserver.test_lifecycle import NO_RETRY_AFTER_ORDER, RETRY_AFTER_ORDER
from tests.support.apiservers import TOKEN, LabCerts, Running, StartServer, read_audit
from tests.support.waiting import until

API = "/api/v1/namespaces/default"
WATCH = "/api/v1/namespaces?watch=true"
HEADERS = {"X-Openshift-If-Disruption": "true", "Authorization": f"Bearer {TOKEN}"}
AUTH = [("authorization", f"Bearer {TOKEN}")]
MODES = [("http1", "reused"), ("http2", "reused"), ("http1", "new"), ("http2", "new")]


@asynccontextmanager
async def clients(
    running: Running, certs: LabCerts
) -> AsyncIterator[dict[tuple, httpx.AsyncClient]]:
    async with AsyncExitStack() as stack:
        made = {}
        for protocol, connection in MODES:
            limits = httpx.Limits(max_keepalive_connections=0 if connection == "new" else 10)
            made[(protocol, connection)] = await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=f"https://127.0.0.1:{running.ports.port}",
                    verify=certs.client_context(),
                    http2=protocol == "http2",
                    http1=protocol == "http1",
                    limits=limits,
                    headers=HEADERS,
                )
            )
        yield made


def shutdown_header(response: httpx.Response) -> ShutdownHeader:
    return parse_shutdown_header(response.headers[RESPONSE_HEADER])


def signals(running: Running) -> list[str]:
    names = {s.value for s in Signal}
    return [r.KIND for r in running.server.truth.records or [] if r.KIND in names]


async def test_full_lifecycle_with_retry_after(start_server: StartServer, certs: LabCerts) -> None:
    running = await start_server(
        manual_clock=True, shutdown_delay=10.0, watch_grace=30.0, watch_min_qps=0.1
    )
    server, clock = running.server, running.clock
    assert clock is not None
    host = server.apiserver_id
    watcher = await RawH2.connect(running.ports.port, certs.ca)
    watches = [await watcher.request(WATCH, AUTH), await watcher.request(WATCH, AUTH)]
    await watcher.read_until(lambda c: all(c.streams[s].body for s in watches))
    async with clients(running, certs) as by_mode:
        for (protocol, _), client in by_mode.items():
            response = await client.get(API)
            assert response.status_code == 200
            assert response.http_version == ("HTTP/2" if protocol == "http2" else "HTTP/1.1")
            assert shutdown_header(response) == ShutdownHeader(False, 10.0, 0.0, host)
            assert response.headers["x-backend"] == "master-0"
        reused_h2 = (await by_mode["http2", "reused"].get("/readyz")).headers["x-connection-id"]

        # ShutdownInitiated: /readyz fails at once, everything else is served.
        assert server.begin_shutdown("test")
        ready = await by_mode["http1", "reused"].get("/readyz")
        assert ready.status_code == 500
        assert ready.text.endswith("[-]shutdown failed: reason withheld\nreadyz check failed\n")
        await clock.advance(6.6)
        for client in by_mode.values():
            response = await client.get(API)
            assert response.status_code == 200
            assert shutdown_header(response) == ShutdownHeader(True, 10.0, 7.0, host)
        assert (await by_mode["http2", "reused"].get(API)).headers["x-connection-id"] == reused_h2

        # After 80 % of the delay, new connections are late; reused ones are not.
        await clock.advance(2.0)
        late = await by_mode["http1", "new"].get(API, headers={"Audit-ID": "late-one"})
        on_reused = await by_mode["http2", "reused"].get(API, headers={"Audit-ID": "reused-one"})
        assert late.status_code == on_reused.status_code == 200

        # NotAcceptingNewRequest: 429 + Retry-After: 5 while the watches drain.
        await clock.advance(1.4)
        await server.wait_signal(Signal.NOT_ACCEPTING_NEW_REQUEST)
        for (protocol, _), client in by_mode.items():
            response = await client.get(API)
            assert response.status_code == 429, protocol
            assert response.headers["retry-after"] == "5"
            assert response.text == "The apiserver is shutting down, please try again later.\n"
            assert shutdown_header(response).elapsed == 10.0
            if protocol == "http1":
                assert response.headers["connection"] == "close"
        assert (await by_mode["http2", "reused"].get("/livez")).status_code == 200
        assert (await by_mode["http2", "reused"].get("/readyz")).status_code == 500
        # The drain ends watches in a random order, one at a time at this rate.
        await watcher.read_until(lambda c: any(c.streams[s].ended for s in watches))
        assert sum(watcher.streams[s].ended for s in watches) == 1
        assert not server.lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)

        # The last watch drains; the listener closes; HTTP/2 connections get GOAWAY.
        await clock.advance(10.0)
        await asyncio.wait_for(server.wait_stopped(), 10)
        await watcher.read_until(lambda c: c.closed)
        assert all(watcher.streams[s].ended for s in watches)
        assert watcher.goaway is not None
        assert (watcher.goaway.last_stream_id, watcher.goaway.error_code) == (max(watches), 0)
        with pytest.raises(httpx.ConnectError):
            await by_mode["http1", "new"].get(API)
    await watcher.close()

    assert signals(running) == [s.value for s in RETRY_AFTER_ORDER]
    records = running.server.truth.records or []
    stopped = next(i for i, r in enumerate(records) if isinstance(r, HTTPServerStoppedListening))
    reasons = {r.reason for r in of_kind(records, GoawaySent)}
    assert reasons == {"retry-after", "shutdown"}
    shutdowns = [
        i
        for i, r in enumerate(records)
        if isinstance(r, GoawaySent | ConnectionClosed) and r.reason == "shutdown"
    ]
    assert all(i > stopped for i in shutdowns), "shutdown GOAWAYs follow HTTPServerStoppedListening"
    opened = {r.conn for r in of_kind(records, ConnectionOpened)}
    closed = {r.conn for r in of_kind(records, ConnectionClosed)}
    assert opened == closed
    monos = [r.mono for r in records]
    assert monos == sorted(monos)
    # The four refused requests, which the audit log never sees, are counted at the end.
    assert isinstance(records[-1], RetryAfterTotal)
    assert records[-1].codes == {"429": 4}

    audit = {e["auditID"]: e for e in read_audit(running.server.options.audit_log)}
    assert audit["late-one"]["annotations"]["openshift.io/during-graceful"] == (
        f"loopback=true,127.0.0.1:{running.ports.port},readyz=false"
    )
    assert "openshift.io/during-graceful" not in audit["reused-one"]["annotations"]
    assert audit["late-one"]["annotations"]["apiserver.k8s.io/shutdown"].endswith(
        "threshold=86% late=true self=false loopback=true"
    )
    assert 429 not in {e["responseStatus"]["code"] for e in audit.values()}
    watch_stages = sorted(
        e["stage"] for e in read_audit(server.options.audit_log) if e["verb"] == "watch"
    )
    assert watch_stages == ["ResponseComplete"] * 2 + ["ResponseStarted"] * 2


async def test_without_retry_after_the_listener_closes_and_in_flight_streams_complete(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server(manual_clock=True, shutdown_delay=4.0, send_retry_after=False)
    server, clock = running.server, running.clock
    assert clock is not None
    port = running.ports.port
    raw = await RawH2.connect(port, certs.ca)
    first = await raw.request(API, AUTH)
    await raw.read_until(lambda c: c.streams[first].ended)
    in_flight = await raw.request(API, AUTH, end=False)  # its body has not arrived yet
    reader, writer = await open_tls(port, certs.ca, ["http/1.1"])
    writer.write(f"GET {API} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n".encode())
    async with clients(running, certs) as by_mode:
        assert (await by_mode["http1", "reused"].get(API)).status_code == 200
        await until(lambda: server.app.in_flight == 1 and len(server.connections) == 3)

        server.begin_shutdown()
        await clock.advance(4.0)
        await server.wait_signal(Signal.HTTP_SERVER_STOPPED_LISTENING)
        with pytest.raises(httpx.ConnectError):
            await by_mode["http2", "new"].get(API)
        await raw.read_until(lambda c: c.goaway is not None)
        assert raw.goaway is not None
        assert (raw.goaway.last_stream_id, raw.goaway.error_code) == (in_flight, 0)
        assert not server.lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)

        # A request that arrives on an old HTTP/1.1 connection now: 503, Retry-After: 1.
        writer.write(b"\r\n")
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        assert head.startswith("HTTP/1.1 503 Service Unavailable\r\n")
        assert "Retry-After: 1\r\n" in head
        assert "Connection: close\r\n" in head

        # The stream below the GOAWAY's last id is completed, then the connection closes.
        await raw.end_stream(in_flight)
        await raw.read_until(lambda c: c.closed)
        assert raw.streams[in_flight].status == 200
        assert raw.streams[in_flight].ended
        await asyncio.wait_for(server.wait_stopped(), 10)
    writer.close()
    await raw.close()
    assert signals(running) == [s.value for s in NO_RETRY_AFTER_ORDER]


@pytest.mark.parametrize("send_retry_after", [True, False])
async def test_real_time_shutdown_with_a_short_delay(
    start_server: StartServer, certs: LabCerts, send_retry_after: bool
) -> None:
    running = await start_server(shutdown_delay=1.0, send_retry_after=send_retry_after)
    server = running.server
    async with clients(running, certs) as by_mode:
        for client in by_mode.values():
            assert (await client.get(API)).status_code == 200
        server.begin_shutdown()
        started = await server.wait_signal(Signal.SHUTDOWN_INITIATED)
        response = await by_mode["http2", "reused"].get(API)
        assert shutdown_header(response).shutdown
        after = await asyncio.wait_for(server.wait_signal(Signal.AFTER_SHUTDOWN_DELAY), 5)
        assert after.mono - started.mono == pytest.approx(1.0, abs=0.05)
        await asyncio.wait_for(server.wait_stopped(), 5)
        for client in by_mode.values():
            with pytest.raises(httpx.TransportError):
                await client.get(API)


async def test_goaway_chance_moves_http2_clients_to_new_connections(
    start_server: StartServer, certs: LabCerts
) -> None:
    # Seeded: an unseeded 0.02 misses all of 300 requests 0.2 % of the time.
    running = await start_server(goaway_chance=0.02, rng=random.Random(4))
    async with clients(running, certs) as by_mode:
        client = by_mode["http2", "reused"]
        ids = [(await client.get("/readyz")).headers["x-connection-id"] for _ in range(300)]
    goaways = of_kind(running.server.truth.records or [], GoawaySent)
    assert goaways
    assert {r.reason for r in goaways} == {"goaway-chance"}
    # None is lost: each GOAWAY ends a connection, and the next request comes on a new one.
    moves = sum(1 for before, after in itertools.pairwise(ids) if before != after)
    assert len(goaways) - 1 <= moves <= len(goaways)  # the last answer may carry one
