"""The request kind's part of the pipeline: every sample, in completion order, through the core
trackers, then to the sinks (metrics, event log, logs). Sinks see plain records and know
nothing of probes.

A sink has three typed channels (`Sink`), in this order for each sample:
`observe(Observed(sample, gaps))` (every sample, with the sampling gaps it completed), then
`keep(sample)` for each sample the `Compactor` keeps for the event log (possibly some held
back from earlier), then `event(...)` for the trackers' events (`DisruptionStarted`,
`Interval`, `WindowOpened`, `Window`). `event` also carries the `Summary` records of
`summary()`, the `Skipped` ticks of `skipped()`, a `PaceChange` after the sample that changed
the sampling rate (`core.pace`), and what `close()` closes at the end of the run (open
intervals and windows, as `end`). After the pace, the burst planner hears of the sample, and a
witness burst it asks for goes to `on_burst` (`daemon.requests.bursts`).

Each sample is labelled same-node or not first (`core.samenode`, by the `Placement` given:
none, no sample is), and everything after sees the label: the trackers take a same-node sample
on a path of their own (`core.trackers`), and each path's samples are compacted apart
(`core.compaction.Compactors`).

A sample the daemon's stop cut (`ErrorClass.STOPPED`) is counted (samples, `results`) and
logged like any other, so that every request started is a sample recorded; the trackers, the
pace, the planner and the gap statistics pass over it (`Sample.stopped`): it is no failure.

With `schedule` (the mean gap the pacer asks of a stream now) and `now` (run time), the feed
also proves its completeness (`core.coverage`): every ticked sample's send time, every skipped
tick and every pace change go to a `CoverageTracker`, and its `Coverage` record per closed
window goes to the sinks like a tracker's event. Given `count_ticks` (per stream, the ticks due
and the requests started: the schedulers'), the summary records carry them beside the samples
counted.

`SampleFeed` is a `daemon.pipeline.Feed`: the daemon attaches it to its pipeline (the request
kind does, `daemon.requests.kind`); a test or a benchmark may feed it samples directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from prober.core.burst import Burst, BurstPlanner
from prober.core.compaction import Compactors
from prober.core.coverage import CoverageTracker
from prober.core.gaps import GapStats
from prober.core.instances import DEFAULT_EARLY_FOR
from prober.core.latency import LatencyStats, Part, RunPhase, run_phase
from prober.core.models import (
    LB,
    IdentitySeen,
    PaceChange,
    ReadyzAnswer,
    Sample,
    StreamCounters,
    StreamId,
    Summary,
    Window,
    rfc3339,
)
from prober.core.pace import PaceTracker
from prober.core.rebalancing import KeptAnswers
from prober.core.samenode import Placement
from prober.core.shutdown import DEFAULT_MAX_OPEN, WindowOpened
from prober.core.trackers import Trackers
from prober.daemon.pipeline import Event, Fanout, Observed, Sink, Skipped


@dataclass(slots=True)
class _Counts:
    gaps: GapStats
    samples: int = 0
    failures: int = 0
    late: int = 0
    results: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    same_node: int = 0
    latency: LatencyStats = field(default_factory=LatencyStats)


class SampleFeed:
    records: ClassVar[tuple[type, ...]] = (Sample, IdentitySeen, ReadyzAnswer)

    def __init__(
        self,
        streams: Sequence[StreamId],
        sinks: Iterable[Sink],
        *,
        wall_start: float,
        node_of: Callable[[str], str | None] | None = None,
        gap_horizon: float = 10.0,
        pace: PaceTracker | None = None,
        on_pace: Callable[[PaceChange], None] | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
        bursts: BurstPlanner | None = None,
        on_burst: Callable[[Burst], None] | None = None,
        rise: bool = False,
        placement: Placement | None = None,
        exact_delay: float | None = None,
        early_for: float = DEFAULT_EARLY_FOR,
        slow_start: Collection[LB] = (),
        schedule: Callable[[str], float] | None = None,
        now: Callable[[], float] | None = None,
    ) -> None:
        """`pace`: adaptive sampling (None: one fixed rate), `rise` with it: an LB's fresh
        streams faster while its reaction is open; `bursts`: witness bursts, for `on_burst`;
        `placement`: where the prober runs, which tells same-node samples (None: none is);
        `exact_delay`: the configured `lb_settings.shutdown_delay`, which the run record
        carries for the replay."""
        # Defaults otherwise: analyze replays the same trackers.
        own = placement.on_own_node if placement is not None else None
        self.trackers = Trackers(
            streams,
            node_of=node_of,
            max_open=max_open,
            on_own_node=own,
            exact_delay=exact_delay,
            early_for=early_for,
            slow_start=slow_start,
        )
        self.disruption = self.trackers.disruption
        self.shutdown = self.trackers.shutdown
        self._placement = placement
        self._compactors = Compactors()
        self._sinks = Fanout(sinks)
        self._wall_start = wall_start
        self._gap_horizon = gap_horizon  # longer than any request lasts (the timeout)
        self._pace = pace  # None: one fixed rate
        self._on_pace = on_pace or (lambda _pace: None)
        self._rise = rise
        self.bursts = bursts
        self._on_burst = on_burst or (lambda _burst: None)
        self._counts = {s.name: self._new_counts() for s in streams}
        self._kept = KeptAnswers()  # the kept HTTP/2 answers by apiserver, for the summaries
        self.fed = 0
        self.final: Summary | None = None  # the last summary, once closed
        self._schedule = schedule
        self._now = now or (lambda: 0.0)
        self.coverage: CoverageTracker | None = None
        if schedule is not None:
            self.coverage = CoverageTracker(streams, gap_horizon)
            for stream in streams:
                self.coverage.scheduled(stream.name, 0.0, schedule(stream.name))
        self._ticks: Callable[[str], tuple[int, int] | None] = lambda _name: None
        self._window_seen = False  # whether a shutdown window has opened yet (`core.latency`)

    def count_ticks(self, ticks: Callable[[str], tuple[int, int] | None]) -> None:
        """Where the summaries read each stream's ticks due and requests started."""
        self._ticks = ticks

    def feed(self, record: Sample | IdentitySeen | ReadyzAnswer) -> None:
        if isinstance(record, IdentitySeen | ReadyzAnswer):
            self.trackers.note(record)  # before the samples after it, as a replay does
            self._emit(record)
            return
        sample = record
        if self._placement is not None:
            sample = self._placement.label(sample)
        sample = self.trackers.mark(sample)
        events = self.trackers.feed(sample)
        kept = self._compactors.select(sample, events, self.trackers)
        gaps = self._count(sample)
        self._kept.feed(sample)
        phase = self._time(sample)
        self.fed += 1
        self._sinks.observe(Observed(sample, gaps, phase))
        for written in kept:
            self._sinks.keep(written)
        for event in events:
            self._emit(event)
        self._cover(sample, events)
        if self._pace is not None:
            self._pace_after(sample, events)
        if self.bursts is not None:
            burst = self.bursts.feed(sample, self.shutdown)
            if burst is not None:
                self._on_burst(burst)

    def skipped(self, stream: StreamId, reason: str, count: int) -> None:
        """A scheduler did not send `count` ticks of `stream`, for `reason`."""
        counts = self._counts.get(stream.name)
        if counts is None:
            counts = self._counts[stream.name] = self._new_counts()
        counts.skipped[reason] += count
        if self.coverage is not None:
            self.coverage.skipped(stream.name, self._now(), count)
        self._emit(Skipped(stream, reason, count))

    def _cover(self, sample: Sample, events: Sequence[object]) -> None:
        coverage = self.coverage
        if coverage is None:
            return
        for event in events:
            if isinstance(event, WindowOpened) and not event.same_node:
                coverage.opened(event.host, event.first_seen_t - event.elapsed)
            elif isinstance(event, Window):
                for record in coverage.window(event):
                    self._emit(record)
        if sample.burst is None and not sample.stopped:  # a tick's request, not an extra
            for record in coverage.sent(sample.stream, sample.t):
                self._emit(record)

    def _pace_after(self, sample: Sample, events: Sequence[object]) -> None:
        assert self._pace is not None
        settled, rests = self.trackers.calm(sample.stream)
        changes = self._pace.feed(
            sample,
            windows_open=bool(self.trackers.open_hosts or self.trackers.restarting),
            opened=any(isinstance(e, WindowOpened) for e in events),
            settled=settled,
            disrupted=self.trackers.disrupted(sample.stream),
            rests=rests,
            rising=self._rise and self.shutdown.rising(sample.stream_id),
        )
        for change in changes:
            self._on_pace(change)
            self._emit(change)
            if self.coverage is not None and self._schedule is not None:
                names = self._counts if change.stream is None else [change.stream]
                for name in names:
                    self.coverage.scheduled(name, change.t, self._schedule(name))

    @property
    def restarting(self) -> bool:
        return bool(self.trackers.restarting or self.trackers.open_hosts)

    def produced(self, stream: str) -> bool:
        counts = self._counts.get(stream)
        return counts is not None and counts.samples > 0

    def summary(self, t: float) -> Summary:
        """Cumulative per-stream counters up to run time `t`, also sent to the sinks."""
        streams = tuple(self._counters(name, c) for name, c in self._counts.items())
        record = Summary(ts=rfc3339(self._wall_start + t), t=t, streams=streams)
        self._emit(record)
        return record

    def close(self, t: float) -> Summary:
        """End of run at run time `t`: close what is open, then the final summary."""
        for record in self.trackers.close(t, rfc3339(self._wall_start + t)):
            self._emit(record)
            if isinstance(record, Window) and self.coverage is not None:
                for coverage in self.coverage.window(record):
                    self._emit(coverage)
        for coverage in self.coverage.close(t) if self.coverage is not None else []:
            self._emit(coverage)
        self.final = self.summary(t)
        return self.final

    def _counters(self, name: str, c: _Counts) -> StreamCounters:
        gaps = c.gaps.summary()
        due, started = self._ticks(name) or (None, None)
        return StreamCounters(
            stream=name,
            samples=c.samples,
            failures=c.failures,
            late=c.late,
            disruption_seconds=round(self.disruption.seconds(name), 6),
            results=dict(sorted(c.results.items())),
            gap_p50=_rounded(gaps.p50),
            gap_p99=_rounded(gaps.p99),
            gap_max=_rounded(gaps.max),
            skipped=dict(sorted(c.skipped.items())),
            same_node=c.same_node,
            due=due,
            started=started,
            kept_answers=self._kept.answers(name),
            kept_connections=self._kept.connections(name),
            latency=c.latency.written(),
        )

    def _new_counts(self) -> _Counts:
        return _Counts(gaps=GapStats(self._gap_horizon))

    def _count(self, sample: Sample) -> tuple[float, ...]:
        counts = self._counts.get(sample.stream)
        if counts is None:
            counts = self._counts[sample.stream] = self._new_counts()
        counts.samples += 1
        counts.failures += sample.failed
        counts.late += sample.late
        counts.same_node += sample.same_node
        counts.results[sample.error.value if sample.error else "success"] += 1
        if sample.burst is not None:
            return ()  # sent beside the ticks: no sampling gap of the stream's
        if sample.stopped:
            return ()  # cut by the stop: it sampled nothing, so it ends no gap
        return tuple(counts.gaps.feed(sample.t))

    def _time(self, sample: Sample) -> RunPhase:
        """The run phase the sample was taken in, right after the trackers took it; its
        answer time goes to that phase's histogram if it was answered (`core.latency`)."""
        window_open = bool(self.trackers.open_hosts or self.trackers.restarting)
        self._window_seen = self._window_seen or window_open
        phase = run_phase(window_open=window_open, window_seen=self._window_seen)
        # An answer (neither a failure nor cut by the stop) that timed the LB: a same-node one
        # timed the prober's own node's apiserver, which is never the LB's (`core.samenode`).
        if sample.error is None and not sample.same_node:
            latency = self._counts[sample.stream].latency
            latency.feed(phase, sample.dur)
            if sample.connect is not None and sample.tls is not None:  # it opened a connection
                latency.feed(phase, sample.connect, Part.CONNECT)
                latency.feed(phase, sample.tls, Part.TLS)
        return phase

    def _emit(self, event: Event) -> None:
        self._sinks.event(event)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
