"""The fake kube-apiserver as an object: listeners, connections and the lifecycle task.

server = ApiServer(options)
ports = await server.start()          # BoundPorts(port=..., plain_port=...)
server.begin_shutdown()               # what SIGTERM does
await server.wait_stopped()           # after TerminationGracefulTerminationFinished
await server.kill()                   # a crash: no signals, connections reset
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from prober.common.clock import Clock, SystemClock
from prober.core.truthlog import (
    SIGNAL_TYPES,
    STARTUP_TYPES,
    ConnectionClosed,
    ConnectionOpened,
    GoawaySent,
    LifecycleSignal,
    Listening,
    RetryAfterTotal,
    ShutdownInitiated,
)
from prober.fakeapiserver.app import Application
from prober.fakeapiserver.audit import MEGABYTE, AuditLog
from prober.fakeapiserver.connection import ServerConnection, Watch
from prober.fakeapiserver.lifecycle import Lifecycle, Signal, SignalTime, Startup, Timing
from prober.fakeapiserver.listener import Listener
from prober.fakeapiserver.options import ApiServerOptions, OptionsError
from prober.fakeapiserver.storage import Storage
from prober.fakeapiserver.truth import TruthLog
from prober.fakeapiserver.watches import SyntheticWatch, WatchTruth

log = logging.getLogger("prober.fakeapiserver")
STORAGE_TIMEOUT = 15.0  # seconds a starting server waits for etcd before it gives up


@dataclass(frozen=True, slots=True)
class BoundPorts:
    port: int
    plain_port: int | None = None


class ApiServer:
    def __init__(
        self,
        options: ApiServerOptions,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        keep_truth: bool = False,
    ) -> None:
        options.validate()
        self.options = options
        self.clock: Clock = clock or SystemClock()
        self.apiserver_id = options.apiserver_id
        # This process's identity: the identity Lease's holder, new at every start.
        self.holder = f"{self.apiserver_id}_{uuid.uuid4()}"
        self.truth = TruthLog(
            options.truth, self.clock, options.hostname, self.apiserver_id, keep=keep_truth
        )
        self.lifecycle = Lifecycle(
            Timing(
                delay=options.shutdown_delay,
                send_retry_after=options.send_retry_after,
                request_timeout=options.request_timeout,
                watch_grace=options.watch_grace,
                watch_min_qps=options.watch_min_qps,
                shutdown_timeout=options.final_close,
            ),
            self.clock,
            self._on_signal,
        )
        self.audit = (
            AuditLog(
                options.audit_log,
                options.audit_log_maxsize_mb * MEGABYTE,
                options.audit_log_maxbackup,
                self.clock.wall,
            )
            if options.audit_log
            else None
        )
        self.startup = Startup(
            options.post_start_hooks,
            options.early_ready,
            options.livez_grace,
            self.clock,
            self._on_startup,
        )
        self._requests_drained = asyncio.Event()
        self.rng = rng or random.Random()
        self.storage = (
            Storage(options, self.clock, self.truth, self.holder) if options.etcd_servers else None
        )
        self.app = Application(
            options,
            self.lifecycle,
            self.clock,
            self.truth,
            audit=self.audit,
            rng=self.rng,
            on_admin_shutdown=lambda: self.begin_shutdown("admin"),
            state=self.state,
            on_drained=self._requests_drained.set,
            api=self.storage.api if self.storage is not None else None,
            startup=self.startup,
        )
        self.metrics = self.app.metrics
        self.connections: dict[int, ServerConnection] = {}
        self._watches: dict[int, Watch | SyntheticWatch] = {}  # by id(), in start order
        self._drain: deque[Watch | SyntheticWatch] | None = None  # the order they are ended in
        self.watch_truth = WatchTruth(self.truth, self.lifecycle)
        self._tasks: set[asyncio.Task[None]] = set()
        self._listeners: list[Listener] = []
        self._connections_closed = asyncio.Event()
        self._stopped = asyncio.Event()
        self._lifecycle_task: asyncio.Task[None] | None = None
        self._next_id = 0
        self.ports: BoundPorts | None = None

    # -- the public API -------------------------------------------------------------------
    async def start(self) -> BoundPorts:
        """Reach storage, bind the listeners and start the lifecycle task; returns the bound
        ports."""
        context = self.options.tls_context()
        if self.storage is not None:
            self._spawn("watch cache", self.storage.cache.run())
            if not await self.storage.wait_ready(STORAGE_TIMEOUT):
                self._finish()
                raise OptionsError(
                    f"--etcd-servers {self.options.etcd_servers}: not reachable within "
                    f"{STORAGE_TIMEOUT:.0f} s"
                )
        for _ in range(self.options.synthetic_watches):
            synthetic = SyntheticWatch(self)
            self._watches[id(synthetic)] = synthetic
        host = self.options.bind_address
        tls = await Listener.open(
            lambda: ServerConnection(self, tls=True), host, self.options.port, context=context
        )
        self._listeners.append(tls)
        plain_port = None
        if self.options.plain_port is not None:
            plain = await Listener.open(
                lambda: ServerConnection(self, tls=False), host, self.options.plain_port
            )
            self._listeners.append(plain)
            plain_port = plain.port
        self.ports = BoundPorts(tls.port, plain_port)
        self._lifecycle_task = asyncio.create_task(
            self._run_lifecycle(), name=f"apiserver {self.options.hostname} lifecycle"
        )
        self.truth.write(
            Listening(
                port=self.ports.port,
                plain_port=plain_port,
                holder=self.holder,
                early_ready=self.options.early_ready,
                early_answer=self.options.early_answer.value,
            )
        )
        self.startup.listening()
        if self.storage is not None:
            self.storage.listening(self.clock.monotonic())
        hooks = None
        if self.storage is not None:
            for name, loop in self.storage.controllers():
                self._spawn(name, loop)
            hooks = self.storage.identity_written
        self._spawn("startup", self.startup.run(hooks))
        return self.ports

    def begin_shutdown(self, trigger: str = "api") -> bool:
        """Start graceful termination, as SIGTERM does; False if it had already started."""
        return self.lifecycle.initiate(trigger)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def wait_signal(self, signal: Signal) -> SignalTime:
        return await self.lifecycle.wait(signal)

    async def kill(self) -> None:
        """Stop at once like SIGKILL: no lifecycle signals, every connection reset."""
        if self._lifecycle_task is not None and not self._lifecycle_task.done():
            self._lifecycle_task.cancel()
        self._cancel_tasks()
        for listener in self._listeners:
            listener.close()
        self.abort_connections()
        await asyncio.sleep(0)
        self._finish()

    def state(self) -> dict[str, Any]:
        return {
            "host": self.options.hostname,
            "apiserver": self.apiserver_id,
            "holder": self.holder,
            "startup": {name: t.mono for name, t in self.startup.times.items()},
            "signals": {s.value: t.mono for s, t in self.lifecycle.times.items()},
            "connections": len(self.connections),
            "in_flight": self.app.in_flight,
            "watches": self.open_watches(),
        }

    # -- what the lifecycle asks (lifecycle.Drainer) --------------------------------------
    def stop_listening(self) -> None:
        for listener in self._listeners:
            listener.close()
        for connection in list(self.connections.values()):
            connection.shutdown("shutdown")
        self._check_all_closed()

    async def wait_requests_drained(self) -> None:
        while self.app.in_flight > 0:
            self._requests_drained.clear()
            await self._requests_drained.wait()

    def open_watches(self) -> int:
        return len(self._watches)

    def end_watches(self, count: int | None) -> None:
        """End watches in the drain's order: every open one, real or synthetic, shuffled
        once when the drain starts, so real clients' watches end at random positions."""
        if self._drain is None:
            order = list(self._watches.values())
            self.rng.shuffle(order)
            self._drain = deque(order)
        ended = 0
        while self._drain and (count is None or ended < count):
            watch = self._drain.popleft()
            if id(watch) in self._watches:
                watch.end("drained")
                ended += 1

    async def wait_connections_closed(self) -> None:
        await self._connections_closed.wait()

    def abort_connections(self) -> None:
        for connection in list(self.connections.values()):
            connection.abort()
        self._cut_watches()

    def _cut_watches(self) -> None:
        """The process is going: every watch still open is cut, and says so in the truth
        before the truth log closes (an aborted transport reports its loss only later)."""
        for watch in list(self._watches.values()):
            if isinstance(watch, Watch):
                watch.forget("cut")
                self.watch_finished(watch)
            else:
                watch.end("cut")

    # -- what connections report ----------------------------------------------------------
    def next_connection_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def connection_opened(self, connection: ServerConnection) -> None:
        info = connection.info
        self.connections[info.id] = connection
        opened = ConnectionOpened(
            conn=info.id,
            peer=f"{info.peer_ip}:{info.peer_port}",
            tls=info.tls,
            protocol=info.protocol or None,
            late=info.late,
        )
        self.truth.write(opened, mono=info.accepted_mono)
        if self.lifecycle.stopped_listening:  # accepted just before the listener closed
            connection.shutdown("shutdown")

    def connection_closed(self, connection: ServerConnection, by: str, reason: str) -> None:
        info = connection.info
        self.connections.pop(info.id, None)
        closed = ConnectionClosed(
            conn=info.id,
            protocol=info.protocol or None,
            by=by,
            reason=reason,
            requests=connection.requests,
        )
        self.truth.write(closed, mono=connection.close_mono, wall=connection.close_wall)
        self._check_all_closed()

    def goaway_sent(self, connection: ServerConnection, last_stream_id: int, reason: str) -> None:
        self.metrics.goaways[reason] += 1
        self.truth.write(
            GoawaySent(
                conn=connection.info.id, last_stream_id=last_stream_id, error_code=0, reason=reason
            )
        )

    def watch_started(self, watch: Watch) -> None:
        self._watches[id(watch)] = watch
        if self._drain is not None:
            self._drain.append(watch)
        self.watch_truth.started(watch)

    def watch_finished(self, watch: Watch | SyntheticWatch) -> None:
        if self._watches.pop(id(watch), None) is None:
            return
        self.watch_truth.ended(watch)
        if isinstance(watch, Watch):
            self.app.watch_ended(watch.exchange)

    # -- internals ------------------------------------------------------------------------
    def _check_all_closed(self) -> None:
        if self.lifecycle.stopped_listening and not self.connections:
            self._connections_closed.set()

    def _on_startup(self, name: str, stamp: SignalTime) -> None:
        instant = STARTUP_TYPES[name](holder=self.holder)
        self.truth.write(instant, mono=stamp.mono, wall=stamp.wall)
        log.info("%s %s", self.options.hostname, name)

    def _on_signal(self, signal: Signal, stamp: SignalTime, trigger: str) -> None:
        record: LifecycleSignal
        if signal is Signal.SHUTDOWN_INITIATED:
            record = ShutdownInitiated(trigger=trigger, delay=self.options.shutdown_delay)
            if self.storage is not None:
                self._spawn("identity lease stop", self.storage.identity.stop())
        else:
            record = SIGNAL_TYPES[signal.value]()
        self.truth.write(record, mono=stamp.mono, wall=stamp.wall)
        log.info("%s %s", self.options.hostname, signal.value)

    async def _run_lifecycle(self) -> None:
        try:
            await self.lifecycle.run(self)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: graceful termination failed; aborting", self.options.hostname)
            self.abort_connections()
        finally:
            self._finish()

    def _spawn(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        """A named background task; its failure is logged, never silent."""
        task = asyncio.create_task(work, name=f"apiserver {self.options.hostname} {name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _finish(self) -> None:
        if self._stopped.is_set():
            return
        for listener in self._listeners:
            listener.close()
        self._cancel_tasks()
        self._cut_watches()
        if self.app.early is not None:
            self.app.early.cut()
        self.watch_truth.close()
        if self.metrics.retry_after:
            # Refusals are not audited (upstream's filter answers before the audit does): the
            # truth keeps their count, which /metrics loses with the process.
            codes = dict(sorted(self.metrics.retry_after.items()))
            self.truth.write(RetryAfterTotal(codes=codes))
        if self.storage is not None:
            self.storage.close()
        self.truth.close()
        if self.audit is not None:
            self.audit.close()
        self._stopped.set()
