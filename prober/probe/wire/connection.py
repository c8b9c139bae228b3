"""One TCP+TLS connection to a target, speaking HTTP/1.1 or HTTP/2 as ALPN settled: the only
code of the probe that does I/O, and where OSError and ssl.SSLError become `WireError`s.

An asyncio `Protocol`, not streams: every request costs a few callbacks and no extra tasks,
which is most of the difference between httpx and the floor (`bench/daemon_cpu.py`).
The facts a sample reports come from here: when the request reached the network
(`on_wire`: after the name lookup, as the TCP connect starts; for a kept connection, when the
request is written), the local and peer addresses, the protocol spoken.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import typing
from dataclasses import dataclass

from prober.probe.wire import http1
from prober.probe.wire.errors import ConnectionClosed, ProtocolViolation, WireError, text
from prober.probe.wire.http2 import Answer, Data, Event, Failed, H2Client, Head, PingAck
from prober.probe.wire.stream import (
    BodyStream,
    Streamed,
    StreamLimits,
    consume,
    fail_streamed,
    feeder,
)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    http_version: str


class Connection(asyncio.Protocol):
    """HTTP over one transport. HTTP/1.1: one request at a time (the caller keeps to that);
    HTTP/2: any number of streams."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self.http2 = False
        self.local: tuple[str, int] | None = None
        self.peer: tuple[str, int] | None = None
        self.served = 0  # answers it carried
        # When its opener began the TCP connect (monotonic), for the age of its requests.
        self.opened_at: float | None = None
        self.last_read = time.monotonic()  # when a byte last came (the HTTP/2 health check)
        self.closed: WireError | None = None  # why it cannot carry another request
        self._h1: tuple[http1.ResponseReader, asyncio.Future[Response]] | None = None
        self._h1_streamed: Streamed | None = None  # the HTTP/1.1 request's, when streamed
        self._h2: H2Client | None = None
        self._streams: dict[int, asyncio.Future[Response]] = {}
        self._streamed: dict[int, Streamed] = {}  # HTTP/2 streams answered as they come
        self._pings: dict[bytes, asyncio.Future[None]] = {}
        self.tcp_up_at: float | None = None  # when its TCP connect was done (`dial.connect`)

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport has the interface without the class: no isinstance here.
        self._transport = typing.cast(asyncio.Transport, transport)
        ssl_object = transport.get_extra_info("ssl_object")
        self.http2 = ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2"
        self.local = _address(transport.get_extra_info("sockname"))
        self.peer = _address(transport.get_extra_info("peername"))
        if self.http2:
            self._h2 = H2Client()
            self._flush()

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        if self._h2 is not None:
            self._dispatch(self._h2.receive(data))
            self._flush()
            if self._h2.broken is not None:
                self._give_up(self._h2.broken)
            return
        if self._h1 is None:
            self._give_up(ProtocolViolation("bytes from the server with no request out"))
            return
        reader, future = self._h1
        try:
            response = reader.feed(data)
        except ProtocolViolation as exc:
            self._h1 = None
            self._end_h1_stream(exc)
            _settle(future, exc)
            self._give_up(exc)
            return
        if self._h1_streamed is not None:
            self._h1_stream_progress(reader, response)
            return
        if response is not None:
            self._h1 = None
            self.served += 1
            _settle(future, _h1_response(response))
            if not response.keep_alive:
                self._give_up(ConnectionClosed("the server asked to close", reset=False,
                                               answered=True))  # fmt: skip

    def _h1_stream_progress(self, reader: http1.ResponseReader, done: object) -> None:
        streamed = self._h1_streamed
        assert streamed is not None
        if done is not None and isinstance(done, http1.Response):
            self._h1, self._h1_streamed = None, None
            self.served += 1
            body = streamed.body
            if body is None:
                body = self._start_body(streamed, done.status, done.headers, "HTTP/1.1")
            body.end()
            if not done.keep_alive:
                self._give_up(ConnectionClosed("the server asked to close", reset=False,
                                               answered=True))  # fmt: skip

    def _start_body(
        self, streamed: Streamed, status: int, headers: list[tuple[bytes, bytes]], version: str
    ) -> BodyStream:
        limits = streamed.limits
        body = BodyStream(
            status, headers, version, max_line=limits.max_line, max_queued=limits.max_queued,
            on_close=self._closer(streamed),
        )  # fmt: skip
        streamed.body = body
        if not streamed.head.done():
            streamed.head.set_result(body)
        return body

    def _closer(self, streamed: Streamed) -> typing.Callable[[], None]:
        """How a streamed answer is stopped: its HTTP/2 stream reset, or, on HTTP/1.1, the
        connection closed (an answer half read cannot be left behind)."""

        def close() -> None:
            if self._h2 is not None:
                for stream_id, each in list(self._streamed.items()):
                    if each is streamed:
                        self._abandon_streamed(stream_id)
            elif self._h1_streamed is streamed:
                self._h1, self._h1_streamed = None, None
                self._give_up(ConnectionClosed("given up by the client", reset=False,
                                               answered=True))  # fmt: skip

        return close

    def _end_h1_stream(self, error: WireError) -> None:
        streamed, self._h1_streamed = self._h1_streamed, None
        if streamed is not None:
            fail_streamed(streamed, error)

    def pause_writing(self) -> None:
        # The peer does not read what we send (a SETTINGS flood whose acknowledgements pile
        # up): stop reading what makes us write, as TCP would, until it drains.
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        reset = isinstance(exc, ConnectionResetError)
        detail = _lost(exc)
        if self._h1 is not None:
            reader, future = self._h1
            self._h1 = None
            try:
                response = reader.eof()
            except ConnectionClosed as closed:
                idle = self.served > 0 and not reader.answered
                error = ConnectionClosed(
                    detail or closed.detail, reset=reset, answered=reader.answered, idle=idle
                )
                self._end_h1_stream(error)
                _settle(future, error)
            else:
                if self._h1_streamed is not None:
                    self._h1 = (reader, future)
                    self._h1_stream_progress(reader, response)
                _settle(future, _h1_response(response))
        if self._h2 is not None:
            lost = ConnectionClosed(
                detail or "server closed the connection", reset=reset, answered=False
            )
            self._dispatch(self._h2.fail(self._h2.broken or lost))
            for streamed in self._streamed.values():
                fail_streamed(streamed, self._h2.broken or lost)
            self._streamed.clear()
            for ping in self._pings.values():
                if not ping.done():
                    ping.set_exception(self._h2.broken or lost)
        self.closed = self.closed or ConnectionClosed(
            detail or "closed", reset=reset, answered=False
        )
        self._transport = None

    # -- requests ---------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        if self.closed is not None or self._transport is None or self._transport.is_closing():
            return False
        return self._h2.accepts_streams if self._h2 is not None else self._h1 is None

    @property
    def in_flight(self) -> int:
        return len(self._streams) if self._h2 is not None else int(self._h1 is not None)

    async def request(
        self,
        target: str,
        authority: str,
        headers: list[tuple[str, str]],
        *,
        method: str = "GET",
        body: bytes = b"",
    ) -> Response:
        """One request, its answer read whole."""
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        stream_id = self._send(
            target, authority, headers, method=method, body=body, future=future, streamed=None
        )
        try:
            return await future
        except asyncio.CancelledError:
            self._abandon(stream_id)
            raise

    async def open_stream(
        self,
        target: str,
        authority: str,
        headers: list[tuple[str, str]],
        limits: StreamLimits | None = None,
    ) -> BodyStream:
        """A GET whose answer is read as it comes (a watch): returns once its head is in."""
        loop = asyncio.get_running_loop()
        streamed = Streamed(loop.create_future(), limits or StreamLimits())
        future: asyncio.Future[Response] = loop.create_future()
        stream_id = self._send(
            target, authority, headers, method="GET", body=b"", future=future, streamed=streamed
        )
        future.add_done_callback(consume)  # its outcome travels through `streamed`
        try:
            return await streamed.head
        except asyncio.CancelledError:
            self._abandon(stream_id)
            raise

    async def ping(self) -> None:
        """An HTTP/2 PING; returns when the peer acknowledges it (the caller's deadline
        bounds the wait: client-go's connection health check)."""
        if self._h2 is None or self.closed is not None:
            raise self.closed or ProtocolViolation("PING needs an HTTP/2 connection")
        opaque = secrets.token_bytes(8)
        waiter = self._pings[opaque] = asyncio.get_running_loop().create_future()
        self._h2.ping(opaque)
        self._flush()
        try:
            await waiter
        finally:
            self._pings.pop(opaque, None)

    def _send(
        self,
        target: str,
        authority: str,
        headers: list[tuple[str, str]],
        *,
        method: str,
        body: bytes,
        future: asyncio.Future[Response],
        streamed: Streamed | None,
    ) -> int:
        if self._transport is None or not self.usable:
            raise self.closed or ConnectionClosed("connection not usable", reset=False,
                                                  answered=False, idle=True)  # fmt: skip
        if self._h2 is not None:
            pseudo = [(":method", method), (":scheme", "https"), (":authority", authority)]
            pseudo.append((":path", target))
            fields = pseudo + [(n.lower(), v) for n, v in headers]
            if body:
                fields.append(("content-length", str(len(body))))
            stream_id = self._h2.start_request(fields, body, streamed=streamed is not None)
            self._streams[stream_id] = future
            if streamed is not None:
                self._streamed[stream_id] = streamed
            self._flush()
            return stream_id
        reader = http1.ResponseReader()
        if streamed is not None:
            self._h1_streamed = streamed

            def head(status: int, fields: list[tuple[bytes, bytes]]) -> None:
                self._start_body(streamed, status, fields, "HTTP/1.1")

            reader = http1.ResponseReader(on_body=feeder(streamed), on_head=head)
        self._h1 = (reader, future)
        self._transport.write(
            http1.format_request(target, authority, headers, method=method, body=body)
        )
        return 0

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def _abandon(self, stream_id: int) -> None:
        """A request given up (its deadline): a half-read HTTP/1.1 answer leaves the connection
        unusable; an HTTP/2 stream is reset and the connection goes on."""
        if self._h2 is not None:
            self._abandon_streamed(stream_id)
        else:
            self._h1, self._h1_streamed = None, None
            self._give_up(ConnectionClosed("given up by the client", reset=False,
                                           answered=False))  # fmt: skip

    def _abandon_streamed(self, stream_id: int) -> None:
        assert self._h2 is not None
        self._streams.pop(stream_id, None)
        self._streamed.pop(stream_id, None)
        self._h2.cancel(stream_id)
        self._flush()

    def _dispatch(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, PingAck):
                waiter = self._pings.get(event.opaque)
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
                continue
            streamed = self._streamed.get(event.stream_id)
            if streamed is not None:
                self._dispatch_streamed(streamed, event)
                continue
            future = self._streams.pop(event.stream_id, None)
            if future is None:
                continue
            if isinstance(event, Answer):
                self.served += 1
                _settle(future, Response(event.status, event.headers, event.body, "HTTP/2"))
            elif isinstance(event, Failed):
                _settle(future, event.error)

    def _dispatch_streamed(self, streamed: Streamed, event: Event) -> None:
        if isinstance(event, Head):
            self._start_body(streamed, event.status, event.headers, "HTTP/2")
        elif isinstance(event, Data) and streamed.body is not None:
            streamed.body.feed(event.data)
        elif isinstance(event, Answer | Failed):
            self._streamed.pop(event.stream_id, None)
            future = self._streams.pop(event.stream_id, None)
            if isinstance(event, Failed):
                fail_streamed(streamed, event.error)
            else:
                self.served += 1
                body = streamed.body
                if body is None:  # an answer whole with its head: an error, say
                    body = self._start_body(streamed, event.status, event.headers, "HTTP/2")
                    body.feed(event.body)
                body.end()
            if future is not None and not future.done():
                future.set_result(Response(0, [], b"", "HTTP/2"))

    def _flush(self) -> None:
        if self._h2 is not None and self._transport is not None:
            data = self._h2.data_to_send()
            if data:
                self._transport.write(data)

    def _give_up(self, why: WireError) -> None:
        self.closed = self.closed or why
        if self._transport is not None:
            self._transport.close()


def _lost(exc: Exception | None) -> str:
    """Why the transport ended, when it says more than an orderly close."""
    if isinstance(exc, ConnectionResetError):
        return f"connection reset by peer: {text(exc)}"
    if isinstance(exc, BrokenPipeError):
        return "server closed the connection (a write met the closed socket)"
    if exc is not None:
        return f"connection lost: {type(exc).__name__}: {text(exc)}"
    return ""


def _settle(future: asyncio.Future[Response], outcome: Response | BaseException) -> None:
    """A request's end, unless it ended already (given up by its deadline)."""
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _h1_response(response: http1.Response) -> Response:
    return Response(response.status, response.headers, response.body, "HTTP/1.1")


def _address(value: object) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


def address(addr: tuple[str, int] | None) -> str | None:
    """An address as records spell it: "ip:port", "[ip6]:port"."""
    if addr is None:
        return None
    host, port = addr
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
