"""One accepted connection: bytes in and out of a transport, nothing else.

The sans-IO protocol (`Http1Protocol` / `Http2Protocol`) parses and frames; the `Application`
decides; this class moves bytes, keeps the timers (read-header, idle, GOAWAY linger) and
reports to the server what happened to the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from prober.common.clock import Clock
from prober.core.truthlog import PeerGoaway, ProtocolError
from prober.fakeapiserver import events as ev
from prober.fakeapiserver.api import MAX_BODY
from prober.fakeapiserver.app import Application, ConnInfo, Exchange, Response
from prober.fakeapiserver.http1 import Http1Protocol
from prober.fakeapiserver.http2 import Http2Protocol
from prober.fakeapiserver.lifecycle import Lifecycle
from prober.fakeapiserver.metrics import ServerMetrics
from prober.fakeapiserver.options import ApiServerOptions
from prober.fakeapiserver.truth import TruthLog

log = logging.getLogger("prober.fakeapiserver")
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CLOSE_GRACE = 0.05  # seconds a closing transport gets to flush before its socket is closed
# net/http's rstAvoidanceDelay: after answering a request it could not parse, it waits this
# long before closing, so that what the client is still sending does not turn the close into
# a reset that destroys the answer before the client read it. (Go stops reading; asyncio's TLS
# layer would then fail on the unread data, so the fake reads it and throws it away.)
RST_AVOIDANCE_DELAY = 0.5
# A watcher whose client reads slower than events come is closed, as the watch cache closes
# one whose buffer is full ("Forcing watcher close due to unresponsiveness").
WATCH_BUFFER_LIMIT = 4 << 20


class Watch:
    """An open watch stream: the server ends it while draining, its timeout does, or its
    source (the watch cache) does; it is also the `WatchSink` the source writes events to."""

    def __init__(self, connection: ServerConnection, exchange: Exchange, timeout: float) -> None:
        self.connection = connection
        self.exchange = exchange
        self._timer = asyncio.get_running_loop().call_later(timeout, self.end, "timeout")
        self.ended = False
        self.how = ""
        self.events = 0
        self.started_mono = connection.server.clock.monotonic()
        self.stop_source: Callable[[], None] = lambda: None

    def end(self, how: str = "drained") -> None:
        """End the stream cleanly: the last chunk, or END_STREAM."""
        if self.ended:
            return
        self.forget(how)
        self.connection.end_watch(self)

    def forget(self, how: str) -> None:
        if not self.ended:
            self.ended, self.how = True, how
        self._timer.cancel()
        self.stop_source()

    # -- WatchSink ----------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.ended:
            return
        self.events += 1
        if self.connection.send_watch_data(self, data) > WATCH_BUFFER_LIMIT:
            self.end("too-slow")

    def finish(self, how: str) -> None:
        self.end(how)

    @property
    def ident(self) -> tuple[int, int]:
        return self.exchange.conn.id, self.exchange.stream_id


class ConnectionOwner(Protocol):
    """What a connection needs of the server that accepted it (`server.ApiServer`): named
    here so that the connection does not import the server, which imports it."""

    clock: Clock
    app: Application
    lifecycle: Lifecycle
    metrics: ServerMetrics
    options: ApiServerOptions
    truth: TruthLog

    def next_connection_id(self) -> int: ...
    def connection_opened(self, connection: ServerConnection) -> None: ...
    def connection_closed(self, connection: ServerConnection, by: str, reason: str) -> None: ...
    def goaway_sent(
        self, connection: ServerConnection, last_stream_id: int, reason: str
    ) -> None: ...
    def watch_started(self, watch: Watch) -> None: ...
    def watch_finished(self, watch: Watch) -> None: ...


class ServerConnection(asyncio.Protocol):
    def __init__(self, server: ConnectionOwner, tls: bool) -> None:
        self.server = server
        self.tls = tls
        self.proto: ev.ServerProtocol | None = None
        self.info: ConnInfo
        self.transport: asyncio.Transport | None = None
        self.requests = 0
        self._exchanges: dict[int, Exchange] = {}
        self._answering: dict[int, asyncio.Task[Response]] = {}  # served from storage
        self.watches: dict[int, Watch] = {}
        self._sniffed = bytearray()
        self._close_reason: str | None = None
        self._closed_by = "server"
        self._lost = False
        self._loop = asyncio.get_running_loop()
        self._deadline: float | None = None
        self._deadline_kind = ""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = 0.0
        self._linger: asyncio.TimerHandle | None = None
        self.close_mono: float | None = None
        self.close_wall: float | None = None

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        mono = self.server.clock.monotonic()
        self.info = ConnInfo(
            id=self.server.next_connection_id(),
            peer_ip=str(peer[0]),
            peer_port=int(peer[1]),
            tls=self.tls,
            accepted_mono=mono,
            late=self.server.lifecycle.is_late(mono),
        )
        if self.tls:
            ssl_object = transport.get_extra_info("ssl_object")
            alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
            self._choose(Http2Protocol() if alpn == "h2" else Http1Protocol())
        self.server.connection_opened(self)
        self._flush()

    def data_received(self, data: bytes) -> None:
        if self._close_reason == "protocol-error":
            return  # answered and closing: what the client still sends is thrown away
        if self.proto is None:
            data = self._sniff(data)
            if self.proto is None:
                self._arm_timer()
                return
        self._handle(self.proto.receive_data(data))
        self._flush()

    def eof_received(self) -> bool | None:
        if self._close_reason is not None:
            return None  # the peer answering our own close
        if self.proto is not None:
            self._handle(self.proto.receive_data(b""))
        self._close("eof", by="client")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        for handle in (self._timer, self._linger):
            if handle is not None:
                handle.cancel()
        for exchange in self._exchanges.values():
            self.server.app.abandon(exchange)
        self._exchanges.clear()
        for task in self._answering.values():
            task.cancel()
        self._answering.clear()
        if self._close_reason is not None and self._closed_by == "server":
            how = "cut"
        else:  # a reset: the client, or an LB that deleted the flow (AWS)
            how = "reset" if isinstance(exc, ConnectionResetError) else "client-gone"
        for watch in list(self.watches.values()):
            watch.forget(how)
            self.server.watch_finished(watch)
        self.watches.clear()
        if self._close_reason is not None:
            by, reason = self._closed_by, self._close_reason
        else:
            by, reason = "client", (type(exc).__name__ if exc else "eof")
        self.server.connection_closed(self, by, reason)

    # -- protocol choice ------------------------------------------------------------------
    def _sniff(self, data: bytes) -> bytes:
        """Without TLS there is no ALPN: HTTP/2 with prior knowledge starts with the preface."""
        self._sniffed += data
        head = bytes(self._sniffed[: len(H2_PREFACE)])
        if len(head) < len(H2_PREFACE) and H2_PREFACE.startswith(head):
            return b""
        self._choose(Http2Protocol() if head == H2_PREFACE else Http1Protocol())
        data = bytes(self._sniffed)
        self._sniffed.clear()
        return data

    def _choose(self, proto: ev.ServerProtocol) -> None:
        self.proto = proto
        self.info.protocol = proto.name
        self.server.metrics.connections[proto.name] += 1

    # -- events ---------------------------------------------------------------------------
    def _handle(self, events: list[ev.Event]) -> None:
        app = self.server.app
        for event in events:
            if isinstance(event, ev.RequestStarted):
                self.requests += 1
                exchange = app.start(self.info, event)
                self._exchanges[event.stream_id] = exchange
                if exchange.early is not None:
                    self._respond(exchange, exchange.early)
            elif isinstance(event, ev.BodyReceived):
                receiving = self._exchanges.get(event.stream_id)
                if receiving is not None and len(receiving.body) <= MAX_BODY:
                    receiving.body += event.data
            elif isinstance(event, ev.RequestEnded):
                ended = self._exchanges.pop(event.stream_id, None)
                if ended is not None and ended.early is None:
                    self._answer(ended, app.finish(ended))
            elif isinstance(event, ev.StreamAborted):
                self._aborted(event.stream_id)
            elif isinstance(event, ev.ProtocolFailed) and self._close_reason is None:
                self.server.truth.write(ProtocolError(conn=self.info.id, reason=event.reason))
                self._close_reason = "protocol-error"
            elif isinstance(event, ev.PeerClosed) and event.reason != "eof":
                self.server.truth.write(PeerGoaway(conn=self.info.id, reason=event.reason))

    def _aborted(self, stream_id: int) -> None:
        """The client reset the stream: forget its request, answer or watch."""
        aborted = self._exchanges.pop(stream_id, None)
        if aborted is not None:
            self.server.app.abandon(aborted)
        pending = self._answering.pop(stream_id, None)
        if pending is not None:
            pending.cancel()
        watch = self.watches.pop(stream_id, None)
        if watch is not None:
            watch.forget("client-gone")
            self.server.watch_finished(watch)

    def _answer(self, exchange: Exchange, result: Response | Awaitable[Response]) -> None:
        if isinstance(result, Response):
            self._respond(exchange, result)
            return
        stream_id = exchange.stream_id
        task = asyncio.ensure_future(result)
        self._answering[stream_id] = task

        def answered(done: asyncio.Task[Response]) -> None:
            if self._answering.pop(stream_id, None) is None or done.cancelled():
                self.server.app.abandon(exchange)
                return
            if done.exception() is not None:
                log.error("answering %s failed", exchange.target, exc_info=done.exception())
                self.server.app.abandon(exchange)
                self._close("internal-error")
                return
            self._respond(exchange, done.result())
            self._flush()

        task.add_done_callback(answered)

    def _respond(self, exchange: Exchange, response: Response) -> None:
        assert self.proto is not None
        watching = response.watch_timeout is not None
        answer = ev.Answer(
            exchange.stream_id,
            response.status,
            response.headers,
            response.body,
            end=not watching,
            close=response.close_reason is not None,
        )
        last = self.proto.send_response(answer)
        if last is not None:
            self.server.goaway_sent(self, last, response.close_reason or "")
        if watching and response.watch_timeout is not None:
            watch = Watch(self, exchange, response.watch_timeout)
            self.watches[exchange.stream_id] = watch
            self.server.watch_started(watch)
            if response.start is not None:
                stop = response.start(watch)
                if watch.ended:
                    stop()
                else:
                    watch.stop_source = stop
        if self.proto.name == "h1":
            self.proto_events_after_response()

    def proto_events_after_response(self) -> None:
        """HTTP/1.1: a pipelined request may be waiting behind the one just answered."""
        assert self.proto is not None
        if not self.proto.open_streams:
            self._handle(self.proto.next_events())

    def send_watch_data(self, watch: Watch, data: bytes) -> int:
        """Queue a watch event; returns the bytes waiting to be sent."""
        if self.proto is None or self._lost or self.transport is None:
            return 0
        self.proto.send_data(watch.exchange.stream_id, data, end=False)
        self._flush()
        return self.transport.get_write_buffer_size() if not self._lost else 0

    def end_watch(self, watch: Watch) -> None:
        """End a watch stream cleanly (drain or timeout)."""
        if self.watches.pop(watch.exchange.stream_id, None) is None or self.proto is None:
            return
        self.proto.send_data(watch.exchange.stream_id, b"", end=True)
        self.server.watch_finished(watch)
        if self.proto.name == "h1":
            self.proto_events_after_response()
        self._flush()

    # -- shutdown -------------------------------------------------------------------------
    def shutdown(self, reason: str) -> None:
        """net/http's Server.Shutdown for this connection: GOAWAY, or close when idle."""
        if self.proto is None:
            self._close(reason)
            return
        last = self.proto.start_graceful_close()
        if last is not None:
            self.server.goaway_sent(self, last, reason)
        self._flush()

    def abort(self) -> None:
        if self.transport is not None and not self._lost:
            self._close_reason = self._close_reason or "aborted"
            self.transport.abort()

    def _close(self, reason: str, by: str = "server") -> None:
        if self._close_reason is None:
            self._close_reason, self._closed_by = reason, by
            self.close_mono, self.close_wall = (
                self.server.clock.monotonic(),
                self.server.clock.wall(),
            )
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
            # asyncio's TLS transport waits up to 30 s for the peer's close_notify, which an
            # idle HTTP/2 client never reads; Go closes the socket right after its own.
            self._loop.call_later(CLOSE_GRACE, self._finish_close)

    def _finish_close(self) -> None:
        if self._lost or self.transport is None:
            return
        if self.transport.get_write_buffer_size():
            self._loop.call_later(CLOSE_GRACE, self._finish_close)
        else:
            self.transport.abort()

    def _flush(self) -> None:
        if self._lost or self.transport is None or self.proto is None:
            return
        data = self.proto.data_to_send()
        if data and not self.transport.is_closing():
            self.transport.write(data)
        if self._close_reason == "protocol-error":
            self._close_after_error()
        elif self.proto.wants_close:
            if self.proto.name == "h2" and self._close_reason is None:
                self._linger_then_close()
            else:
                self._close(self._close_reason or "connection-close")
        else:
            self._arm_timer()

    def _close_after_error(self) -> None:
        if self._linger is None:
            self._linger = self._loop.call_later(RST_AVOIDANCE_DELAY, self._close, "protocol-error")

    def _linger_then_close(self) -> None:
        """Go closes a gracefully GOAWAYed connection a second after its last stream."""
        if self._linger is None:
            delay = self.server.options.goaway_linger
            self._linger = self._loop.call_later(delay, self._close, "goaway-complete")

    # -- timers ---------------------------------------------------------------------------
    def _arm_timer(self) -> None:
        options = self.server.options
        if self.proto is None or self.proto.awaiting_headers:
            kind, seconds = "read-header-timeout", options.read_header_timeout
        elif not self.proto.open_streams and not self.watches:
            kind, seconds = "idle-timeout", options.idle_timeout
        else:
            self._deadline = None
            return
        now = self._loop.time()
        if self._deadline_kind != kind or self._deadline is None:
            self._deadline, self._deadline_kind = now + seconds, kind
        elif kind == "idle-timeout":
            self._deadline = now + seconds
        if self._timer is None or self._deadline < self._timer_when:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_when = self._deadline
            self._timer = self._loop.call_at(self._deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._deadline is None or self._lost:
            return
        if self._loop.time() < self._deadline:
            self._timer_when = self._deadline
            self._timer = self._loop.call_at(self._deadline, self._on_timer)
            return
        if self._deadline_kind == "idle-timeout" and self.proto is not None:
            last = self.proto.start_graceful_close()
            if last is not None:
                self.server.goaway_sent(self, last, "idle-timeout")
            self._close_reason = "idle-timeout"
            data = self.proto.data_to_send()
            if data and self.transport is not None:
                self.transport.write(data)
        self._close(self._deadline_kind)
