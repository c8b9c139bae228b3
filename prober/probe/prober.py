"""One request for this stream -> one `Sample`. The scheduler lives elsewhere.

A `Prober` belongs to one (stream, worker). `reused` keeps exactly one connection for its life
(a transport whose pool holds one): HTTP/1.1 carries one request at a time on it, so the
scheduler skips a tick that finds it busy (`capacity` 1) rather than queue behind it or open
another; HTTP/2 multiplexes up to `max_in_flight` streams over it. When the kept connection is
closed, breaks or times out, the next request opens a replacement and says why (`replaced`).
`new` makes a fresh transport, hence a fresh TCP+TLS connection, per request. A shared pool
with keep-alive off is not enough: concurrent HTTP/2 requests would share a connection,
exactly when a slow server makes requests overlap. Whether a connection was really made is
observed through httpcore's trace hooks and recorded with the local port and peer address, so
a sample that asked for `new` but reused (or the reverse) is visible.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from prober import __version__
from prober.core.header import REQUEST_HEADER, ShutdownHeader
from prober.core.models import (
    Connection,
    ErrorClass,
    Protocol,
    Replacement,
    Sample,
    StreamId,
    rfc3339,
)
from prober.probe.classify import NETWORK_ERRORS, classify_exception, classify_response
from prober.probe.credentials import TokenFile
from prober.probe.httpcore_fixes import install as _install_httpcore_fixes

_install_httpcore_fixes()


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """Everything a prober needs to know about where it sends requests."""

    url: str  # base URL and path
    context: ssl.SSLContext
    server_name: str | None = None
    token: TokenFile | None = None
    timeout: float = 5.0
    max_in_flight: int = 10


class _Trace:
    """What httpcore did for one request: made a connection or not, and between which ends."""

    __slots__ = ("abandoned", "connected", "local", "on_wire", "peer", "sent")

    def __init__(self) -> None:
        self.connected = False
        self.sent = False
        self.abandoned = False  # it went over a kept pool given up on while it was in flight
        self.on_wire: float | None = None  # when the request first touched the network
        self.local: tuple[str, int] | None = None
        self.peer: tuple[str, int] | None = None

    async def __call__(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.started":
            self.connected = True
            self.on_wire = time.monotonic()
        elif name == "connection.connect_tcp.complete":
            self.note_stream(info.get("return_value"))
        elif name.endswith(".send_request_headers.started"):
            self.sent = True
            if self.on_wire is None:
                self.on_wire = time.monotonic()

    def note_stream(self, stream: Any) -> None:
        if stream is None or self.local is not None:
            return
        try:
            self.local = stream.get_extra_info("client_addr")
            self.peer = stream.get_extra_info("server_addr")
        except OSError:
            # A socket closed under us has no addresses left: that is no reason to call a
            # request that was answered a failure.
            self.local = self.peer = None

    @property
    def reused(self) -> bool | None:
        if self.connected:
            return False
        return True if self.sent else None


class Prober:
    def __init__(self, stream: StreamId, target: ProbeTarget, run_start: float) -> None:
        self.stream = stream
        self._target = target
        self._run_start = run_start
        self._headers = {
            REQUEST_HEADER: "true",
            "User-Agent": f"prober/{__version__} {stream.name}",
            "Accept": "application/json",
        }
        timeout = target.timeout
        self._extensions: dict[str, Any] = {
            "timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        }
        if target.server_name:
            self._extensions["sni_hostname"] = target.server_name
        reused = stream.connection is Connection.REUSED
        self._kept = self._transport() if reused else None
        # Why the kept connection's successor will be opened: set as each request ends.
        self._replacing: Replacement | None = Replacement.FIRST if reused else None
        one_at_a_time = reused and stream.protocol is Protocol.HTTP1
        self.capacity = 1 if one_at_a_time else target.max_in_flight
        self._users: dict[httpx.AsyncHTTPTransport, int] = {}  # requests in flight on each
        self._abandoned: set[httpx.AsyncHTTPTransport] = set()  # replaced, still in use
        self._deadlines: set[asyncio.Timeout] = set()  # of the requests in flight
        self._stopping = False

    def _transport(self) -> httpx.AsyncHTTPTransport:
        reused = self.stream.connection is Connection.REUSED
        # One connection per pool either way. A reused HTTP/1.1 worker never has two requests
        # out (the scheduler skips its tick instead: queueing behind a hung request once made
        # 45 queued ones time out), so its pool never waits and never opens a second one.
        limits = httpx.Limits(
            max_connections=1,
            max_keepalive_connections=1 if reused else 0,
            keepalive_expiry=None,
        )
        http2 = self.stream.protocol is Protocol.HTTP2
        return httpx.AsyncHTTPTransport(
            verify=self._target.context, http1=not http2, http2=http2, limits=limits, retries=0
        )

    async def _replace_kept(self) -> None:
        """Drop a kept connection that let a request time out. httpcore keeps an HTTP/2
        connection whose stream was abandoned; if the peer black-holed it, every later
        request would time out too (Go's transport pings and drops it; we drop it)."""
        old, self._kept = self._kept, self._transport()
        # Requests still in flight on it end on their own (each has its deadline); closing
        # the pool under them would fail them with whatever the torn socket raises.
        if old is not None and not self._users.get(old):
            await old.aclose()
        elif old is not None:
            self._abandoned.add(old)

    def expire(self) -> None:
        """The daemon is stopping: end the requests in flight now, as timeouts, so that each
        is still recorded as the sample it is instead of vanishing with its task."""
        self._stopping = True
        now = asyncio.get_running_loop().time()
        for deadline in self._deadlines:
            if not deadline.expired():
                deadline.reschedule(now)

    async def aclose(self) -> None:
        if self._kept is not None:
            await self._kept.aclose()

    async def sample(self) -> Sample:
        """Send one request now and describe what happened; never raises for network faults."""
        headers = dict(self._headers)
        headers["Audit-ID"] = audit_id = str(uuid.uuid4())
        token = self._target.token
        bearer = token.header() if token is not None else None
        if bearer is not None:
            headers["Authorization"] = bearer
        trace = _Trace()
        request = httpx.Request(
            "GET",
            self._target.url,
            headers=headers,
            extensions={**self._extensions, "trace": trace},
        )
        wall, start = time.time(), time.monotonic()
        status: int | None = None
        http_version: str | None = None
        shutdown: ShutdownHeader | None = None
        error: ErrorClass | None
        deadline = asyncio.timeout(self._target.timeout)
        self._deadlines.add(deadline)
        try:
            async with deadline:
                status, http_version, raw_headers = await self._send(request, trace)
            error, detail, shutdown = classify_response(status, raw_headers)
        except NETWORK_ERRORS as exc:
            error, detail = classify_exception(exc, abandoned=trace.abandoned)
            if self._stopping and error is ErrorClass.TIMEOUT:
                detail = "no answer before the daemon stopped"
        finally:
            self._deadlines.discard(deadline)
        end = time.monotonic()
        # `t` is when the request reached the network (the LB picks a server at connect time,
        # or sees the request on a kept connection): on a loaded machine the event loop may
        # take a while to get from `sample()` there, and T0 bounds need the later instant.
        if trace.on_wire is not None and trace.on_wire < end:
            wall, start = wall + (trace.on_wire - start), trace.on_wire
        replaced = self._note_kept(trace, status, error)
        if error is ErrorClass.TIMEOUT and self._kept is not None and not self._stopping:
            await self._replace_kept()
        return Sample(
            ts=rfc3339(wall),
            t=round(start - self._run_start, 6),
            dur=round(end - start, 6),
            stream=self.stream.name,
            target=self.stream.target,
            lb=self.stream.lb,
            protocol=self.stream.protocol,
            connection=self.stream.connection,
            reused=trace.reused,
            http_version=http_version,
            status=status,
            error=error,
            detail=detail,
            shutdown=shutdown,
            audit_id=audit_id,
            local_port=trace.local[1] if trace.local else None,
            peer=_address(trace.peer),
            replaced=replaced,
        )

    def _note_kept(
        self, trace: _Trace, status: int | None, error: ErrorClass | None
    ) -> Replacement | None:
        """For a reused worker: why this request had to open a connection (None if it went
        over the kept one), and what the next one will say if it has to."""
        if self._kept is None:
            return None
        replaced = None
        if trace.connected:
            # Nothing pending: the kept connection was closed under us while idle, or after
            # an answer that asked for it (Connection: close, GOAWAY).
            replaced = self._replacing or Replacement.CLOSED
            self._replacing = None
        if error is ErrorClass.TIMEOUT:
            self._replacing = Replacement.TIMEOUT
        elif error is not None and status is None:
            self._replacing = Replacement.FAILED
        elif trace.sent and not trace.connected:
            self._replacing = None  # the kept connection still carries requests
        return replaced

    async def _send(
        self, request: httpx.Request, trace: _Trace
    ) -> tuple[int, str | None, list[tuple[bytes, bytes]]]:
        transport = self._kept or self._transport()
        self._users[transport] = self._users.get(transport, 0) + 1
        try:
            response = await transport.handle_async_request(request)
            # While the connection is surely open: once the body is read the pool may close it.
            trace.note_stream(response.extensions.get("network_stream"))
            try:
                await response.aread()
            finally:
                await response.aclose()
        finally:
            trace.abandoned = transport in self._abandoned
            self._users[transport] -= 1
            if not self._users[transport]:
                del self._users[transport]
                self._abandoned.discard(transport)
                if transport is not self._kept:  # a fresh one, or a kept one since replaced
                    await transport.aclose()
        version = response.extensions.get("http_version")
        return response.status_code, version.decode() if version else None, response.headers.raw


def _address(addr: tuple[str, int] | None) -> str | None:
    if addr is None:
        return None
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
