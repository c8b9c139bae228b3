"""One request for this stream -> one `Sample`. The scheduler lives elsewhere.

A `Prober` belongs to one (stream, worker). `reused` keeps exactly one connection for its life:
HTTP/1.1 carries one request at a time on it, so the scheduler skips a tick that finds it busy
(`capacity` 1) rather than queue behind it or open another; HTTP/2 multiplexes up to
`max_in_flight` streams over it. When the kept connection is closed, breaks or times out, the
next request opens a replacement and says why (`replaced`). `new` opens a fresh TCP+TLS
connection per request and closes it after the answer.

A request is sent again, once, on a new connection where Go's transport would (what
openshift/origin's samplers use), so that the two tools count the same disruption: an HTTP/2
stream above a graceful GOAWAY's `last_stream_id` (the server never processed it), and an
HTTP/1.1 request on a kept connection the server closed while idle, before a byte of the
answer came. The sample says so (`retried`, and the first attempt's error in `detail`);
`t` and `reused` describe the attempt that got the answer.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
import uuid
from dataclasses import dataclass

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
from prober.probe.classify import classify_error, classify_response, clip
from prober.probe.credentials import TokenFile
from prober.probe.wire.connection import Connection as WireConnection
from prober.probe.wire.connection import Response, address
from prober.probe.wire.dial import Endpoint, connect, resolve
from prober.probe.wire.errors import ConnectionClosed, GoAway, WireError

RAISES_BEFORE_DROPPING = 2  # samples in a row raising before the kept connection goes


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """Everything a prober needs to know about where it sends requests."""

    url: str  # base URL and path
    context: ssl.SSLContext
    server_name: str | None = None
    token: TokenFile | None = None
    timeout: float = 5.0
    max_in_flight: int = 10


@dataclass(slots=True)
class _Attempt:
    """What the wire did for this request: facts for the sample."""

    on_wire: float | None = None  # when the request first touched the network
    connected: bool = False  # it opened (or tried to open) a connection
    kept: bool = False  # it went over the worker's kept connection
    local: tuple[str, int] | None = None
    peer: tuple[str, int] | None = None
    replaced: Replacement | None = None
    replaced_port: int | None = None
    retried: str | None = None
    first_error: str = ""
    up_at: float | None = None  # when its fresh connection was up (TCP and TLS)
    tcp_at: float | None = None  # when its fresh connection's TCP connect was done
    opened_at: float | None = None  # when the connection it went over began its connect
    sent_at: float | None = None  # when the request was written

    def at(self, conn: WireConnection) -> None:
        self.local, self.peer = conn.local, conn.peer

    def age(self, start: float) -> float | None:
        """How old its connection was at `start` (the sample's `t`); None: it had none."""
        if self.opened_at is None:
            return None
        return round(max(start - self.opened_at, 0.0), 6)

    def setup(self) -> tuple[float | None, float | None]:
        """Its fresh connection's TCP connect and TLS handshake, in seconds; None without."""
        if self.on_wire is None or self.tcp_at is None or self.up_at is None:
            return None, None
        return round(self.tcp_at - self.on_wire, 6), round(self.up_at - self.tcp_at, 6)

    def phases(self, start: float) -> dict[str, float]:
        """What of it had happened, in seconds after `start` (the sample's `t`)."""
        marks = {"connected": self.up_at, "sent": self.sent_at}
        return {k: round(max(v - start, 0.0), 6) for k, v in marks.items() if v is not None}

    @property
    def reused(self) -> bool | None:
        if self.connected:
            return False
        return True if self.kept else None


class Prober:
    def __init__(self, stream: StreamId, target: ProbeTarget, run_start: float) -> None:
        self.stream = stream
        self._target = target
        self._run_start = run_start
        url = urllib.parse.urlsplit(target.url)
        if url.scheme != "https" or not url.hostname:
            raise ValueError(f"{target.url}: not an https URL")
        self._endpoint = Endpoint(url.hostname, url.port or 443, target.context, target.server_name)
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._headers = [
            (REQUEST_HEADER, "true"),
            ("User-Agent", f"prober/{__version__} {stream.name}"),
            ("Accept", "application/json"),
        ]
        reused = stream.connection is Connection.REUSED
        self._reused = reused
        self._kept: WireConnection | None = None
        self._kept_port: int | None = None  # the local port of the last kept connection
        self._opening = asyncio.Lock()  # HTTP/2 requests while the kept one is being opened
        self._retired: set[WireConnection] = set()  # given up, closed when their last answer is in
        # Why the kept connection's successor will be opened: set as each request ends.
        self._replacing: Replacement | None = Replacement.FIRST if reused else None
        one_at_a_time = reused and stream.protocol is Protocol.HTTP1
        self.capacity = 1 if one_at_a_time else target.max_in_flight
        self._deadlines: set[asyncio.Timeout] = set()  # of the requests in flight
        self._cut: set[asyncio.Timeout] = set()  # deadlines the stop brought forward
        self._stopping = False
        self._raised = 0  # samples in a row that raised (a bug, not the network)

    def stop(self) -> None:
        """The daemon is stopping and its grace is over: end the requests in flight now, and
        any that starts from now on at once, each as a sample of class `stopped` with what
        of it had happened, instead of vanishing with its task. Not a timeout: the request
        was cut by us, not left unanswered by the server, so it is no failure."""
        self._stopping = True
        now = asyncio.get_running_loop().time()
        for deadline in self._deadlines:
            if not deadline.expired():
                self._cut.add(deadline)
                deadline.reschedule(now)

    async def aclose(self) -> None:
        for conn in (self._kept, *self._retired):
            if conn is not None:
                conn.close()
        self._kept = None
        self._retired.clear()

    async def sample(self) -> Sample:
        """Send one request now and describe what happened; never raises for network faults.

        Anything else it raises is a bug, left for the scheduler's task to fail and the
        supervisor to restart (never a sample of class `other`). Twice in a row, the kept
        connection goes with it: a connection a server put in a state our code cannot take
        (SETTINGS_MAX_FRAME_SIZE=0 once) would fail every restart on it, for ever."""
        try:
            found = await self._sample()
        except Exception:
            self._raised += 1
            if self._raised >= RAISES_BEFORE_DROPPING and self._kept is not None:
                self._retire(self._kept)
                self._kept = None
                self._replacing = Replacement.FAILED
            raise
        self._raised = 0
        return found

    async def _sample(self) -> Sample:
        headers = list(self._headers)
        headers.append(("Audit-ID", audit_id := str(uuid.uuid4())))
        token = self._target.token
        bearer = token.header() if token is not None else None
        if bearer is not None:
            headers.append(("Authorization", bearer))
        attempt = _Attempt()
        wall, start = time.time(), time.monotonic()
        response: Response | None = None
        shutdown: ShutdownHeader | None = None
        error: ErrorClass | None
        # A request begun after the stop's cut (its task had not run yet) goes no further.
        deadline = asyncio.timeout(0 if self._stopping else self._target.timeout)
        if self._stopping:
            self._cut.add(deadline)
        self._deadlines.add(deadline)
        try:
            async with deadline:
                response = await self._exchange(attempt, headers)
            error, detail, shutdown = classify_response(response.status, response.headers)
        except (WireError, TimeoutError) as exc:
            error, detail = classify_error(exc)
            if isinstance(exc, TimeoutError) and deadline in self._cut:
                error, detail = ErrorClass.STOPPED, _cut_short(attempt)
        finally:
            self._deadlines.discard(deadline)
            self._cut.discard(deadline)
        end = time.monotonic()
        self._after(attempt, response, error)
        if attempt.retried:
            detail = clip(f"{detail}; " if detail else "") + clip(
                f"sent again after {attempt.first_error}"
            )
        # `t` is when the request reached the network (the LB picks a server at connect time,
        # or sees the request on a kept connection): on a loaded machine the event loop may
        # take a while to get from `sample()` there, and T0 bounds need the later instant.
        if attempt.on_wire is not None and attempt.on_wire < end:
            wall, start = wall + (attempt.on_wire - start), attempt.on_wire
        phases = attempt.phases(start) if error is ErrorClass.STOPPED else {}
        connect, tls = attempt.setup()
        return Sample(
            ts=rfc3339(wall),
            t=round(start - self._run_start, 6),
            dur=round(end - start, 6),
            stream_id=self.stream,
            reused=attempt.reused,
            http_version=response.http_version if response is not None else None,
            status=response.status if response is not None else None,
            error=error,
            detail=detail,
            shutdown=shutdown,
            audit_id=audit_id,
            local_port=attempt.local[1] if attempt.local else None,
            peer=address(attempt.peer),
            local_ip=attempt.local[0] if attempt.local else None,
            replaced=attempt.replaced,
            replaced_port=attempt.replaced_port,
            retried=attempt.retried,
            phases=phases,
            connection_age=attempt.age(start),
            connect=connect,
            tls=tls,
        )

    async def _exchange(self, attempt: _Attempt, headers: list[tuple[str, str]]) -> Response:
        try:
            return await self._once(attempt, headers)
        except GoAway as exc:
            if not (exc.graceful and exc.unprocessed):
                raise
            attempt.retried = "goaway"
            attempt.first_error = str(exc)
        except ConnectionClosed as exc:
            if not exc.idle:
                raise
            attempt.retried = "closed_idle"
            attempt.first_error = f"the server closed the kept connection: {exc.detail}"
        return await self._once(attempt, headers)

    async def _once(self, attempt: _Attempt, headers: list[tuple[str, str]]) -> Response:
        attempt.connected = attempt.kept = False
        attempt.on_wire = attempt.up_at = attempt.sent_at = attempt.opened_at = None
        attempt.tcp_at = None
        conn = await (self._kept_connection(attempt) if self._reused else self._open(attempt))
        attempt.at(conn)
        attempt.opened_at = conn.opened_at
        if attempt.on_wire is None:
            attempt.on_wire = time.monotonic()
        attempt.sent_at = time.monotonic()  # `request` writes it before its first wait
        try:
            return await conn.request(self._path, self._endpoint.authority, headers)
        finally:
            if not self._reused:
                conn.close()
            elif conn in self._retired and conn.in_flight == 0:
                self._retired.discard(conn)
                conn.close()

    async def _open(self, attempt: _Attempt) -> WireConnection:
        attempt.connected = True  # a fresh connection, whatever becomes of it
        addresses = await resolve(self._endpoint)
        attempt.on_wire = time.monotonic()  # after the name lookup: the connect starts now
        conn = await connect(self._endpoint, addresses)
        attempt.up_at = time.monotonic()
        attempt.tcp_at = conn.tcp_up_at
        conn.opened_at = attempt.on_wire  # its requests' age counts from here (`Sample`)
        return conn

    async def _kept_connection(self, attempt: _Attempt) -> WireConnection:
        kept = self._kept
        if kept is not None and kept.usable:
            attempt.kept = True
            return kept
        async with self._opening:
            kept = self._kept
            if kept is not None and kept.usable:  # opened while this one waited
                attempt.kept = True
                return kept
            if kept is not None:
                self._retire(kept)
                self._kept = None
            attempt.replaced = self._replacing or Replacement.CLOSED
            attempt.replaced_port = self._kept_port  # what a kept connection's bound needs
            self._replacing = None
            self._kept = await self._open(attempt)
            self._kept_port = self._kept.local[1] if self._kept.local else None
            return self._kept

    def _after(
        self, attempt: _Attempt, response: Response | None, error: ErrorClass | None
    ) -> None:
        """For a reused worker: what its next replacement will say, and whether the kept
        connection is given up (a timeout: a black-holed connection would time out every
        request after it; Go's transport pings and drops it, we drop it)."""
        if not self._reused:
            return
        if error is ErrorClass.TIMEOUT:
            self._replacing = Replacement.TIMEOUT
            if self._kept is not None and not self._stopping:
                self._retire(self._kept)
                self._kept = None
        elif error is not None and response is None:
            self._replacing = Replacement.FAILED
        elif attempt.kept:
            self._replacing = None  # the kept connection still carries requests

    def _retire(self, conn: WireConnection) -> None:
        """Close it once no request is in flight on it: each ends on its own deadline rather
        than on whatever a torn socket would raise."""
        if conn.in_flight == 0:
            conn.close()
        else:
            self._retired.add(conn)


def _cut_short(attempt: _Attempt) -> str:
    """Where the stop cut a request: what a reader of the sample needs beside its phases."""
    if attempt.sent_at is not None:
        return "cut by the daemon's stop: sent, no answer yet"
    if attempt.on_wire is not None:
        return "cut by the daemon's stop while connecting (TCP and TLS)"
    return "cut by the daemon's stop before it was sent"
