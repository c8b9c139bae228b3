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
import errno
import ipaddress
import socket
import ssl
import typing
from dataclasses import dataclass

from prober.probe.wire import http1
from prober.probe.wire.errors import (
    ConnectFailed,
    ConnectFailure,
    ConnectionClosed,
    ProtocolViolation,
    WireError,
)
from prober.probe.wire.http2 import Answer, Failed, H2Client


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    http_version: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    context: ssl.SSLContext
    server_name: str | None = None  # SNI and the name verified, when not the host

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


async def resolve(endpoint: Endpoint) -> list[tuple[str, int]]:
    """The addresses to try, in order. An IP literal needs no lookup (nor its thread hop)."""
    try:
        ipaddress.ip_address(endpoint.host)
    except ValueError:
        pass
    else:
        return [(endpoint.host, endpoint.port)]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            endpoint.host, endpoint.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as exc:
        raise ConnectFailed(ConnectFailure.DNS, _text(exc)) from None
    except UnicodeError as exc:  # the IDNA codec: a label over 63 characters, an empty one
        raise ConnectFailed(ConnectFailure.DNS, f"bad host name: {exc}") from None
    return [(str(info[4][0]), int(info[4][1])) for info in infos]


async def connect(endpoint: Endpoint, addresses: list[tuple[str, int]]) -> Connection:
    """A connection to the first address that takes one (each tried in turn, as Go's dialer
    does without a fallback delay)."""
    loop = asyncio.get_running_loop()
    failure: ConnectFailed | None = None
    for host, port in addresses:
        protocol = Connection()
        try:
            await loop.create_connection(
                lambda p=protocol: p,  # type: ignore[misc]
                host,
                port,
                ssl=endpoint.context,
                server_hostname=endpoint.server_name or endpoint.host,
                ssl_handshake_timeout=None,  # the probe's own deadline governs
            )
        except (OSError, ssl.SSLError) as exc:
            failure = _connect_failure(exc)
            if failure.kind is not ConnectFailure.REFUSED:
                raise failure from None
            continue
        except asyncio.CancelledError:
            # Cut off (the deadline): asyncio aborts the transport, whose socket closes on the
            # loop's next pass. Let it, so a sample never leaves a socket behind it.
            await asyncio.sleep(0)
            raise
        return protocol
    assert failure is not None
    raise failure


def _connect_failure(exc: BaseException) -> ConnectFailed:
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return ConnectFailed(ConnectFailure.RESET, f"closed during TLS: {_text(exc)}")
    if isinstance(exc, ssl.SSLError):
        return ConnectFailed(ConnectFailure.TLS, _text(exc))
    if isinstance(exc, ConnectionRefusedError):
        return ConnectFailed(ConnectFailure.REFUSED, _text(exc))
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return ConnectFailed(ConnectFailure.RESET, f"reset during connect: {_text(exc)}")
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return ConnectFailed(ConnectFailure.REFUSED, _text(exc))
    return ConnectFailed(ConnectFailure.OTHER, f"{type(exc).__name__}: {_text(exc)}")


class Connection(asyncio.Protocol):
    """HTTP over one transport. HTTP/1.1: one request at a time (the caller keeps to that);
    HTTP/2: any number of streams."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self.http2 = False
        self.local: tuple[str, int] | None = None
        self.peer: tuple[str, int] | None = None
        self.served = 0  # answers it carried
        self.closed: WireError | None = None  # why it cannot carry another request
        self._h1: tuple[http1.ResponseReader, asyncio.Future[Response]] | None = None
        self._h2: H2Client | None = None
        self._streams: dict[int, asyncio.Future[Response]] = {}

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
            _settle(future, exc)
            self._give_up(exc)
            return
        if response is not None:
            self._h1 = None
            self.served += 1
            _settle(future, _h1_response(response))
            if not response.keep_alive:
                self._give_up(ConnectionClosed("the server asked to close", reset=False,
                                               answered=True))  # fmt: skip

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
                _settle(future, error)
            else:
                _settle(future, _h1_response(response))
        if self._h2 is not None:
            lost = ConnectionClosed(
                detail or "server closed the connection", reset=reset, answered=False
            )
            self._dispatch(self._h2.fail(self._h2.broken or lost))
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
        self, target: str, authority: str, headers: list[tuple[str, str]]
    ) -> Response:
        if self._transport is None or not self.usable:
            raise self.closed or ConnectionClosed("connection not usable", reset=False,
                                                  answered=False, idle=True)  # fmt: skip
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        stream_id = 0
        if self._h2 is not None:
            pseudo = [(":method", "GET"), (":scheme", "https"), (":authority", authority)]
            pseudo.append((":path", target))
            stream_id = self._h2.start_request(pseudo + [(n.lower(), v) for n, v in headers])
            self._streams[stream_id] = future
            self._flush()
        else:
            self._h1 = (http1.ResponseReader(), future)
            self._transport.write(http1.format_request(target, authority, headers))
        try:
            return await future
        except asyncio.CancelledError:
            self._abandon(stream_id)
            raise

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
            self._streams.pop(stream_id, None)
            self._h2.cancel(stream_id)
            self._flush()
        else:
            self._h1 = None
            self._give_up(ConnectionClosed("given up by the client", reset=False,
                                           answered=False))  # fmt: skip

    def _dispatch(self, events: list[Answer | Failed]) -> None:
        for event in events:
            future = self._streams.pop(event.stream_id, None)
            if future is None:
                continue
            if isinstance(event, Answer):
                self.served += 1
                _settle(future, Response(event.status, event.headers, event.body, "HTTP/2"))
            else:
                _settle(future, event.error)

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
        return f"connection reset by peer: {_text(exc)}"
    if isinstance(exc, BrokenPipeError):
        return "server closed the connection (a write met the closed socket)"
    if exc is not None:
        return f"connection lost: {type(exc).__name__}: {_text(exc)}"
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


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
