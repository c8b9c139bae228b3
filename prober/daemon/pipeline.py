"""The one fan-out point: every sample, in completion order, through the core trackers, then
to the sinks (metrics, event log, logs). Sinks see plain records and know nothing of probes.

A sink has three typed channels (`Sink`), in this order for each sample:
`observe(Observed(sample, gaps))` (every sample, with the sampling gaps it completed), then
`keep(sample)` for each sample the `Compactor` keeps for the event log (possibly some held
back from earlier), then `event(...)` for the trackers' events (`DisruptionStarted`,
`Interval`, `WindowOpened`, `Window`). `event` also carries the `Summary` records of
`summary()`, the `Skipped` ticks of `skipped()`, a `PaceChange` after the sample that changed
the sampling rate (`core.pace`), and what `close()` closes at the end of the run (open
intervals and windows, as `end`). After the pace, the burst planner hears of the sample, and a
witness burst it asks for goes to `on_burst` (`daemon.bursts`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prober.core.burst import Burst, BurstPlanner
from prober.core.compaction import Compactor
from prober.core.disruption import DisruptionStarted
from prober.core.gaps import GapStats
from prober.core.models import (
    Interval,
    PaceChange,
    Sample,
    StreamCounters,
    StreamId,
    Summary,
    Window,
    rfc3339,
)
from prober.core.pace import PaceTracker
from prober.core.shutdown import DEFAULT_MAX_OPEN, WindowOpened
from prober.core.trackers import Trackers


@dataclass(frozen=True, slots=True)
class Observed:
    """Any sample, logged or not (the metrics count them all), and the gaps between send
    times of its stream that it settled (`core.gaps`)."""

    sample: Sample
    gaps: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Skipped:
    """Ticks of a stream that were not sent, and why (`daemon.scheduler`)."""

    stream: StreamId
    reason: str
    count: int


Event = DisruptionStarted | Interval | WindowOpened | Window | Summary | PaceChange | Skipped


class Sink(Protocol):
    def observe(self, observed: Observed) -> None:
        """Every sample, as it completes."""

    def keep(self, sample: Sample) -> None:
        """A sample the event log keeps (failures, late answers, window edges)."""

    def event(self, event: Event) -> None:
        """What the trackers and the pipeline make of the samples."""


@dataclass(slots=True)
class _Counts:
    gaps: GapStats
    samples: int = 0
    failures: int = 0
    late: int = 0
    results: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)


class Pipeline:
    def __init__(
        self,
        streams: Sequence[StreamId],
        sinks: Iterable[Sink],
        *,
        run_start: float,
        wall_start: float,
        node_of: Callable[[str], str | None] | None = None,
        gap_horizon: float = 10.0,
        pace: PaceTracker | None = None,
        on_pace: Callable[[PaceChange], None] | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
        bursts: BurstPlanner | None = None,
        on_burst: Callable[[Burst], None] | None = None,
        rise: bool = False,
    ) -> None:
        """`pace`: adaptive sampling (None: one fixed rate), `rise` with it: an LB's fresh
        streams faster while its reaction is open; `bursts`: witness bursts, for `on_burst`."""
        # Defaults otherwise: analyze replays the same trackers.
        self.trackers = Trackers(streams, node_of=node_of, max_open=max_open)
        self.disruption = self.trackers.disruption
        self.shutdown = self.trackers.shutdown
        self._compactor = Compactor()
        self._sinks = list(sinks)
        self._run_start = run_start
        self._wall_start = wall_start
        self._gap_horizon = gap_horizon  # longer than any request lasts (the timeout)
        self._pace = pace  # None: one fixed rate
        self._on_pace = on_pace or (lambda _pace: None)
        self._rise = rise
        self.bursts = bursts
        self._on_burst = on_burst or (lambda _burst: None)
        self._counts = {s.name: self._new_counts() for s in streams}
        self.queue: asyncio.Queue[Sample] = asyncio.Queue()
        self.fed = 0

    def submit(self, sample: Sample) -> None:
        """Called as each request ends; the consumer feeds them in this order."""
        self.queue.put_nowait(sample)

    async def consume(self) -> None:
        while True:
            sample = await self.queue.get()
            self.feed(sample)

    def feed_pending(self) -> None:
        while not self.queue.empty():
            self.feed(self.queue.get_nowait())

    def feed(self, sample: Sample) -> None:
        events = self.trackers.feed(sample)
        kept = self._compactor.select(sample, events, self.trackers.open_hosts)
        gaps = self._count(sample)
        self.fed += 1
        observed = Observed(sample, gaps)
        for sink in self._sinks:
            sink.observe(observed)
        for record in kept:
            for sink in self._sinks:
                sink.keep(record)
        for event in events:
            self._emit(event)
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
        self._emit(Skipped(stream, reason, count))

    def _pace_after(self, sample: Sample, events: Sequence[object]) -> None:
        assert self._pace is not None
        changes = self._pace.feed(
            sample,
            windows_open=bool(self.shutdown.open_hosts),
            opened=any(isinstance(e, WindowOpened) for e in events),
            settled=self.shutdown.settled(sample.stream),
            disrupted=self.disruption.is_open(sample.stream),
            rests=self.shutdown.rests(sample.stream),
            rising=self._rise and self.shutdown.rising(sample.stream_id),
        )
        for change in changes:
            self._on_pace(change)
            self._emit(change)

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
        return self.summary(t)

    def now(self) -> float:
        """Run time now, rounded as sample times are."""
        return round(time.monotonic() - self._run_start, 6)

    def _counters(self, name: str, c: _Counts) -> StreamCounters:
        gaps = c.gaps.summary()
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
        counts.results[sample.error.value if sample.error else "success"] += 1
        if sample.burst is not None:
            return ()  # sent beside the ticks: no sampling gap of the stream's
        return tuple(counts.gaps.feed(sample.t))

    def _emit(self, event: Event) -> None:
        for sink in self._sinks:
            sink.event(event)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
