"""Bad clients: each is answered or has its connection closed, and the server keeps serving
everyone else (every test ends with a normal request)."""

from __future__ import annotations

import asyncio
import socket
import struct

import httpx
import pytest

from prober.core.truthlog import ConnectionClosed, of_kind
from tests.fakeapiserver.rawclient import PREFACE, RawH2, open_tls
from tests.support.apiservers import TOKEN, LabCerts, Running, StartServer
from tests.support.waiting import until

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def still_serving(running: Running, certs: LabCerts) -> None:
    for http2 in (False, True):
        async with httpx.AsyncClient(verify=certs.client_context(), http2=http2) as client:
            url = f"https://127.0.0.1:{running.ports.port}/api/v1/namespaces/default"
            response = await client.get(url, headers=AUTH)
            assert response.status_code == 200
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{running.plain_url}/readyz")).text == "ok"


async def read_all(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(10):
        return await reader.read()


def closed_reasons(running: Running) -> list[str]:
    return [r.reason for r in of_kind(running.server.truth.records or [], ConnectionClosed)]


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"HELLO\r\n\r\n", b"400 Bad Request"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nNo-Colon\r\n\r\n", b"400 Bad Request"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (2 << 20), b"431 Request Header"),
    ],
    ids=["garbage", "bad-header", "2MB-header"],
)
async def test_malformed_http1_gets_an_error_and_a_close(
    start_server: StartServer, certs: LabCerts, data: bytes, status: bytes
) -> None:
    running = await start_server()
    reader, writer = await open_tls(running.ports.port, certs.ca, ["http/1.1"])
    writer.write(data)
    answer = await read_all(reader)
    assert answer.startswith(b"HTTP/1.1 " + status)
    assert b"Connection: close\r\n" in answer
    writer.close()
    await still_serving(running, certs)


async def test_malformed_http1_on_the_plain_port(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server()
    reader, writer = await asyncio.open_connection("127.0.0.1", running.ports.plain_port)
    writer.write(b"PRI * HTTP/1.1 nonsense\r\n\r\n")
    assert (await read_all(reader)).startswith(b"HTTP/1.1 400 Bad Request")
    writer.close()
    await still_serving(running, certs)


@pytest.mark.parametrize("tls", [True, False])
async def test_an_invalid_http2_preface_closes_the_connection(
    start_server: StartServer, certs: LabCerts, tls: bool
) -> None:
    running = await start_server()
    if tls:
        reader, writer = await open_tls(running.ports.port, certs.ca, ["h2"])
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # h2 was negotiated
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", running.ports.plain_port)
        writer.write(PREFACE + b"\x00\x00\x04\x09\x00\x00\x00\x00\x00garbage-frames")
    answer = await read_all(reader)
    assert b"HTTP/1.1" not in answer  # no HTTP/1.1 answer on an HTTP/2 connection
    writer.close()
    await until(lambda: "protocol-error" in closed_reasons(running))
    await still_serving(running, certs)


async def test_stalled_headers_are_cut_off_while_others_are_served(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server(read_header_timeout=0.5)
    reader, writer = await open_tls(running.ports.port, certs.ca, ["http/1.1"])
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nUser-Ag")
    silent_reader, silent_writer = await open_tls(running.ports.port, certs.ca, ["h2"])
    await still_serving(running, certs)
    assert await read_all(reader) == b""
    assert b"HTTP" not in await read_all(silent_reader)  # its SETTINGS, then EOF
    await until(lambda: closed_reasons(running).count("read-header-timeout") == 2)
    writer.close()
    silent_writer.close()
    await still_serving(running, certs)


@pytest.mark.parametrize("http2", [False, True])
async def test_a_100_kb_header_is_served(
    start_server: StartServer, certs: LabCerts, http2: bool
) -> None:
    running = await start_server()
    async with httpx.AsyncClient(verify=certs.client_context(), http2=http2) as client:
        response = await client.get(f"{running.url}/readyz", headers={"X-Big": "a" * 100_000})
        assert response.status_code == 200
        assert response.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
    await still_serving(running, certs)


def reset_on_close(writer: asyncio.StreamWriter) -> None:
    """Vanish: close with RST instead of FIN, as a crashed client or a dropped NAT entry."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def test_a_client_vanishing_mid_response_is_forgotten(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server()
    server = running.server
    reader, writer = await open_tls(running.ports.port, certs.ca, ["http/1.1"])
    watch = (
        f"GET /api/v1/namespaces?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}"
    )
    writer.write(watch.encode() + b"\r\n\r\n")
    assert b'"type":"ADDED"' in await reader.readuntil(b"}\n")
    raw = await RawH2.connect(running.ports.port, certs.ca)
    stream = await raw.request(
        "/api/v1/namespaces?watch=true", [("authorization", f"Bearer {TOKEN}")]
    )
    await raw.read_until(lambda c: bool(c.streams[stream].body))
    assert server.open_watches() == 2
    reset_on_close(writer)
    reset_on_close(raw.writer)
    await until(lambda: server.open_watches() == 0 and not server.connections)
    # And a client that sends a request and leaves before its answer.
    _gone_reader, gone_writer = await open_tls(running.ports.port, certs.ca, ["http/1.1"])
    gone_writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    reset_on_close(gone_writer)
    await until(lambda: not server.connections)
    await still_serving(running, certs)
    assert server.app.in_flight == 0
