"""The watch kind's part of the pipeline (`daemon.watches.kind`): its records through the
`WatchTracker`, then to every sink; and the sink that turns them into the watch metrics
(`daemon.metrics.WatchMetrics`) as they come. What the stop cut is counted as `stopped`,
never as a failed write or attempt (`core.watch.STOPPED`).
"""

from __future__ import annotations

from typing import ClassVar

from prober.core.watch import STOPPED, Heartbeat, WatchAttempt, WatchEnd, WatchSeen, WatchTracker
from prober.core.watchsync import WatchSync
from prober.daemon.metrics import WatchMetrics
from prober.daemon.metricspecs import (
    WATCH_ATTEMPTS,
    WATCH_BLIND,
    WATCH_DOOMED,
    WATCH_ENDS,
    WATCH_LAG,
    WATCH_STALLS,
    WATCH_SYNC,
)
from prober.daemon.pipeline import Event, Observed, Sink


class WatchFeed:
    records: ClassVar[tuple[type, ...]] = (WatchAttempt, WatchEnd, WatchSeen, Heartbeat, WatchSync)

    def __init__(self, blind_after: float, out: Sink) -> None:
        self.tracker = WatchTracker(blind_after)
        self._out = out
        self._produced: set[str] = set()

    def feed(self, record: WatchAttempt | WatchEnd | WatchSeen | Heartbeat | WatchSync) -> None:
        self.tracker.feed(record)
        if not isinstance(record, Heartbeat):
            self._produced.add(record.stream)
        self._out.event(record)

    restarting = False  # it tracks no shutdowns

    def produced(self, stream: str) -> bool:
        return stream in self._produced

    def summary(self, t: float) -> None:
        pass

    def close(self, t: float) -> None:
        self.tracker.close(t)


class WatchSink:
    """The metrics of the watch records, as they come."""

    def __init__(self, metrics: WatchMetrics, tracker: WatchTracker) -> None:
        self._metrics = metrics
        self._tracker = tracker
        self._lags: dict[str, int] = {}
        self._blind: dict[str, float] = {}

    def observe(self, observed: Observed) -> None:
        pass

    def keep(self, sample: object) -> None:
        pass

    def event(self, event: Event) -> None:
        m = self._metrics
        if isinstance(event, Heartbeat):
            cut = event.detail == STOPPED
            m.heartbeat("ok" if event.ack is not None else STOPPED if cut else "failed")
            return
        if not isinstance(event, WatchAttempt | WatchEnd | WatchSeen | WatchSync):
            return
        key = (str(event.stream_id.lb), str(event.stream_id.protocol))
        if isinstance(event, WatchSync):
            if event.synced:
                m.child(WATCH_SYNC, *key).observe(event.length)
            if event.stalled:
                m.child(WATCH_STALLS, *key, str(event.synced).lower()).inc()
        elif isinstance(event, WatchAttempt):
            m.child(WATCH_ATTEMPTS, *key, event.step, event.outcome).inc()
            if event.doomed:
                m.child(WATCH_DOOMED, *key).inc()
        elif isinstance(event, WatchEnd):
            m.child(WATCH_ENDS, *key, event.how).inc()
        else:
            result = self._tracker.stream(event.stream)
            for lag in result.lags[self._lags.get(event.stream, 0) :]:
                m.child(WATCH_LAG, *key).observe(lag)
            self._lags[event.stream] = len(result.lags)
            blind = result.blind_seconds
            m.child(WATCH_BLIND, *key).inc(max(0.0, blind - self._blind.get(event.stream, 0.0)))
            self._blind[event.stream] = blind
