"""The daemon: builds the streams, probers, schedulers, pipeline and sinks from a `Config`,
runs them as supervised named tasks, and on SIGTERM (or at the end of `duration`) drains:
stop ticking, wait for requests in flight up to `drain_timeout`, close the trackers (open
intervals and windows close as `end`), write the final summary, flush, return 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections import Counter
from typing import Protocol

import structlog
from prometheus_client import CollectorRegistry

from prober import __version__
from prober.common.clock import Clock, SystemClock
from prober.common.errors import UserError
from prober.common.statusserver import StatusServer
from prober.config import Config
from prober.core.burst import Burst, BurstPlanner
from prober.core.models import RunRecord, StreamId, rfc3339
from prober.core.pace import PaceTracker
from prober.daemon.bursts import BurstSender
from prober.daemon.echo import RecordEcho
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.logs import LogSink
from prober.daemon.metrics import Metrics
from prober.daemon.pacer import Pacer
from prober.daemon.pipeline import Pipeline, Sink
from prober.daemon.scheduler import StreamScheduler
from prober.daemon.supervisor import Supervisor
from prober.probe import Prober, ProbeTarget, TokenFile, client_context

log = structlog.get_logger("prober.daemon")


class DaemonError(UserError):
    """The daemon cannot start (e.g. its port is taken): one line for the user, exit 2."""


class HostNames(Protocol):
    """APIServerID -> node name, refreshed now and then (the identity Leases)."""

    def node_of(self, host: str) -> str | None: ...

    async def refresh(self) -> None: ...


class Daemon:
    def __init__(
        self,
        config: Config,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        hosts: HostNames | None = None,
        install_signals: bool = True,
    ) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self._clock = clock or SystemClock()
        self._hosts = hosts
        self._install_signals = install_signals
        self._stop = asyncio.Event()
        self._stop_reason = "stopped"
        self.supervisor = Supervisor(self._clock)
        self.streams: tuple[StreamId, ...] = config.streams()
        self.ready = asyncio.Event()
        self.port = 0
        self.pipeline: Pipeline | None = None
        self.metrics: Metrics | None = None
        self._bursts: BurstSender | None = None
        self.run_id = str(uuid.uuid4())

    def stop(self, reason: str = "stopped") -> None:
        self._stop_reason = reason
        self._stop.set()

    async def run(self) -> int:
        run_start, wall_start = time.monotonic(), time.time()
        header = RunRecord(
            run_id=self.run_id,
            ts=rfc3339(wall_start),
            platform=self.config.platform_name,
            streams=tuple(s.name for s in self.streams),
            version=__version__,
        )
        config = self.config
        pacer = Pacer(config.quiet_interval or None, config.rise)
        metrics = Metrics(
            self.registry,
            config.constant_labels,
            __version__,
            max_apiservers=config.max_apiservers,
        )
        metrics.register_streams(self.streams)
        window_gap = config.interval / config.workers
        quiet_gap = max(config.quiet_interval, window_gap) if config.quiet_interval else window_gap
        metrics.pace_gaps(window=window_gap, quiet=quiet_gap, pace=pacer.pace, rise=config.rise)
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
            )
            sinks.append(writer)
        pipeline = self.pipeline = Pipeline(
            self.streams,
            sinks,
            run_start=run_start,
            wall_start=wall_start,
            node_of=node_of,
            # A request ends within its timeout; the slack covers a loaded event loop.
            gap_horizon=self.config.timeout + 5.0,
            pace=PaceTracker(config.settle) if pacer.quiet else None,
            on_pace=pacer.set,
            max_open=config.max_apiservers,
            bursts=BurstPlanner() if config.burst_parallel else None,
            on_burst=self._send_burst,
            rise=config.rise > 1,
        )
        self.metrics = metrics
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
        probers = self._probers(run_start)
        schedulers = [
            StreamScheduler(
                stream,
                probers[stream],
                interval=self.config.interval,
                clock=self._clock,
                emit=pipeline.submit,
                on_skip=pipeline.skipped,
                pacer=pacer,
            )
            for stream in self.streams
        ]
        if pipeline.bursts is not None:
            self._bursts = BurstSender(
                pipeline.bursts,
                schedulers,
                parallel=config.burst_parallel,
                supervisor=self.supervisor,
                now=pipeline.now,
            )
        self._start_tasks(pipeline, schedulers)
        self._log_start(header)
        try:
            await self._wait_for_stop()
        finally:
            await self._drain(pipeline, schedulers, probers, writer, status)
        return 0

    def _send_burst(self, burst: Burst) -> None:
        if self._bursts is not None:
            self._bursts.send(burst)

    def _start_tasks(self, pipeline: Pipeline, schedulers: list[StreamScheduler]) -> None:
        spawn = self.supervisor.spawn
        spawn("pipeline", pipeline.consume)
        for scheduler in schedulers:
            spawn(f"stream:{scheduler.stream.name}", scheduler.run)
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
            streams=list(header.streams),
            event_log=config.event_log,
            version=__version__,
        )

    def _probers(self, run_start: float) -> dict[StreamId, list[Prober]]:
        config = self.config
        tokens: dict[str, TokenFile] = {}
        contexts = {}
        out: dict[StreamId, list[Prober]] = {}
        for stream in self.streams:
            target = config.target_of(stream)
            key = (target.ca_file, stream.protocol)
            if key not in contexts:
                contexts[key] = client_context(
                    target.ca_file, stream.protocol, verify=not config.insecure_skip_tls_verify
                )
            token = None
            if target.token_file:
                token = tokens.setdefault(
                    target.token_file, TokenFile(target.token_file, _token_event)
                )
            probe_target = ProbeTarget(
                url=target.url + config.request_path,
                context=contexts[key],
                server_name=target.server_name,
                token=token,
                timeout=config.timeout,
                max_in_flight=config.max_in_flight,
            )
            out[stream] = [Prober(stream, probe_target, run_start) for _ in range(config.workers)]
        return out

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
        schedulers: list[StreamScheduler],
        probers: dict[StreamId, list[Prober]],
        writer: EventLogWriter | None,
        status: StatusServer,
    ) -> None:
        log.info(
            "stopping", reason=self._stop_reason, in_flight=sum(s.in_flight for s in schedulers)
        )
        if self._bursts is not None:
            self._bursts.close()
        names = [f"stream:{s.stream.name}" for s in schedulers] + ["summary", "ready"]
        names += self.supervisor.running("burst-")
        await self.supervisor.stop(*names, *(["leases"] if self._hosts else []))
        drained = await asyncio.gather(*(s.drain(self.config.drain_timeout) for s in schedulers))
        await self.supervisor.stop("pipeline")
        pipeline.feed_pending()
        final = pipeline.close(pipeline.now())
        files = [str(p) for p in writer.close()] if writer is not None else []
        for workers in probers.values():
            for prober in workers:
                await prober.aclose()
        await status.close()
        # The whole account of the run, for whoever reads the logs after the last scrape.
        assert self.metrics is not None
        log.info(
            "stopped",
            reason=self._stop_reason,
            started=sum(s.started for s in schedulers),
            skipped=dict(sum((s.skipped for s in schedulers), Counter())),
            samples=sum(s.samples for s in final.streams),
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
        assert self._hosts is not None
        while True:
            await self._clock.sleep_until(self._clock.monotonic() + self.config.node_refresh)
            await self._hosts.refresh()


def _token_event(event: str, detail: str) -> None:
    log.warning(event, detail=detail)
