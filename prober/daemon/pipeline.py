"""The one fan-out point: every record any stream makes, in completion order, to the part of
the pipeline its kind attached (a `Feed`), which feeds its trackers and tells the sinks; a
record no feed takes goes to the sinks as it came. Sinks see plain records and know nothing of
probes or of kinds of stream.

A sink has three typed channels (`Sink`): `observe(Observed)` for every sample, `keep(sample)`
for a sample the event log keeps, `event(...)` for everything else: the trackers' events, the
request kind's summaries and pace changes, and every record of another kind. An event that is
an event-log record (it has a `KIND`: `logged`) is written to the event log; the others
(`DisruptionStarted`, `WindowOpened`, `Skipped`) are live-only: metrics and log lines.

The queue is the one hand-over from the runners' tasks: `submit` as each record is made,
`consume` feeds them in that order; at the drain `feed_pending` feeds what is left.
"""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from prober.common.clock import Clock
from prober.core.connection_age import Attributed, ConnectionAges
from prober.core.disruption import DisruptionStarted
from prober.core.latency import RunPhase
from prober.core.models import Interval, LogRecord, PaceChange, Sample, StreamId, Summary, Window
from prober.core.perceived import Felt, Retried
from prober.core.shutdown import WindowOpened


@dataclass(frozen=True, slots=True)
class Observed:
    """Any sample, logged or not (the metrics count them all), the gaps between send
    times of its stream that it settled (`core.gaps`), and the run phase it was taken in
    (`core.latency`)."""

    sample: Sample
    gaps: tuple[float, ...] = ()
    phase: RunPhase = RunPhase.BEFORE


@dataclass(frozen=True, slots=True)
class Skipped:
    """Ticks of a stream that were not sent, and why (`daemon.requests.scheduler`)."""

    stream: StreamId
    reason: str
    count: int


# The request kind's events by name; any other kind's records arrive as `LogRecord`s.
Event = (
    DisruptionStarted
    | Interval
    | WindowOpened
    | Window
    | Summary
    | PaceChange
    | Skipped
    | Retried
    | Felt
    | Attributed
    | ConnectionAges
    | LogRecord
)


def logged(event: Event) -> LogRecord | None:
    """The event as an event-log record, or None for a live-only one (it has no `KIND`)."""
    if isinstance(getattr(type(event), "KIND", None), str):
        return typing.cast(LogRecord, event)
    return None


class Sink(Protocol):
    def observe(self, observed: Observed) -> None:
        """Every sample, as it completes."""

    def keep(self, sample: Sample) -> None:
        """A sample the event log keeps (failures, late answers, window edges)."""

    def event(self, event: Event) -> None:
        """What the trackers and the pipeline make of the records."""


class Fanout:
    """Every sink as one, each channel to each sink in the order they were added."""

    def __init__(self, sinks: Iterable[Sink] = ()) -> None:
        self._sinks = list(sinks)

    def add(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def observe(self, observed: Observed) -> None:
        for sink in self._sinks:
            sink.observe(observed)

    def keep(self, sample: Sample) -> None:
        for sink in self._sinks:
            sink.keep(sample)

    def event(self, event: Event) -> None:
        for sink in self._sinks:
            sink.event(event)


class Feed(Protocol):
    """A kind's part of the pipeline: its trackers over the records its runners make."""

    @property
    def records(self) -> tuple[type, ...]:
        """The record types it takes."""

    def feed(self, record: Any) -> None:
        """One record, in completion order; tells the sinks what it makes of it."""

    def produced(self, stream: str) -> bool:
        """Whether the stream has made a record yet (`/readyz`)."""

    @property
    def restarting(self) -> bool:
        """Whether its trackers see an apiserver restart under way or a shutdown window open
        (what makes the daemon read the identity Leases often); a kind that tracks no
        shutdowns says False."""

    def summary(self, t: float) -> object:
        """The periodic account at run time `t`, to the sinks."""

    def close(self, t: float) -> object:
        """The end of the run at `t`: what is open closes, then the final account."""


class Pipeline:
    def __init__(self, sinks: Iterable[Sink], *, run_start: float, clock: Clock) -> None:
        self.out = Fanout(sinks)
        self._run_start = run_start
        self._clock = clock
        self._feeds: dict[type, Feed] = {}
        self._attached: list[Feed] = []
        self._passed: set[str] = set()  # streams whose records no feed takes, once seen
        self.queue: asyncio.Queue[LogRecord] = asyncio.Queue()
        self.fed = 0

    def attach(self, feed: Feed) -> None:
        """Records of `feed.records` go to `feed` from now on."""
        for record_type in feed.records:
            if record_type in self._feeds:
                raise ValueError(f"{record_type.__name__} records have a feed already")
            self._feeds[record_type] = feed
        self._attached.append(feed)

    def feed_for(self, record_type: type) -> Feed | None:
        return self._feeds.get(record_type)

    def submit(self, record: LogRecord) -> None:
        """Called as each record is made; the consumer feeds them in this order."""
        self.queue.put_nowait(record)

    async def consume(self) -> None:
        while True:
            self.feed(await self.queue.get())

    def feed_pending(self) -> None:
        while not self.queue.empty():
            self.feed(self.queue.get_nowait())

    def feed(self, record: LogRecord) -> None:
        self.fed += 1
        feed = self._feeds.get(type(record))
        if feed is not None:
            feed.feed(record)
            return
        # No feed: a kind with nothing to track. Its record is logged as it came.
        stream = getattr(record, "stream", None)
        if isinstance(stream, str):
            self._passed.add(stream)
        self.out.event(record)

    def produced(self, stream: str) -> bool:
        return stream in self._passed or any(f.produced(stream) for f in self._attached)

    def summary(self, t: float) -> None:
        for feed in self._attached:
            feed.summary(t)

    def close(self, t: float) -> None:
        for feed in self._attached:
            feed.close(t)

    def now(self) -> float:
        """Run time now, rounded as sample times are."""
        return round(self._clock.monotonic() - self._run_start, 6)
