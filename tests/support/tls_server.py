"""A small TLS server speaking HTTP/1.1 (h11) and HTTP/2 (h2, by ALPN) that misbehaves on demand.

Tests set `server.plan` (what the next request gets) and call `refuse()` / `accept()`; the
server records every connection and request so tests can assert what the client really did.
Misbehaviours are real: a refused connection is a closed listener, a reset is a TCP RST
(SO_LINGER 0), a stall never answers, `silent` accepts and never even starts TLS, `trickle`
sends its answer one byte a second, bad TLS is a certificate from an untrusted CA (or an
expired one, or one for another name) or no TLS at all; GOAWAY, RST_STREAM and SETTINGS
frames are real frames, and `big_headers` sends a real 1 MB header block.

Run alone (benchmarks, subprocess tests):

    python -m tests.support.tls_server --ca-file CA.pem [--port 0] [--cycle 20]

prints `{"event": "listening", "port": N}` when ready; `--cycle` makes it play a shutting-down
apiserver over and over (see `cycling_header`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import socket
import ssl
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import h11
from hyperframe.frame import GoAwayFrame, SettingsFrame

from prober.core.header import format_shutdown_header
from prober.fakeapiserver.listener import Listener
from tests.support.certs import Certs, make_certs

HOST_ID = "apiserver-testtesttesttesttesttesttest"
BODY = json.dumps({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default"}})
READY = format_shutdown_header(False, 70, 0, HOST_ID)

# ok | reset | stall | close | silent | trickle | reset_after_headers | big_headers | raw
# | bad_tls | expired_tls | wrong_name_tls | not_tls
# | goaway | goaway_answer | goaway_error | rst_stream | settings_flood (HTTP/2 only;
# goaway: graceful, this stream above last_stream_id; goaway_answer: graceful, this stream the
# last one taken, and answered;
# settings_flood sends SETTINGS frames until the client hangs up, and never reads)
# | chunk_bomb (HTTP/1.1: a chunk of FFFFFFFFFFFFFFFF bytes, then data until the client goes)
# | max_frame_zero | huge_table (HTTP/2: SETTINGS_MAX_FRAME_SIZE=0, HEADER_TABLE_SIZE=2^31)
# (a new apiserver host in every answer: `Plan.header = host_per_answer()`)
Mode = str
BIG_HEADER_BYTES = 1 << 20
FLOOD_FRAMES = 1000  # per write
FLOOD_WRITES = 2000  # at most: a client that reads them all has long stopped its requests


@dataclass
class Plan:
    """How the server answers from now on."""

    mode: Mode = "ok"
    status: int = 200
    retry_after: str | None = None
    # The X-OpenShift-Disruption value, None for none, or a function of the request count.
    header: str | Callable[[], str | None] | None = READY
    goaway_code: int = h2.errors.ErrorCodes.INTERNAL_ERROR  # for goaway_error and rst_stream
    trickle_gap: float = 1.0  # seconds between the bytes of a `trickle` answer
    # `raw`: a 200 with exactly these header bytes, unchecked (h1 lines, h2 HPACK literals).
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    delay: float = 0.0  # seconds an HTTP/1.1 answer waits (a slow server)
    gate: asyncio.Event | None = None  # HTTP/1.1 answers wait until it is set
    close_after: bool = False  # HTTP/1.1 answers say `Connection: close`, and close
    times: int | None = None  # `reset`/`close`: only this many requests, then answer again


@dataclass(frozen=True)
class Seen:
    """One request as the server saw it."""

    connection: int  # index of the TCP connection it came on
    peer_port: int
    http_version: str
    path: str
    headers: dict[str, str]


@dataclass
class TLSServer:
    server_context: ssl.SSLContext
    untrusted_context: ssl.SSLContext
    host: str = "127.0.0.1"
    port: int = 0
    plan: Plan = field(default_factory=Plan)
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0
    alpn: list[str | None] = field(default_factory=list)
    keep_requests: bool = True  # off for long benchmark runs
    # Certificates for the TLS faults other than `bad_tls`, by mode (`expired_tls`, ...).
    fault_contexts: dict[str, ssl.SSLContext] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._server: Listener | None = None
        self._closing = asyncio.Event()
        self._changed = asyncio.Condition()
        self._writers: set[asyncio.StreamWriter] = set()
        # Every accepted socket, from the moment of accept: a connection whose handler task
        # never got to run (the test ended first) must still be closed by `close()`.
        self._transports: set[asyncio.BaseTransport] = set()

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def start(self) -> TLSServer:
        self._server = await Listener.open(self._protocol, self.host, self.port)
        self.port = self._server.port
        return self

    async def refuse(self) -> None:
        """Close the listener: new connections are refused, open ones go on."""
        if self._server is not None:
            self._server.close()
            self._server = None

    async def accept(self) -> None:
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        self._closing.set()
        await self.refuse()
        for writer in list(self._writers):
            writer.transport.abort()
        for transport in list(self._transports):
            transport.abort()
        await asyncio.sleep(0)  # let the aborts' connection_lost callbacks run

    def _protocol(self) -> asyncio.StreamReaderProtocol:
        return _TrackedProtocol(asyncio.StreamReader(), self._handle, self._transports)

    async def wait_for(self, predicate: Callable[[TLSServer], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        index = self.connections
        self.connections += 1
        try:
            await self._serve(index, reader, writer)
        except (ConnectionError, ssl.SSLError, OSError, asyncio.IncompleteReadError):
            pass  # the client went away or failed the handshake: its problem, not ours
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
            await self._notify()

    async def _serve(self, index: int, reader: asyncio.StreamReader, w: asyncio.StreamWriter):
        mode = self.plan.mode
        if mode == "not_tls":
            w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            await w.drain()
            return
        if mode == "silent":
            await self._closing.wait()
            return
        context = self.server_context
        if mode == "bad_tls":
            context = self.untrusted_context
        elif mode in self.fault_contexts:
            context = self.fault_contexts[mode]
        await w.start_tls(context)
        ssl_object = w.get_extra_info("ssl_object")
        protocol = ssl_object.selected_alpn_protocol() if ssl_object else None
        if self.keep_requests:
            self.alpn.append(protocol)
        peer_port = w.get_extra_info("peername")[1]
        serve = self._serve_h2 if protocol == "h2" else self._serve_h1
        await serve(index, peer_port, reader, w)

    def _record(self, index: int, port: int, version: str, path: str, headers: dict[str, str]):
        if self.keep_requests:
            self.requests.append(Seen(index, port, version, path, headers))

    def _response_headers(self) -> list[tuple[str, str]]:
        plan = self.plan
        header = plan.header() if callable(plan.header) else plan.header
        headers = [("content-type", "application/json"), ("audit-id", "server")]
        if header is not None:
            headers.append(("x-openshift-disruption", header))
        if plan.retry_after is not None:
            headers.append(("retry-after", plan.retry_after))
        if plan.close_after:
            headers.append(("connection", "close"))
        return headers

    async def _flood(self, w: asyncio.StreamWriter, pending: bytes) -> None:
        """SETTINGS frames, each asking for an acknowledgement, without end and without
        reading a byte: the client's acknowledgements pile up on its side."""
        w.write(pending)
        # Bounded: once the client is gone, writes fail at once without raising (asyncio only
        # logs them), and an endless loop of them starved the test itself for minutes.
        for _ in range(FLOOD_WRITES):
            if self._closing.is_set() or w.transport.is_closing():
                return
            w.write(SETTINGS_FLOOD)
            await w.drain()

    async def _trickle(self, w: asyncio.StreamWriter, data: bytes) -> None:
        """Send `data` one byte at a time, `trickle_gap` apart, until done or closing."""
        for index in range(len(data)):
            w.write(data[index : index + 1])
            await w.drain()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.plan.trickle_gap):
                    await self._closing.wait()
            if self._closing.is_set():
                return

    async def _misbehave(self, w: asyncio.StreamWriter) -> bool:
        """Act out a connection-level plan; True when the request must not be answered."""
        mode = self.plan.mode
        if mode in ("reset", "close") and self.plan.times is not None:
            if self.plan.times <= 0:
                return False
            self.plan.times -= 1
        if mode == "reset":
            reset(w)
            return True
        if mode == "close":
            w.close()
            return True
        if mode == "stall":
            await self._closing.wait()
            return True
        return False

    async def _unchecked_h1(self, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        """Answer with bytes h11 would refuse to write (`raw`, `big_headers`), then serve no
        more on this connection (h11 never saw the answer); True if it did."""
        mode = self.plan.mode
        if mode not in ("raw", "big_headers"):
            return False
        if mode == "raw":
            w.write(raw_response_h1(self.plan.raw_headers, BODY.encode()))
        else:
            w.write(BIG_HEAD_H1)
        await w.drain()
        while await reader.read(65536):  # until the client hangs up
            pass
        return True

    async def _serve_h1(self, index: int, port: int, reader: asyncio.StreamReader, w):
        conn = h11.Connection(h11.SERVER)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    return
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                headers = {k.decode().lower(): v.decode() for k, v in event.headers}
                self._record(index, port, "HTTP/1.1", event.target.decode(), headers)
                await self._notify()
            elif isinstance(event, h11.EndOfMessage):
                await self._hold()
                if await self._misbehave(w) or await self._unchecked_h1(reader, w):
                    return
                if self.plan.mode == "chunk_bomb":
                    await self._chunk_bomb(w)
                    return
                body = BODY.encode()
                headers = [*self._response_headers(), ("content-length", str(len(body)))]
                head = conn.send(h11.Response(status_code=self.plan.status, headers=headers))
                if self.plan.mode == "reset_after_headers":
                    w.write(head or b"")
                    await w.drain()
                    reset(w)
                    return
                data = (head or b"") + (conn.send(h11.Data(data=body)) or b"")
                data += conn.send(h11.EndOfMessage()) or b""
                if self.plan.mode == "trickle":
                    await self._trickle(w, data)
                    return
                w.write(data)
                await w.drain()
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                return

    async def _chunk_bomb(self, w: asyncio.StreamWriter) -> None:
        """A chunk the size of the address space, then data until the client hangs up (at
        most 256 MB: the loop ends by itself)."""
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n")
        block = b"x" * 65536
        with contextlib.suppress(ConnectionError):
            for _ in range(4096):
                w.write(block)
                await w.drain()

    async def _hold(self) -> None:
        if self.plan.delay:
            await asyncio.sleep(self.plan.delay)
        if self.plan.gate is not None:
            await self.plan.gate.wait()

    async def _serve_h2(self, index: int, port: int, reader: asyncio.StreamReader, w):
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        if self.plan.mode == "huge_table":
            conn.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: 2**31})
        w.write(conn.data_to_send())
        if self.plan.mode == "max_frame_zero":  # h2 refuses to send it: a frame of our own
            frame = SettingsFrame(0)
            frame.settings = {SettingsFrame.MAX_FRAME_SIZE: 0}
            w.write(frame.serialize())
        while True:
            data = await reader.read(65536)
            if not data:
                return
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = {str(k).lower(): str(v) for k, v in event.headers}
                    path = headers.get(":path", "")
                    self._record(index, port, "HTTP/2", path, headers)
                    await self._notify()
                    if await self._answer_h2(conn, event.stream_id, reader, w):
                        return
            w.write(conn.data_to_send())
            await w.drain()

    async def _answer_h2(self, conn: h2.connection.H2Connection, stream_id: int, reader, w):
        """Answer one stream; True when the connection is done."""
        mode = self.plan.mode
        if mode == "rst_stream":
            conn.reset_stream(stream_id, error_code=self.plan.goaway_code)
            return False
        if mode == "settings_flood":
            await self._flood(w, conn.data_to_send())
            return True
        if mode == "raw":  # h2 never learns of this answer; the stream stays open for it
            raw = raw_response_h2(stream_id, self.plan.raw_headers, BODY.encode())
            w.write(conn.data_to_send() + raw)
            await w.drain()
            return False
        if mode == "big_headers":
            w.write(conn.data_to_send() + big_headers_h2(stream_id))
            await w.drain()
            return False
        if mode == "goaway_answer":
            # What Go's `srv.Shutdown` does: GOAWAY (NO_ERROR) naming this stream as the last
            # it takes, then its answer. h2 answers no stream after its own GOAWAY, so the
            # frame is written by hand (RFC 9113 6.8).
            w.write(conn.data_to_send() + goaway_frame(0, stream_id))
            body = BODY.encode()
            headers = [(":status", str(self.plan.status)), *self._response_headers()]
            conn.send_headers(stream_id, [*headers, ("content-length", str(len(body)))])
            conn.send_data(stream_id, body, end_stream=True)
            w.write(conn.data_to_send())
            await w.drain()
            return True  # drained: the connection closes
        if mode in ("goaway", "goaway_error"):
            code = 0 if mode == "goaway" else self.plan.goaway_code
            if code == 0:  # a stream above last_stream_id: never processed, to be sent again
                w.write(conn.data_to_send() + goaway_frame(0, max(stream_id - 2, 0)))
            else:
                conn.close_connection(error_code=code, last_stream_id=stream_id)
                w.write(conn.data_to_send())
            await w.drain()
            # Wait for the client to hang up: a draining server for a graceful GOAWAY, and for
            # an error one what Go's server does (goAwayTimeout, 1 s) so that the client reads
            # the GOAWAY before the close; an abort at once could reach it first, as a reset.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5 if code == 0 else 1):
                    while await reader.read(65536):
                        pass
            return True
        if await self._misbehave(w):
            return True
        body = BODY.encode()
        headers = [(":status", str(self.plan.status)), *self._response_headers()]
        headers.append(("content-length", str(len(body))))
        if mode == "reset_after_headers":
            conn.send_headers(stream_id, headers)
            w.write(conn.data_to_send())
            await w.drain()
            reset(w)
            return True
        conn.send_headers(stream_id, headers)
        conn.send_data(stream_id, body, end_stream=True)
        if mode == "trickle":
            await self._trickle(w, conn.data_to_send())
            return True
        return False


# The 1 MB header block is built once, by hand: encoding it per request with h11 or hpack
# would make the test server, not the client under test, the bottleneck.
_FILLERS = [(f"x-filler-{i}".encode(), b"f" * 4000) for i in range(BIG_HEADER_BYTES // 4000)]
BIG_HEAD_H1 = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    + b"".join(name + b": " + value + b"\r\n" for name, value in _FILLERS)
    + b"content-length: 0\r\n\r\n"
)


def goaway_frame(error_code: int, last_stream_id: int) -> bytes:
    return GoAwayFrame(0, last_stream_id=last_stream_id, error_code=error_code).serialize()


def _hpack_int(value: int) -> bytes:
    """An HPACK integer with a 7-bit prefix (RFC 7541, 5.1), the prefix bits zero."""
    if value < 127:
        return bytes([value])
    out, value = [127], value - 127
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes([*out, value])


def hpack_block(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """`:status 200` from the static table, then each header as a literal without indexing,
    bytes as given: no dynamic-table state, so the block is valid on any connection, and
    nothing checks the names or values."""
    return b"\x88" + b"".join(
        b"\x00" + _hpack_int(len(name)) + name + _hpack_int(len(value)) + value
        for name, value in headers
    )


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    return (
        struct.pack("!I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack("!I", stream_id)
        + payload
    )


def headers_frames(stream_id: int, block: bytes, chunk: int = 16384) -> bytes:
    """HEADERS, then CONTINUATION frames as needed, carrying a header block on a stream."""
    pieces = [block[i : i + chunk] for i in range(0, len(block), chunk)] or [b""]
    return b"".join(
        _frame(
            0x1 if index == 0 else 0x9,  # HEADERS, then CONTINUATION
            0x4 if index == len(pieces) - 1 else 0x0,  # END_HEADERS on the last
            stream_id,
            piece,
        )
        for index, piece in enumerate(pieces)
    )


_BIG_BLOCK = hpack_block(_FILLERS)


def big_headers_h2(stream_id: int) -> bytes:
    return headers_frames(stream_id, _BIG_BLOCK)


def raw_response_h1(headers: Sequence[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A 200 with these headers written as they are: whatever bytes they hold."""
    lines = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    length = b"content-length: " + str(len(body)).encode() + b"\r\n"
    return b"HTTP/1.1 200 OK\r\n" + lines + length + b"\r\n" + body


def raw_response_h2(stream_id: int, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> bytes:
    return headers_frames(stream_id, hpack_block(headers)) + _frame(0x0, 0x1, stream_id, body)


# SETTINGS frames (type 4, stream 0) setting MAX_CONCURRENT_STREAMS to 100.
SETTINGS_FLOOD = _frame(0x4, 0x0, 0, struct.pack("!HI", 0x3, 100)) * FLOOD_FRAMES


class _TrackedProtocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol that keeps its socket transport in `tracked` while open."""

    def __init__(self, reader, handle, tracked: set[asyncio.BaseTransport]) -> None:
        super().__init__(reader, handle)
        self._tracked = tracked
        self._raw: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._raw = transport
        self._tracked.add(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._tracked.discard(self._raw)
        super().connection_lost(exc)


def reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST rather than a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def host_per_answer() -> Callable[[], str | None]:
    """shutdown=true from an apiserver never named before, in every answer."""
    count = itertools.count()

    def header() -> str | None:
        return format_shutdown_header(True, 70, 1, f"apiserver-{next(count):026d}")

    return header


def cycling_header(
    cycle: float, hosts: int = 3, delay: float | None = None
) -> Callable[[], str | None]:
    """An apiserver rolling restart on a loop: each `cycle` seconds the next of `hosts` ids
    is ready for the first half and shutting down (elapsed counting up) for the second.
    `delay`: the shutdown delay the header says (half the cycle): one longer than the half
    is an LB that moved on to the next host within the delay."""
    start = time.monotonic()

    def header() -> str | None:
        now = time.monotonic() - start
        turn, into = divmod(now, cycle)
        host = f"apiserver-{int(turn) % hosts:026d}"
        half = cycle / 2
        said = half if delay is None else delay
        if into < half:
            return format_shutdown_header(False, said, 0, host)
        return format_shutdown_header(True, said, into - half, host)

    return header


def _main() -> None:
    parser = argparse.ArgumentParser(description="a misbehaving TLS h11/h2 test server")
    parser.add_argument("--ca-file", required=True, help="where to write the CA certificate")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cycle", type=float, help="play rolling shutdowns of this period")
    args = parser.parse_args()
    certs = make_certs(Path(args.ca_file).parent)
    if Path(certs.ca_file) != Path(args.ca_file):
        Path(certs.ca_file).replace(args.ca_file)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(certs, args.port, args.cycle))


async def _serve_forever(certs: Certs, port: int, cycle: float | None) -> None:
    server = TLSServer(certs.server, certs.untrusted, port=port, keep_requests=False)
    if cycle:
        server.plan.header = cycling_header(cycle)
    await server.start()
    print(json.dumps({"event": "listening", "port": server.port}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    _main()
