"""Disruption intervals per stream, fed one sample at a time.

A failing sample opens an interval, the next success closes it, and a failure of another error
class ends it and opens a new one (openshift/origin `pkg/disruption` does the same with error
text). Samples arrive in the order requests *finished*, not started: a slow request may report
after a faster, later one. So a success only closes an interval if it was sent after the
failure that opened it, and a new interval never starts before the previous one ended; with
those two rules a stream's intervals never overlap and are ordered, whatever the arrival order.

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

Replay: the success that bounds `start_lo` rides on `DisruptionStarted.after`, so the
compactor writes it to the event log (marked `held`); fed again, a held success only counts as
a witness, never closes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prober.core.models import LB, Connection, ErrorClass, Interval, Protocol, Sample


@dataclass(frozen=True, slots=True)
class DisruptionStarted:
    """An interval just opened (for a log line and a metric); its close comes as an `Interval`."""

    stream: str
    lb: LB
    protocol: Protocol
    connection: Connection
    start_t: float
    start_ts: str
    error: ErrorClass
    detail: str
    start_lo: float | None = None
    start_hi: float | None = None
    # The newest-sent success when it opened: the compactor logs it, so a replay sees the
    # same newest success and draws the same `start_lo`.
    after: Sample | None = field(default=None, compare=False)


@dataclass(slots=True)
class _Open:
    started: DisruptionStarted
    last_failure_t: float
    samples: int = 1

    def close(self, end_t: float, end_ts: str, end_hi: float | None) -> Interval:
        s = self.started
        return Interval(
            stream=s.stream,
            lb=s.lb,
            protocol=s.protocol,
            connection=s.connection,
            start_t=s.start_t,
            end_t=max(end_t, s.start_t),
            start_ts=s.start_ts,
            end_ts=end_ts,
            error=s.error,
            detail=s.detail,
            samples=self.samples,
            start_lo=s.start_lo,
            start_hi=s.start_hi,
            end_lo=self.last_failure_t,
            end_hi=end_hi,
        )


DisruptionEvent = DisruptionStarted | Interval


class DisruptionTracker:
    """Disruption intervals and seconds for every stream it is fed."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._last_end: dict[str, float] = {}
        self._seconds: dict[str, float] = {}
        self._newest_ok: dict[str, Sample] = {}  # newest-sent success per stream

    def feed(self, sample: Sample) -> list[DisruptionEvent]:
        if not sample.failed:
            newest = self._newest_ok.get(sample.stream)
            if newest is None or sample.t > newest.t:
                self._newest_ok[sample.stream] = sample
        if sample.held:
            return []  # it changed nothing here when it was first fed, so it changes nothing now
        current = self._open.get(sample.stream)
        if not sample.failed:
            if current is not None and sample.t > current.started.start_t:
                return [self._finish(current.close(sample.t, sample.ts, sample.end))]
            return []
        assert sample.error is not None  # failed implies an error class
        if current is not None:
            stale = sample.t <= current.started.start_t
            if stale or sample.error == current.started.error:
                current.samples += 1
                current.last_failure_t = max(current.last_failure_t, sample.t)
                return []
            closed = self._finish(current.close(sample.t, sample.ts, sample.end))
            # The new class began after the last failure of the old one was sent.
            return [closed, self._start(sample, sample.t, closed.end_lo)]
        start_t = max(sample.t, self._last_end.get(sample.stream, sample.t))
        return [self._start(sample, start_t)]

    def close(self, end_t: float, end_ts: str) -> list[Interval]:
        """End the run: every open interval closes at `end_t`."""
        return [self._finish(o.close(end_t, end_ts, end_t)) for o in list(self._open.values())]

    def seconds(self, stream: str) -> float:
        """Disruption seconds of the stream's closed intervals."""
        return self._seconds.get(stream, 0.0)

    def is_open(self, stream: str) -> bool:
        return stream in self._open

    def _start(
        self, sample: Sample, start_t: float, previous: float | None = None
    ) -> DisruptionStarted:
        assert sample.error is not None
        newest = self._newest_ok.get(sample.stream)
        # A success answered before this failure yet sent after it is no witness of the start.
        witness = newest.t if newest is not None and newest.t < sample.t else None
        lows = [t for t in (previous, witness) if t is not None]
        started = DisruptionStarted(
            stream=sample.stream,
            lb=sample.lb,
            protocol=sample.protocol,
            connection=sample.connection,
            start_t=start_t,
            start_ts=sample.ts,
            error=sample.error,
            detail=sample.detail,
            start_lo=max(lows) if lows else None,
            start_hi=sample.end,
            after=newest,
        )
        self._open[sample.stream] = _Open(started, last_failure_t=sample.t)
        return started

    def _finish(self, interval: Interval) -> Interval:
        del self._open[interval.stream]
        self._last_end[interval.stream] = interval.end_t
        self._seconds[interval.stream] = self.seconds(interval.stream) + interval.seconds
        return interval
