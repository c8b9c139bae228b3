"""Disruption intervals per stream, fed one sample at a time.

A failing sample opens an interval, the next success closes it, and a failure of another error
class ends it and opens a new one (openshift/origin `pkg/disruption` does the same with error
text). Samples arrive in the order requests *finished*, not started: a slow request may report
after a faster, later one. So a success only closes an interval if it was sent after every
failure counted into it, a failure of another class sent before the last one counted is
counted in too, and a new interval never starts before the previous one ended; with those
rules a stream's intervals never overlap and are ordered, whatever the arrival order, and each
interval's estimated edges lie within the bounds below.

Where the true edges lie
------------------------
`start_t` and `end_t` are send times of samples; the edges they stand for are only known to
within the sampling. Each request met the state it reports at some instant between its send
time `t` and its end `t + dur`. So the disruption began after the newest success sent before
the opening failure was sent (`start_lo`: that success's `t`) and no later than that failure's
end (`start_hi`); it lasted at least until the last failure counted into it was sent (`end_lo`)
and ended no later than the end of the success that closed it (`end_hi`). When a success sent
after the opening failure was answered before it (a slow failure, a timeout), the newest
success is no witness of the start, and `start_lo` is None: unbounded, not guessed.

A failure answered late
-----------------------
A request that fails slowly (a timeout on a black-holed connection) reports after the requests
sent after it, and those may all have succeeded. Its disruption ends at the first success sent
after it, whenever that success arrived: the tracker keeps the successes of the last HORIZON
seconds in send order, and a failure that finds one sent after it closes at once, at that
success, instead of staying open until the next one comes (5 s of disruption from one hung
request among a hundred good ones). A failure whose first later success was sent before the
stream's last interval ended adds no time to it: a zero-length interval at that end.

A request the daemon's own stop cut (`Sample.stopped`) is neither: it is passed over, as a
request never sent would be, so it never opens, extends, splits or closes an interval, and it
is no witness of an edge.

Replay: the success that bounds `start_lo` rides on `DisruptionStarted.after`, and the one that
closed a late failure on `DisruptionStarted.closer`, so the compactor writes both to the event
log (marked `held`) before the failure; fed again, a held success only counts as a witness
(`after`, `closer`), never closes anything when it arrives.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from prober.core.models import ErrorClass, Interval, OfStream, Sample, StreamId


@dataclass(frozen=True, slots=True)
class DisruptionStarted(OfStream):
    """An interval just opened (for a log line and a metric); its close comes as an `Interval`."""

    stream_id: StreamId
    start_t: float
    start_ts: str
    error: ErrorClass
    detail: str
    start_lo: float | None = None
    start_hi: float | None = None
    # The newest-sent success when it opened: the compactor logs it, so a replay sees the
    # same newest success and draws the same `start_lo`.
    after: Sample | None = field(default=None, compare=False)
    # A success sent after the failure and fed before it, which closes the interval at once:
    # logged too, so that a replay meets it first.
    closer: Sample | None = field(default=None, compare=False)
    same_node: bool = False  # of the same-node tracker (`core.trackers`)


@dataclass(slots=True)
class _Open:
    started: DisruptionStarted
    last_failure_t: float
    samples: int = 1
    early: int = 0  # failures a just-restarted instance answered (`core.instances`)

    def close(self, end_t: float, end_ts: str, end_hi: float | None) -> Interval:
        s = self.started
        end_t = max(end_t, s.start_t)
        return Interval(
            stream_id=s.stream_id,
            start_t=s.start_t,
            end_t=end_t,
            start_ts=s.start_ts,
            end_ts=end_ts,
            error=s.error,
            detail=s.detail,
            samples=self.samples,
            start_lo=s.start_lo,
            # An interval pushed to the end of the one before (its failure lies inside that
            # one) has its estimates there: its bounds reach them, and still hold the truth.
            start_hi=_at_least(s.start_hi, s.start_t),
            end_lo=self.last_failure_t,
            end_hi=_at_least(end_hi, end_t),
            same_node=s.same_node,
            early=self.early,
        )


def _at_least(bound: float | None, estimate: float) -> float | None:
    return None if bound is None else max(bound, estimate)


DisruptionEvent = DisruptionStarted | Interval
HORIZON = 120.0  # seconds of successes kept: longer than any request takes to fail


class _Successes:
    """A stream's successes of the last HORIZON seconds, in send order."""

    def __init__(self) -> None:
        self._sent: deque[float] = deque()
        self._samples: deque[Sample] = deque()

    def add(self, sample: Sample) -> None:
        if self._sent and sample.t < self._sent[-1]:
            at = bisect.bisect_right(self._sent, sample.t)  # rare: arrivals are nearly in order
            self._sent.insert(at, sample.t)
            self._samples.insert(at, sample)
        else:
            self._sent.append(sample.t)
            self._samples.append(sample)
        while self._sent[0] < self._sent[-1] - HORIZON:
            self._sent.popleft()
            self._samples.popleft()

    def first_after(self, t: float) -> Sample | None:
        at = bisect.bisect_right(self._sent, t)
        return self._samples[at] if at < len(self._samples) else None


class DisruptionTracker:
    """Disruption intervals and seconds for every stream it is fed. `same_node`: it is fed the
    same-node samples (`core.samenode`) and marks what it makes so."""

    def __init__(self, *, same_node: bool = False) -> None:
        self._same_node = same_node
        self._open: dict[str, _Open] = {}
        self._last_end: dict[str, float] = {}
        self._seconds: dict[str, float] = {}
        self._newest_ok: dict[str, Sample] = {}  # newest-sent success per stream
        self._successes: dict[str, _Successes] = {}

    def feed(self, sample: Sample) -> list[DisruptionEvent]:
        if sample.stopped:
            return []  # cut by the stop: no success to close with, no failure to open with
        if not sample.failed:
            newest = self._newest_ok.get(sample.stream)
            if newest is None or sample.t > newest.t:
                self._newest_ok[sample.stream] = sample
            self._successes.setdefault(sample.stream, _Successes()).add(sample)
        if sample.held:
            return []  # it changed nothing here when it was first fed, so it changes nothing now
        current = self._open.get(sample.stream)
        if not sample.failed:
            # Only a success sent after the last failure counted in closes: the disruption
            # lasted at least until that failure was sent (`end_lo`), and ends after it.
            if current is not None and sample.t > current.last_failure_t:
                return [self._finish(current.close(sample.t, sample.ts, sample.end))]
            return []
        assert sample.error is not None  # failed implies an error class
        if current is not None:
            # A failure sent before the last one counted in is inside the interval, whatever
            # its class: splitting there would end the interval before a failure it holds.
            inside = sample.t <= current.last_failure_t
            if inside or sample.error == current.started.error:
                current.samples += 1
                current.early += sample.early
                current.last_failure_t = max(current.last_failure_t, sample.t)
                return []
            closed = self._finish(current.close(sample.t, sample.ts, sample.end))
            # The new class began after the last failure of the old one was sent.
            return [closed, self._start(sample, sample.t, closed.end_lo)]
        return self._open_new(sample)

    def _open_new(self, sample: Sample) -> list[DisruptionEvent]:
        """A failure with no interval open: open one, and close it at once at the first
        success sent after the failure if that success has come already."""
        last_end = self._last_end.get(sample.stream, sample.t)
        start_t = max(sample.t, last_end)
        successes = self._successes.get(sample.stream)
        closer = None if successes is None else successes.first_after(sample.t)
        if closer is None:
            return [self._start(sample, start_t)]
        started = self._start(sample, start_t, closer=closer)
        current = self._open[sample.stream]
        # A closer sent before the last interval ended: the failure lies inside that one, and
        # is counted in a zero-length interval at its end (every failure is in some interval).
        return [started, self._finish(current.close(closer.t, closer.ts, closer.end))]

    def close(self, end_t: float, end_ts: str) -> list[Interval]:
        """End the run: every open interval closes at `end_t`."""
        return [self._finish(o.close(end_t, end_ts, end_t)) for o in list(self._open.values())]

    def seconds(self, stream: str) -> float:
        """Disruption seconds of the stream's closed intervals."""
        return self._seconds.get(stream, 0.0)

    def is_open(self, stream: str) -> bool:
        return stream in self._open

    def _start(
        self,
        sample: Sample,
        start_t: float,
        previous: float | None = None,
        closer: Sample | None = None,
    ) -> DisruptionStarted:
        assert sample.error is not None
        newest = self._newest_ok.get(sample.stream)
        # A success answered before this failure yet sent after it is no witness of the start.
        witness = newest.t if newest is not None and newest.t < sample.t else None
        lows = [t for t in (previous, witness) if t is not None]
        started = DisruptionStarted(
            stream_id=sample.stream_id,
            start_t=start_t,
            start_ts=sample.ts,
            error=sample.error,
            detail=sample.detail,
            start_lo=max(lows) if lows else None,
            start_hi=sample.end,
            after=newest,
            closer=closer,
            same_node=self._same_node,
        )
        self._open[sample.stream] = _Open(started, sample.t, early=int(sample.early))
        return started

    def _finish(self, interval: Interval) -> Interval:
        del self._open[interval.stream]
        self._last_end[interval.stream] = interval.end_t
        self._seconds[interval.stream] = self.seconds(interval.stream) + interval.seconds
        return interval
