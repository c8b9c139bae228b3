"""The probe's own client for what watches need: a body read event by event as it comes
(HTTP/1.1 chunked, HTTP/2 DATA), a PUT with a body, and client-sent HTTP/2 PINGs; against
the fake apiserver on a real etcd, and against servers that abuse a watch: a line that never
ends, an event of 100 MB, a byte at a time, a flood nobody reads. Each is ended past its
stated limit, with memory bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from prober.lab.infra.etcd import LabEtcd
from prober.probe.wire.connection import Connection
from prober.probe.wire.dial import Endpoint, connect
from prober.probe.wire.errors import ProtocolViolation, Stalled
from prober.probe.wire.stream import BodyStream, StreamLimits
from tests.support.apiservers import TOKEN, LabCerts, StartServer
from tests.support.certs import make_certs
from tests.support.waiting import until

LEASES = "/apis/coordination.k8s.io/v1/namespaces/probe/leases"
HEADERS = [("Authorization", f"Bearer {TOKEN}"), ("Accept", "application/json")]


def lease(holder: str, version: str | None = None) -> bytes:
    """The Lease; an update names the version it goes over, as a Lease requires."""
    metadata = {"name": "hb"} | ({} if version is None else {"resourceVersion": version})
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": metadata, "spec": {"holderIdentity": holder}}  # fmt: skip
    return json.dumps(body).encode()


def context(ca: Any, http2: bool) -> ssl.SSLContext:
    made = ssl.create_default_context(cafile=str(ca))
    made.set_alpn_protocols(["h2"] if http2 else ["http/1.1"])
    return made


async def dial(port: int, ca: Any, http2: bool) -> Connection:
    endpoint = Endpoint("127.0.0.1", port, context(ca, http2), server_name="localhost")
    return await connect(endpoint, [("127.0.0.1", port)])


@pytest.mark.parametrize("http2", [False, True])
async def test_a_watch_read_event_by_event_with_puts_and_pings(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, http2: bool
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    authority = f"localhost:{running.ports.port}"
    writer = await dial(running.ports.port, certs.ca, http2)
    watcher = await dial(running.ports.port, certs.ca, http2)
    created = await writer.request(LEASES, authority, HEADERS, method="POST", body=lease("a"))
    assert created.status == 201
    version = json.loads(created.body)["metadata"]["resourceVersion"]
    query = f"?watch=true&resourceVersion={version}&timeoutSeconds=30"
    stream = await watcher.open_stream(LEASES + query, authority, HEADERS)
    assert (stream.status, stream.http_version) == (200, "HTTP/2" if http2 else "HTTP/1.1")
    for holder in ("b", "c"):
        put = await writer.request(
            f"{LEASES}/hb", authority, HEADERS, method="PUT", body=lease(holder, version)
        )
        assert put.status == 200
        version = json.loads(put.body)["metadata"]["resourceVersion"]
        line = await asyncio.wait_for(stream.next_line(), 10)
        assert line is not None
        event = json.loads(line)
        assert (event["type"], event["object"]["spec"]["holderIdentity"]) == ("MODIFIED", holder)
    if http2:
        await asyncio.wait_for(watcher.ping(), 10)  # the same connection, the watch open
        assert watcher.in_flight == 1
    else:
        with pytest.raises(ProtocolViolation, match="PING needs an HTTP/2 connection"):
            await watcher.ping()
    stream.close()
    for conn in (writer, watcher):
        conn.close()


async def test_a_watch_that_ends_gives_its_last_events_then_none(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    conn = await dial(running.ports.port, certs.ca, http2=True)
    authority = f"localhost:{running.ports.port}"
    await conn.request(LEASES, authority, HEADERS, method="POST", body=lease("a"))
    stream = await conn.open_stream(LEASES + "?watch=true&timeoutSeconds=1", authority, HEADERS)
    first = await asyncio.wait_for(stream.next_line(), 10)
    assert first is not None
    assert json.loads(first)["type"] == "ADDED"
    assert await asyncio.wait_for(stream.next_line(), 10) is None
    assert conn.usable, "a watch's clean end leaves the HTTP/2 connection in service"
    conn.close()


# -- hostile servers --------------------------------------------------------------------------

Serve = Callable[[asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def hostile(serve: Serve) -> AsyncIterator[tuple[int, Any, list[int]]]:
    """An HTTP/1.1 TLS server that answers any request with `serve`; the last value lists
    the bytes each connection got written before the client went away."""
    folder = tempfile.TemporaryDirectory()
    made = make_certs(Path(folder.name))
    sent: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            writer.write(head + b"Transfer-Encoding: chunked\r\n\r\n")
            await serve(writer)
        sent.append(writer.transport.get_write_buffer_size())
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=made.server)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, made.ca_file, sent
    finally:
        server.close()
        folder.cleanup()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def watch(port: int, ca: Any, limits: StreamLimits) -> tuple[Connection, BodyStream]:
    conn = await dial(port, ca, http2=False)
    stream = await conn.open_stream("/watch", f"localhost:{port}", HEADERS, limits)
    return conn, stream


async def never_ending_line(writer: asyncio.StreamWriter) -> None:
    piece = chunk(b"x" * 65536)
    for _ in range(2000):  # 128 MB at most, and the client goes long before
        writer.write(piece)
        await writer.drain()


async def huge_event(writer: asyncio.StreamWriter) -> None:
    writer.write(f"{100 << 20:x}\r\n".encode())  # one chunk of 100 MB, one event
    for _ in range(1600):
        writer.write(b"{" + b"x" * 65535)
        await writer.drain()


@pytest.mark.parametrize("serve", [never_ending_line, huge_event])
async def test_an_event_past_the_size_limit_ends_the_stream(serve: Serve) -> None:
    async with hostile(serve) as (port, ca, _):
        conn, stream = await watch(port, ca, StreamLimits(max_line=1 << 20))
        with pytest.raises(ProtocolViolation, match=r"^an event longer than 1048576 bytes$"):
            await asyncio.wait_for(stream.next_line(), 30)
        # Read up to the limit and one read of the socket beyond: never what was sent.
        assert stream.received < (1 << 20) + (256 << 10) + 65536
    await asyncio.sleep(0)
    assert conn.closed is not None, "the connection under a refused body is closed"


async def one_byte_a_second(writer: asyncio.StreamWriter) -> None:
    writer.write(chunk(b'{"type":"ADDED"}\n'))
    for _ in range(60):
        writer.write(chunk(b"{"))
        await writer.drain()
        await asyncio.sleep(1.0)


async def test_an_event_that_never_ends_is_a_stall() -> None:
    async with hostile(one_byte_a_second) as (port, ca, _):
        conn, stream = await watch(port, ca, StreamLimits())
        assert await asyncio.wait_for(stream.next_line(stall=2.5), 10) == b'{"type":"ADDED"}'
        with pytest.raises(Stalled, match=r"^an event begun \d+\.\d s ago has not ended$"):
            await asyncio.wait_for(stream.next_line(stall=2.5), 10)
    conn.close()


async def flood(writer: asyncio.StreamWriter) -> None:
    lines = chunk(b'{"type":"BOOKMARK"}\n' * 3000)
    for _ in range(3000):
        writer.write(lines)
        await writer.drain()


async def test_events_faster_than_they_are_read_end_the_stream() -> None:
    async with hostile(flood) as (port, ca, _):
        conn, stream = await watch(port, ca, StreamLimits(max_queued=10_000))
        await until(lambda: stream.error is not None, "the flood past the limit", 30)
        with pytest.raises(ProtocolViolation, match=r"^more than 10000 events unread$"):
            await stream.next_line()
    conn.close()
