"""Disruption intervals per stream, fed one sample at a time.

A failing sample opens an interval, the next success closes it, and a failure of another error
class ends it and opens a new one (openshift/origin `pkg/disruption` does the same with error
text). Samples arrive in the order requests *finished*, not started: a slow request may report
after a faster, later one. So a success only closes an interval if it was sent after the
failure that opened it, and a new interval never starts before the previous one ended; with
those two rules a stream's intervals never overlap and are ordered, whatever the arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(slots=True)
class _Open:
    started: DisruptionStarted
    samples: int = 1

    def close(self, end_t: float, end_ts: str) -> Interval:
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
        )


DisruptionEvent = DisruptionStarted | Interval


class DisruptionTracker:
    """Disruption intervals and seconds for every stream it is fed."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._last_end: dict[str, float] = {}
        self._seconds: dict[str, float] = {}

    def feed(self, sample: Sample) -> list[DisruptionEvent]:
        if sample.held:
            return []  # it changed nothing here when it was first fed, so it changes nothing now
        current = self._open.get(sample.stream)
        if not sample.failed:
            if current is not None and sample.t > current.started.start_t:
                return [self._finish(current.close(sample.t, sample.ts))]
            return []
        assert sample.error is not None  # failed implies an error class
        if current is not None:
            stale = sample.t <= current.started.start_t
            if stale or sample.error == current.started.error:
                current.samples += 1
                return []
            closed = self._finish(current.close(sample.t, sample.ts))
            return [closed, self._start(sample, sample.t)]
        start_t = max(sample.t, self._last_end.get(sample.stream, sample.t))
        return [self._start(sample, start_t)]

    def close(self, end_t: float, end_ts: str) -> list[Interval]:
        """End the run: every open interval closes at `end_t`."""
        return [self._finish(o.close(end_t, end_ts)) for o in list(self._open.values())]

    def seconds(self, stream: str) -> float:
        """Disruption seconds of the stream's closed intervals."""
        return self._seconds.get(stream, 0.0)

    def is_open(self, stream: str) -> bool:
        return stream in self._open

    def _start(self, sample: Sample, start_t: float) -> DisruptionStarted:
        assert sample.error is not None
        started = DisruptionStarted(
            stream=sample.stream,
            lb=sample.lb,
            protocol=sample.protocol,
            connection=sample.connection,
            start_t=start_t,
            start_ts=sample.ts,
            error=sample.error,
            detail=sample.detail,
        )
        self._open[sample.stream] = _Open(started)
        return started

    def _finish(self, interval: Interval) -> Interval:
        del self._open[interval.stream]
        self._last_end[interval.stream] = interval.end_t
        self._seconds[interval.stream] = self.seconds(interval.stream) + interval.seconds
        return interval
