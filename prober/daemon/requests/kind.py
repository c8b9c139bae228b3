"""The first kind of stream: requests. One request, one `Sample`.

Per stream (target x protocol x LB x connection mode, `Config.streams`) `workers` `Prober`s
take turns under one `StreamScheduler`; the samples go through the request kind's feed
(`daemon.samples.SampleFeed`: the core trackers, the compactor, the pace, witness bursts);
the `Pacer` holds the sampling rate the feed decides and every scheduler follows, and the
`BurstSender` sends the witness bursts the feed's planner asks for through the schedulers
of the LB's fresh streams. At the stop: the schedulers stop ticking and no burst starts,
requests in flight (ticks and bursts alike) get `drain_timeout` to end, and the stop cuts the
rest (`Prober.stop`): each is still a sample, of class `stopped` with the phases it had
reached, which the trackers pass over. So `started` = `samples` in the `stopped` line.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Mapping, Sequence

import structlog

from prober.config import Config
from prober.core.budgets import hairpins, slow_starts
from prober.core.burst import Burst, BurstPlanner
from prober.core.kinds import REQUESTS
from prober.core.models import LB, Protocol, StreamId
from prober.core.pace import PaceTracker
from prober.core.samenode import Placement
from prober.core.streamkind import KindSpec
from prober.daemon.kinds import KindContext
from prober.daemon.pipeline import Sink
from prober.daemon.requests.bursts import BurstSender
from prober.daemon.requests.pacer import Pacer
from prober.daemon.requests.readyz import READYZ_PATH, ReadyzPoller
from prober.daemon.requests.samples import SampleFeed
from prober.daemon.requests.scheduler import StreamScheduler
from prober.probe import Prober, ProbeTarget, TokenFile, client_context

log = structlog.get_logger("prober.daemon")


class RequestKind:
    """Requests as a kind of stream (`daemon.kinds.StreamKind`)."""

    spec: KindSpec = REQUESTS

    def streams(self, config: Config) -> tuple[StreamId, ...]:
        return config.streams()

    def prepare(self, context: KindContext) -> RequestRun:
        return RequestRun(context, self.streams(context.config))


class RequestRun:
    """The request streams of one run (`daemon.kinds.KindRun`)."""

    sinks: Sequence[Sink] = ()

    def __init__(self, context: KindContext, streams: Sequence[StreamId]) -> None:
        config = context.config
        self._context = context
        self.streams = tuple(streams)
        self._pacer = Pacer(config.quiet_interval or None, config.rise)
        metrics = context.metrics
        metrics.register_streams(self.streams)
        window_gap = config.interval / config.workers
        quiet_gap = max(config.quiet_interval, window_gap) if config.quiet_interval else window_gap
        metrics.pace_gaps(
            window=window_gap, quiet=quiet_gap, pace=self._pacer.pace, rise=config.rise
        )
        self.feed = SampleFeed(
            self.streams,
            [context.out],
            wall_start=context.wall_start,
            node_of=context.node_of,
            # A request ends within its timeout; the slack covers a loaded event loop.
            gap_horizon=config.timeout + 5.0,
            pace=PaceTracker(config.settle) if self._pacer.quiet else None,
            on_pace=self._pacer.set,
            bursts=BurstPlanner() if config.burst_parallel else None,
            on_burst=self._send_burst,
            rise=config.rise > 1,
            placement=placement(config, context.apiservers),
            exact_delay=config.lb_settings.shutdown_delay if config.lb_settings else None,
            early_for=config.early_for,
            slow_start=slow_starts(config.platform_name, config.lb_settings),
            schedule=lambda name: self._pacer.gap(name, window_gap),
            now=context.now,
        )
        self._probers: dict[StreamId, list[Prober]] = {}
        self._contexts: dict[tuple[str | None, Protocol], ssl.SSLContext] = {}
        self._tokens: dict[str, TokenFile] = {}
        self._readyz: ReadyzPoller | None = None
        self._schedulers: list[StreamScheduler] = []
        self._bursts: BurstSender | None = None

    def start(self) -> None:
        context, config = self._context, self._context.config
        self._probers = self._build_probers()
        self._schedulers = [
            StreamScheduler(
                stream,
                self._probers[stream],
                interval=config.interval,
                clock=context.clock,
                emit=context.emit,
                on_skip=self.feed.skipped,
                pacer=self._pacer,
            )
            for stream in self.streams
        ]
        by_name = {s.stream.name: s for s in self._schedulers}
        self.feed.count_ticks(lambda name: _ticks(by_name.get(name)))
        if self.feed.bursts is not None:
            self._bursts = BurstSender(
                self.feed.bursts,
                self._schedulers,
                parallel=config.burst_parallel,
                supervisor=context.supervisor,
                now=context.now,
            )
        for scheduler in self._schedulers:
            context.supervisor.spawn(f"stream:{scheduler.stream.name}", scheduler.run)
        self._readyz = self._readyz_poller()
        if self._readyz is not None:
            context.supervisor.spawn("readyz", self._readyz.run)

    def _readyz_poller(self) -> ReadyzPoller | None:
        """The direct path's `/readyz`, asked while an apiserver restarts; None without a
        localhost target (`daemon.requests.readyz`)."""
        direct = [s for s in self.streams if s.lb is LB.LOCALHOST]
        if not direct:
            return None
        context, config = self._context, self._context.config
        stream = direct[0]
        target = self._probe_target(stream, READYZ_PATH)
        window = config.interval / config.workers
        return ReadyzPoller(
            Prober(stream, target, context.run_start),
            lambda: bool(self.feed.trackers.restarting),
            fast=window,
            slow=max(config.quiet_interval, window),
            clock=context.clock,
            emit=context.emit,
        )

    def _send_burst(self, burst: Burst) -> None:
        if self._bursts is not None:
            self._bursts.send(burst)

    @property
    def in_flight(self) -> int:
        return sum(s.in_flight for s in self._schedulers)

    def stopping(self) -> None:
        if self._bursts is not None:
            self._bursts.close()

    def tasks(self) -> list[str]:
        names = [f"stream:{s.stream.name}" for s in self._schedulers]
        names += ["readyz"] if self._readyz is not None else []
        return names + self._context.supervisor.running("burst-")

    async def drain(self, timeout: float) -> int:
        drained = await asyncio.gather(*(s.drain(timeout) for s in self._schedulers))
        return sum(drained)

    async def aclose(self) -> None:
        if self._readyz is not None:
            await self._readyz.aclose()
        for workers in self._probers.values():
            for prober in workers:
                await prober.aclose()

    def account(self) -> Mapping[str, object]:
        final = self.feed.final
        return {
            "started": sum(s.started for s in self._schedulers),
            "raised": sum(s.raised for s in self._schedulers),  # started, then a bug: lost
            "skipped": dict(sum((s.skipped for s in self._schedulers), Counter())),
            "samples": sum(s.samples for s in final.streams) if final is not None else 0,
        }

    def _build_probers(self) -> dict[StreamId, list[Prober]]:
        config = self._context.config
        out: dict[StreamId, list[Prober]] = {}
        for stream in self.streams:
            target = self._probe_target(stream, config.request_path)
            run_start = self._context.run_start
            out[stream] = [Prober(stream, target, run_start) for _ in range(config.workers)]
        return out

    def _probe_target(self, stream: StreamId, path: str) -> ProbeTarget:
        """Where a stream's requests go, at `path`: one TLS context per CA and protocol, one
        token file read per file, shared by every prober."""
        config = self._context.config
        target = config.target_of(stream)
        key = (target.ca_file, stream.protocol)
        if key not in self._contexts:
            self._contexts[key] = client_context(
                target.ca_file, stream.protocol, verify=not config.insecure_skip_tls_verify
            )
        token = None
        if target.token_file:
            token = self._tokens.setdefault(
                target.token_file, TokenFile(target.token_file, _token_event)
            )
        return ProbeTarget(
            url=target.url + path,
            context=self._contexts[key],
            server_name=target.server_name,
            token=token,
            timeout=config.timeout,
        )


def placement(config: Config, apiservers: Mapping[str, str]) -> Placement | None:
    """Where the prober runs, if it knows its node (`node`): what labels same-node samples."""
    if config.node is None:
        return None
    lbs = hairpins(config.platform_name, config.lb_settings)
    return Placement(config.node, apiservers, lbs)


def _ticks(scheduler: StreamScheduler | None) -> tuple[int, int] | None:
    """A stream's ticks due and requests started, for the summaries."""
    return None if scheduler is None else (scheduler.due, scheduler.started)


def _token_event(event: str, detail: str) -> None:
    log.warning(event, detail=detail)
