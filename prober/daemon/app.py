"""The daemon: for each registered kind of stream (`daemon.kinds`; requests by default,
`daemon.registry`) its streams, runners and part of the pipeline, and the sinks every kind
shares, run as supervised named tasks; on SIGTERM (or at the end of `duration`) it drains:
stop the runners, wait for work in flight up to `drain_timeout`, close the pipeline (open
intervals and windows close as `end`), write the final summary, flush, return 0. Nothing here
knows a kind of stream: a new kind is registered, not written in.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import structlog
from prometheus_client import CollectorRegistry

from prober import __version__
from prober.common.clock import Clock, SystemClock
from prober.common.errors import UserError
from prober.common.statusserver import StatusServer
from prober.config import Config
from prober.core.kinds import run_record
from prober.core.models import ApiserverNode, IdentitySeen, RunEnd, RunRecord, rfc3339
from prober.core.watch import watch_limits
from prober.daemon.echo import RecordEcho
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.kinds import KindContext, KindRegistry, KindRun, Named
from prober.daemon.logs import LogSink
from prober.daemon.metrics import Metrics
from prober.daemon.pipeline import Feed, Pipeline, Sink
from prober.daemon.registry import default_kinds
from prober.daemon.retention import Retention
from prober.daemon.supervisor import Supervisor

log = structlog.get_logger("prober.daemon")


class DaemonError(UserError):
    """The daemon cannot start (e.g. its port is taken): one line for the user, exit 2."""


class HostNames(Protocol):
    """APIServerID -> node name, refreshed now and then (the identity Leases), and each new
    holder of a Lease (`k8s.discovery.HostDecoder`)."""

    def node_of(self, host: str) -> str | None: ...

    @property
    def nodes(self) -> Mapping[str, str]:
        """Every name learnt so far, a live view."""

    def start_run(self, now: Callable[[], float], wall: Callable[[], float]) -> None:
        """The run's clock and the wall clock, to time each read by."""

    async def refresh(self) -> Sequence[IdentitySeen]:
        """Read again: the holders seen first, once `start_run` was called."""


class Daemon:
    def __init__(
        self,
        config: Config,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        hosts: HostNames | None = None,
        install_signals: bool = True,
        kinds: KindRegistry | None = None,
    ) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self._clock = clock or SystemClock()
        self._hosts = hosts
        self._install_signals = install_signals
        self._stop = asyncio.Event()
        self._stop_reason = "stopped"
        self.supervisor = Supervisor(self._clock)
        self.kinds = kinds if kinds is not None else default_kinds()
        self._streams = {kind.spec.name: tuple(kind.streams(config)) for kind in self.kinds}
        self.streams: tuple[Named, ...] = tuple(
            s for named in self._streams.values() for s in named
        )
        self.ready = asyncio.Event()
        self.port = 0
        self.pipeline: Pipeline | None = None
        self.metrics: Metrics | None = None
        self.run_id = str(uuid.uuid4())
        self._told: dict[str, str] = {}  # the apiservers' nodes written to the log so far
        self._feeds: list[Feed] = []  # the kinds' feeds: whose trackers say a restart is on

    def stop(self, reason: str = "stopped") -> None:
        self._stop_reason = reason
        self._stop.set()

    async def run(self) -> int:
        run_start, wall_start = self._clock.monotonic(), self._clock.wall()
        header = run_record(
            run_id=self.run_id,
            ts=rfc3339(wall_start),
            platform=self.config.platform_name,
            version=__version__,
            streams={kind: [s.name for s in named] for kind, named in self._streams.items()},
            lb_settings=self.config.lb_settings,
            node=self.config.node,
            early_for=self.config.early_for,
            watch_limits=watch_limits(
                self.config.watch_backoff.initial, self.config.http2_ping_timeout
            ),
            slow_floor=self.config.slow_floor,
        )
        config = self.config
        metrics = self.metrics = Metrics(
            self.registry,
            config.constant_labels,
            __version__,
            record_kinds=list(self.kinds.table.record_types),
        )
        loop = asyncio.get_running_loop()
        metrics.count_tasks(lambda: len(asyncio.all_tasks(loop)))
        node_of = self._hosts.node_of if self._hosts else None
        sinks: list[Sink] = [metrics, LogSink(node_of)]
        if config.event_log_stdout != "off":
            sinks.append(RecordEcho(header, samples=config.event_log_stdout == "all"))
        writer = None
        if self.config.event_log:
            writer = EventLogWriter(
                self.config.event_log,
                self.config.event_log_max_size,
                header,
                on_dropped=metrics.count_dropped,
                keep=Retention(config.event_log_keep_runs, config.event_log_keep_size),
                clock=self._clock,
            )
            sinks.append(writer)
        pipeline = self.pipeline = Pipeline(sinks, run_start=run_start, clock=self._clock)
        context = KindContext(
            config=config,
            clock=self._clock,
            run_start=run_start,
            wall_start=wall_start,
            supervisor=self.supervisor,
            metrics=metrics,
            registry=self.registry,
            node_of=node_of,
            emit=pipeline.submit,
            out=pipeline.out,
            now=pipeline.now,
            apiservers=self._hosts.nodes if self._hosts else {},
        )
        runs = [kind.prepare(context) for kind in self.kinds]
        self._feeds = [run.feed for run in runs if run.feed is not None]
        if self._hosts is not None:
            self._hosts.start_run(pipeline.now, self._clock.wall)
        for run in runs:
            if run.feed is not None:
                pipeline.attach(run.feed)
            for sink in run.sinks:
                pipeline.out.add(sink)
        status = StatusServer(self.registry, readyz=self._not_ready)
        try:
            self.port = await status.start(*self.config.listen)
        except OSError as exc:
            host, port = self.config.listen
            raise DaemonError(f"listen {host}:{port}: {exc.strerror or exc}") from None
        if writer is not None:
            try:
                writer.open()
            except OSError as exc:
                await status.close()
                raise DaemonError(f"event_log {writer.path}: {exc.strerror or exc}") from None
        self._start_tasks(pipeline, runs)
        self._log_start(header)
        try:
            await self._wait_for_stop()
        finally:
            await self._drain(pipeline, runs, writer, status)
        return 0

    def _start_tasks(self, pipeline: Pipeline, runs: list[KindRun]) -> None:
        spawn = self.supervisor.spawn
        self._tell_apiservers()  # before any sample: what the names known at start were
        spawn("pipeline", pipeline.consume)
        for run in runs:
            run.start()
        spawn("summary", self._summaries)
        spawn("ready", self._announce_ready)
        if self._hosts is not None:
            spawn("leases", self._refresh_hosts)

    def _log_start(self, header: RunRecord) -> None:
        config = self.config
        if config.insecure_skip_tls_verify:
            log.warning("tls_verification_disabled", reason="insecure_skip_tls_verify is set")
        log.info(
            "listening",
            address=config.listen[0],
            port=self.port,
            run_id=header.run_id,
            platform=header.platform,
            streams=[s.name for s in self.streams],
            event_log=config.event_log,
            version=__version__,
        )

    async def _wait_for_stop(self) -> None:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if self._install_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop, sig.name)
        try:
            if self.config.duration is None:
                await self._stop.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.duration):
                        await self._stop.wait()
                if not self._stop.is_set():
                    self._stop_reason = "duration"
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def _drain(
        self,
        pipeline: Pipeline,
        runs: list[KindRun],
        writer: EventLogWriter | None,
        status: StatusServer,
    ) -> None:
        log.info("stopping", reason=self._stop_reason, in_flight=sum(r.in_flight for r in runs))
        for run in runs:
            run.stopping()
        names = [name for run in runs for name in run.tasks()] + ["summary", "ready"]
        await self.supervisor.stop(*names, *(["leases"] if self._hosts else []))
        drained = await asyncio.gather(*(r.drain(self.config.drain_timeout) for r in runs))
        await self.supervisor.stop("pipeline")
        pipeline.feed_pending()
        pipeline.close(pipeline.now())
        # Last of all: a reader tells a stop from a kill by this record (`report.replay.replay`).
        end_t = pipeline.now()
        pipeline.out.event(RunEnd(end_t, rfc3339(self._clock.wall()), self._stop_reason))
        files = [str(p) for p in writer.close()] if writer is not None else []
        for run in runs:
            await run.aclose()
        await status.close()
        # The whole account of the run, for whoever reads the logs after the last scrape.
        assert self.metrics is not None
        accounts = {key: value for run in runs for key, value in run.account().items()}
        log.info(
            "stopped",
            reason=self._stop_reason,
            **accounts,
            cancelled=sum(drained),
            requests=self.metrics.requests_by_result(),
            event_log_dropped=dict(writer.dropped) if writer is not None else {},
            event_log_files=files,
        )

    def _not_ready(self) -> list[str]:
        pipeline = self.pipeline
        if pipeline is None:
            return ["starting"]
        return [f"{s.name}: no sample yet" for s in self.streams if not pipeline.produced(s.name)]

    async def _announce_ready(self) -> None:
        while self._not_ready():
            await self._clock.sleep_until(self._clock.monotonic() + 0.05)
        self.ready.set()
        log.info("ready", port=self.port, streams=len(self.streams))

    async def _summaries(self) -> None:
        assert self.pipeline is not None
        while True:
            await self._clock.sleep_until(self._clock.monotonic() + self.config.summary_interval)
            self.pipeline.summary(self.pipeline.now())

    async def _refresh_hosts(self) -> None:
        """Read the Leases at once (the holders at the run's start), then every
        `node_refresh`, and every `identity_refresh_fast` while an apiserver restarts: the
        read before a new holder's first write must come close to it (`k8s.holders`)."""
        assert self._hosts is not None
        assert self.pipeline is not None
        clock, config = self._clock, self.config
        while True:
            for seen in await self._hosts.refresh():
                self.pipeline.submit(seen)
            self._tell_apiservers()
            due = clock.monotonic() + config.node_refresh
            # Woken every fast period: a restart that begins during a slow wait is read
            # within one.
            while True:
                await clock.sleep_until(min(due, clock.monotonic() + config.identity_refresh_fast))
                if self._restarting() or clock.monotonic() >= due:
                    break

    def _restarting(self) -> bool:
        """An apiserver restart is under way on a kind's trackers (`Trackers.restarting`,
        from a host's first shutdown=true answer until every LB served its next process),
        or a shutdown window is still open there."""
        return any(feed.restarting for feed in self._feeds)

    def _tell_apiservers(self) -> None:
        """An `apiserver` record for each APIServerID -> node learnt since the last, so that
        the log names every apiserver's node as the daemon knew it."""
        if self._hosts is None or self.pipeline is None:
            return
        for host, node in self._hosts.nodes.items():
            if self._told.get(host) != node:
                self._told[host] = node
                now = self.pipeline.now()
                wall = rfc3339(self._clock.wall())
                self.pipeline.submit(ApiserverNode(now, wall, host, node))
