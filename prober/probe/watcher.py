"""The probe's side of a watch stream: one LIST, one WATCH read to its end, one heartbeat
write, each a call that returns plain facts and never raises for what the network or the
server did. The reflector's loop (what to do next) is the daemon's (`daemon.watches.kind`), on
`core.reflector`'s decisions.

Connections are client-go's: on HTTP/2 the watch stream's LISTs and WATCHes share one
connection of their own, whose health is checked as client-go's transport does (a PING after
`read_idle` seconds without a frame; no ACK within `ping_timeout`: the connection is dropped,
and the watch on it ends as `ping`); on HTTP/1.1 each call has a connection of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from prober import __version__
from prober.common.clock import Clock
from prober.core.header import REQUEST_HEADER, ShutdownHeader
from prober.core.models import Protocol
from prober.core.reflector import Outcome
from prober.probe.classify import classify_response
from prober.probe.credentials import TokenFile
from prober.probe.wire.connection import Connection, address
from prober.probe.wire.dial import Endpoint, connect, resolve
from prober.probe.wire.errors import (
    BodyLimit,
    ConnectFailed,
    ConnectFailure,
    ConnectionClosed,
    Http2Ended,
    ProtocolViolation,
    Stalled,
    WireError,
)
from prober.probe.wire.stream import StreamLimits


@dataclass(frozen=True, slots=True)
class Answered:
    """What a LIST, a WATCH's start or a write met."""

    outcome: Outcome
    status: int | None = None
    shutdown: ShutdownHeader | None = None
    version: str = ""  # a LIST's resourceVersion; a written object's
    detail: str = ""
    local: str | None = None  # a WATCH's connection, "ip:port" each
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class Ended:
    """How an established watch ended."""

    how: str  # core.watch.END_HOWS
    events: int
    detail: str = ""


@dataclass(frozen=True, slots=True)
class WatchTarget:
    url: str  # base URL of the apiserver through the LB
    context: ssl.SSLContext
    protocol: Protocol
    server_name: str | None = None
    token: TokenFile | None = None
    timeout: float = 5.0  # a LIST's or a write's deadline, and a watch's to start
    read_idle: float = 30.0  # HTTP2_READ_IDLE_TIMEOUT_SECONDS
    ping_timeout: float = 15.0  # HTTP2_PING_TIMEOUT_SECONDS
    keepalive: float | None = 30.0  # client-go's dialer's TCP keepalive; None: off
    stall: float = 30.0  # an event begun must end within this
    limits: StreamLimits = field(default_factory=StreamLimits)


# Runs a named background task, guarded: its failure is logged and counted, not lost (the
# daemon's `Supervisor.spawn_once`).
Spawn = Callable[[str, Callable[[], Awaitable[None]]], "asyncio.Task[None]"]


class WatchClient:
    """`clock` paces the HTTP/2 health check, whose task `spawn` runs; an HTTP/1.1 client has
    none, and may go without."""

    def __init__(
        self, target: WatchTarget, name: str, clock: Clock, spawn: Spawn | None = None
    ) -> None:
        if target.protocol is Protocol.HTTP2 and spawn is None:
            raise ValueError(f"{name}: an HTTP/2 watch client needs a spawn for its health check")
        self.target = target
        self._clock = clock
        self._spawn = spawn
        self._checks = 0  # health checks begun: each task's name is its own
        url = urllib.parse.urlsplit(target.url)
        if url.scheme != "https" or not url.hostname:
            raise ValueError(f"{target.url}: not an https URL")
        self._endpoint = Endpoint(url.hostname, url.port or 443, target.context,
                                  target.server_name, target.keepalive)  # fmt: skip
        self._agent = f"prober/{__version__} {name}"
        self._kept: Connection | None = None  # HTTP/2: shared by this stream's calls
        self._health: asyncio.Task[None] | None = None
        self.ping_failed = False

    # -- the calls ----------------------------------------------------------------------
    async def get(self, path: str) -> Answered:
        """A LIST; its resourceVersion."""
        return await self._call("GET", path, b"")

    async def put(self, path: str, body: bytes) -> Answered:
        return await self._call("PUT", path, body)

    async def post(self, path: str, body: bytes) -> Answered:
        return await self._call("POST", path, body)

    async def watch(
        self, path: str, on_start: Callable[[Answered], None], on_line: Callable[[bytes], str]
    ) -> Ended | None:
        """Open the watch; `on_start` hears how that went. Once established, each line goes
        to `on_line`, which returns "" to read on or how the watch ended (a 410, a bad
        event). None: it never started (`on_start` said why)."""
        try:
            async with asyncio.timeout(self.target.timeout):
                conn = await self._connection()
                stream = await conn.open_stream(
                    path, self._endpoint.authority, self._headers(), self.target.limits
                )
        except (WireError, TimeoutError) as exc:
            on_start(Answered(_outcome(exc), detail=_detail(exc)))
            return None
        started = _answered(stream.status, stream.headers, b"")
        if stream.status != 200:
            on_start(started)
            stream.close()
            return None
        on_start(
            Answered(Outcome.OK, 200, started.shutdown, local=address(conn.local),
                     peer=address(conn.peer))
        )  # fmt: skip
        events = 0
        try:
            while (line := await stream.next_line(self.target.stall)) is not None:
                events += 1
                how = on_line(line)
                if how:
                    stream.close()
                    return Ended(how, events)
        except WireError as exc:
            return Ended(self._ended(exc), events, _detail(exc))
        finally:
            if self.target.protocol is Protocol.HTTP1:
                conn.close()
        return Ended("timeout", events)

    async def aclose(self) -> None:
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        if self._kept is not None:
            self._kept.close()

    # -- internals ------------------------------------------------------------------------
    async def _call(self, method: str, path: str, body: bytes) -> Answered:
        try:
            async with asyncio.timeout(self.target.timeout):
                conn = await self._connection()
                try:
                    response = await conn.request(
                        path, self._endpoint.authority, self._headers(), method=method, body=body
                    )
                finally:
                    if self.target.protocol is Protocol.HTTP1:
                        conn.close()
        except (WireError, TimeoutError) as exc:
            return Answered(_outcome(exc), detail=_detail(exc))
        return _answered(response.status, response.headers, response.body)

    async def _connection(self) -> Connection:
        if self.target.protocol is Protocol.HTTP1:
            return await connect(self._endpoint, await resolve(self._endpoint))
        if self._kept is None or not self._kept.usable:
            if self._kept is not None:
                self._kept.close()
            self._kept = await connect(self._endpoint, await resolve(self._endpoint))
            if self._health is not None:
                self._health.cancel()
            assert self._spawn is not None, "checked as the client was made"
            self._checks += 1
            kept = self._kept
            self._health = self._spawn(
                f"watch health {self._agent} #{self._checks}", lambda: self._check(kept)
            )
        return self._kept

    async def _check(self, conn: Connection) -> None:
        """client-go's HTTP/2 health check: PING after `read_idle` of silence. The
        connection's `last_read` is a wire timestamp, on the clock's monotonic scale."""
        try:
            while conn.closed is None:
                idle = self._clock.monotonic() - conn.last_read
                if idle < self.target.read_idle:
                    await self._clock.sleep(self.target.read_idle - idle)
                    continue
                try:
                    async with asyncio.timeout(self.target.ping_timeout):
                        await conn.ping()
                except (WireError, TimeoutError):
                    self.ping_failed = True
                    conn.abort()
                    return
        except Exception:
            conn.abort()  # unchecked, the connection could hold a watch blind: end it
            raise

    def _headers(self) -> list[tuple[str, str]]:
        headers = [
            (REQUEST_HEADER, "true"),
            ("User-Agent", self._agent),
            ("Accept", "application/json"),
            ("Content-Type", "application/json"),
        ]
        token = self.target.token
        bearer = token.header() if token is not None else None
        if bearer is not None:
            headers.append(("Authorization", bearer))
        return headers

    def _ended(self, exc: WireError) -> str:
        if self.ping_failed:
            self.ping_failed = False
            return "ping"
        return _end_how(exc)


def _answered(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> Answered:
    _, _, shutdown = classify_response(status, headers)
    if status == 410:
        return Answered(Outcome.GONE, status, shutdown, detail="410 Gone")
    if status == 429:
        return Answered(Outcome.TOO_MANY, status, shutdown, detail="429")
    if not 200 <= status < 300:
        return Answered(Outcome.FAILED, status, shutdown, detail=f"HTTP {status}")
    version = ""
    if body:
        try:
            version = str(json.loads(body)["metadata"]["resourceVersion"])
        except (ValueError, KeyError, TypeError):
            return Answered(Outcome.FAILED, status, shutdown, detail="an answer without a version")
    return Answered(Outcome.OK, status, shutdown, version)


def _outcome(exc: BaseException) -> Outcome:
    if isinstance(exc, ConnectFailed) and exc.kind is ConnectFailure.REFUSED:
        return Outcome.REFUSED
    return Outcome.FAILED


def _end_how(exc: WireError) -> str:
    if isinstance(exc, Stalled):
        return "stall"
    if isinstance(exc, BodyLimit):
        return "too_large"
    if isinstance(exc, ProtocolViolation):
        return "error"
    if isinstance(exc, Http2Ended):
        return "goaway"
    if isinstance(exc, ConnectionClosed):
        return "reset" if exc.reset else "closed"
    return "closed"


def _detail(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:160]
