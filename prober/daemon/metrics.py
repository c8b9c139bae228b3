"""The sinks that count the daemon's samples and events into its Prometheus metrics, on an
injected registry. The metrics themselves (names, types, labels, help, buckets) are the
records of `daemon.metricspecs`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping

import structlog
from prometheus_client import CollectorRegistry

from prober.core.disruption import DisruptionStarted
from prober.core.instances import Instance
from prober.core.latency import RunPhase
from prober.core.models import (
    LB,
    RECORD_TYPES,
    Interval,
    Pace,
    PaceChange,
    Sample,
    StreamId,
    Summary,
    Window,
)
from prober.core.perceived import Felt, Retried
from prober.core.shutdown import DEFAULT_MAX_OPEN, WindowOpened
from prober.daemon.metricspecs import (
    ADD_BACK,
    ADD_BACK_BOUND,
    APISERVERS_REFUSED,
    BUILD_INFO,
    BURSTS,
    COUNTED,
    DAEMON_METRICS,
    DISRUPTION_INTERVALS,
    DISRUPTION_SECONDS,
    DUE,
    DURATION,
    EARLY,
    EVENT_LOG_DROPPED,
    FELT_SECONDS,
    GAPS,
    HEARTBEATS,
    INTERVAL,
    LATE,
    READINESS_VIOLATION,
    REPLACED,
    REQUESTS,
    RESTARTS,
    RETRIED,
    RETRY_AFTER,
    SAME_NODE,
    SAME_NODE_DISRUPTION,
    SHUTTING_DOWN,
    SKIP_REASONS,
    SKIPPED,
    STARTED,
    TASKS,
    UNATTRIBUTED,
    VIOLATION_BOUND,
    WATCH_METRICS,
    WINDOWS,
    MetricSet,
)
from prober.daemon.pipeline import Event, Observed, Skipped

log = structlog.get_logger("prober.metrics")
RECORD_KINDS = tuple(record.KIND for record in RECORD_TYPES)


class Metrics:
    """The sink that counts samples and events into the daemon's metrics (`DAEMON_METRICS`)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        constant: Mapping[str, str],
        version: str,
        *,
        max_apiservers: int = DEFAULT_MAX_OPEN,
        record_kinds: Iterable[str] = RECORD_KINDS,
    ) -> None:
        """`record_kinds`: every record kind the event log may write (each kind of stream's,
        `core.streamkind.KindTable`), exported at zero in `prober_event_log_dropped_total`."""
        self._metrics = MetricSet(registry, DAEMON_METRICS, constant)
        self._max_apiservers = max_apiservers
        self._apiservers: set[str] = set()  # the `apiserver` label values in use
        self._refusal_logged = False
        self._keys: list[tuple[str, str, str]] = []
        self._stream_keys: dict[str, tuple[str, str, str]] = {}
        self._gaps: dict[Pace, float] = {}
        self._open_windows: collections.Counter[str] = collections.Counter()  # per host
        self._ticks: dict[str, tuple[int, int, int]] = {}  # per stream: as last summarised
        self._metrics.child(BUILD_INFO, version).set(1)
        self._metrics.child(RESTARTS)  # at zero: an alert can watch it from the start
        for kind in record_kinds:  # exported at zero, so an alert can watch it from the start
            self._metrics.child(EVENT_LOG_DROPPED, kind)

    def register_streams(self, streams: Iterable[StreamId]) -> None:
        """Export every stream's series from the start, at zero."""
        for stream in streams:
            key = stream.key
            self._keys.append(key)
            self._stream_keys[stream.name] = key
            self._metrics.child(REQUESTS, *key, "success")
            for phase in RunPhase:
                self._metrics.child(DURATION, *key, phase.value)
            self._metrics.child(DISRUPTION_SECONDS, *key)
            self._metrics.child(FELT_SECONDS, *key)
            self._metrics.child(GAPS, *key)
            self._metrics.child(EARLY, str(stream.lb))
            if stream.lb is not LB.LOCALHOST:  # no LB chose the server: no add-back
                self._metrics.child(UNATTRIBUTED, str(stream.lb))
            if stream.lb is not LB.LOCALHOST:  # never same-node
                self._metrics.child(SAME_NODE, *key)
            for reason in SKIP_REASONS:
                self._metrics.child(SKIPPED, *key, reason)
            for spec in (DUE, STARTED, COUNTED):
                self._metrics.child(spec, *key)

    def pace_gaps(self, *, window: float, quiet: float, pace: Pace, rise: float = 1.0) -> None:
        """The gaps of each pace, and the pace at the start."""
        self._gaps = {Pace.WINDOW: window, Pace.QUIET: quiet, Pace.FAST: window / rise}
        self._set_pace(pace)

    def _set_pace(self, pace: Pace, stream: str | None = None) -> None:
        keys = self._keys if stream is None else [self._stream_keys[stream]]
        for key in keys:
            self._metrics.child(INTERVAL, *key).set(self._gaps[pace])

    def count_tasks(self, count: Callable[[], int]) -> None:
        """`prober_tasks` is read from `count` at each scrape."""
        self._metrics.child(TASKS).set_function(count)

    def count_dropped(self, kind: str) -> None:
        """The event log could not write a record of this kind."""
        self._metrics.child(EVENT_LOG_DROPPED, kind).inc()

    def requests_by_result(self) -> dict[str, int]:
        """`prober_requests_total` summed over streams, by result: what a last scrape sees."""
        totals: dict[str, int] = {}
        for family in self._metrics.metric(REQUESTS).collect():
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    result = sample.labels["result"]
                    totals[result] = totals.get(result, 0) + int(sample.value)
        return totals

    def _apiserver(self, host: str) -> str:
        """The `apiserver` label for a host: itself, or `other` past max_apiservers."""
        if host in self._apiservers:
            return host
        if len(self._apiservers) < self._max_apiservers:
            self._apiservers.add(host)
            return host
        if not self._refusal_logged:
            self._refusal_logged = True
            log.warning("apiserver_names_refused", limit=self._max_apiservers, host=host[:80])
        self._metrics.child(APISERVERS_REFUSED).inc()
        return "other"

    def observe(self, observed: Observed) -> None:
        sample = observed.sample
        key = sample.stream_id.key
        result = sample.error.value if sample.error is not None else "success"
        self._metrics.child(REQUESTS, *key, result).inc()
        if not sample.stopped:  # its end is the daemon's stop, not the server's answer
            self._metrics.child(DURATION, *key, observed.phase.value).observe(sample.dur)
        if sample.late and sample.shutdown is not None:
            self._metrics.child(LATE, *key, self._apiserver(sample.shutdown.host)).inc()
        if sample.replaced is not None:
            self._metrics.child(REPLACED, *key, sample.replaced.value).inc()
        if sample.retried is not None:
            self._metrics.child(RETRIED, *key, sample.retried).inc()
        if sample.burst is not None:
            self._metrics.child(BURSTS, *key).inc()
        if sample.same_node:
            self._metrics.child(SAME_NODE, *key).inc()
        if sample.early:
            self._metrics.child(EARLY, str(sample.lb)).inc()
        if observed.gaps:
            gaps = self._metrics.child(GAPS, *key)
            for gap in observed.gaps:
                gaps.observe(gap)

    def keep(self, sample: Sample) -> None:
        pass  # counted when observed

    def event(self, event: Event) -> None:
        if isinstance(event, Skipped):
            key = event.stream.key
            self._metrics.child(SKIPPED, *key, event.reason).inc(event.count)
        elif isinstance(event, Interval):
            self._interval(event)
        elif isinstance(event, WindowOpened):
            self._open_windows[event.host] += 1
            self._metrics.child(SHUTTING_DOWN, self._apiserver(event.host)).set(1)
        elif isinstance(event, Window):
            self._window(event)
        elif isinstance(event, PaceChange) and self._gaps:
            if event.stream is None or event.stream in self._stream_keys:
                self._set_pace(event.pace, event.stream)
        elif isinstance(event, Felt | Retried):
            self._perceived(event)
        elif isinstance(event, Instance):
            self._instance(event)
        elif isinstance(event, Summary):
            self._completeness(event)
        elif isinstance(event, DisruptionStarted):
            pass  # counted when it closes, with its length

    def _completeness(self, summary: Summary) -> None:
        """Ticks due, requests started and samples counted, by what grew since the last
        summary (a summary's counts are cumulative)."""
        for counters in summary.streams:
            key = self._stream_keys.get(counters.stream)
            if key is None or counters.due is None or counters.started is None:
                continue
            now = (counters.due, counters.started, counters.samples)
            was = self._ticks.get(counters.stream, (0, 0, 0))
            self._ticks[counters.stream] = now
            for spec, new, old in zip((DUE, STARTED, COUNTED), now, was, strict=True):
                if new > old:
                    self._metrics.child(spec, *key).inc(new - old)

    def _perceived(self, event: Felt | Retried) -> None:
        """What a client felt: of an interval, or of an answer with Retry-After."""
        if isinstance(event, Felt):
            if not event.interval.same_node:  # the prober's own node's, never the LB's
                self._metrics.child(FELT_SECONDS, *event.interval.stream_id.key).inc(event.seconds)
            return
        if event.sample.same_node:
            return
        outcome = "unresolved" if event.by is None else "felt" if event.felt else "succeeded"
        self._metrics.child(RETRY_AFTER, *event.sample.stream_id.key, outcome).inc()

    def _instance(self, instance: Instance) -> None:
        """A restarted apiserver written up: each LB's add-back, its unattributed failures
        (its early ones were counted live, sample by sample)."""
        self._metrics.child(RESTARTS).inc()
        for back in instance.lbs:
            lb = str(back.lb)
            if back.unattributed:
                self._metrics.child(UNATTRIBUTED, lb).inc(back.unattributed)
            if back.seconds is None:
                continue  # not taken back by the run's end: no add-back to observe
            self._metrics.child(ADD_BACK, lb).observe(back.seconds)
            for side, value in (("lo", back.seconds_lo), ("hi", back.seconds_hi)):
                if value is not None:
                    self._metrics.child(ADD_BACK_BOUND, lb, side).observe(value)

    def _interval(self, interval: Interval) -> None:
        key = interval.stream_id.key
        if interval.same_node:  # the prober's own node's, never the LB's
            self._metrics.child(SAME_NODE_DISRUPTION, *key).inc(interval.seconds)
            return
        self._metrics.child(DISRUPTION_SECONDS, *key).inc(interval.seconds)
        self._metrics.child(DISRUPTION_INTERVALS, *key, interval.error).inc()

    def _window(self, window: Window) -> None:
        # A host may have a window on each path (`core.trackers`): it shuts down until both
        # closed; only the LB path's window is the LB's to count.
        self._open_windows[window.host] -= 1
        if self._open_windows[window.host] <= 0:
            del self._open_windows[window.host]
            self._metrics.child(SHUTTING_DOWN, self._apiserver(window.host)).set(0)
        if window.same_node:
            return
        self._metrics.child(WINDOWS, self._apiserver(window.host), window.closed_by).inc()
        for seen in window.streams:
            key = seen.stream_id.key
            if seen.reaction is not None:
                self._metrics.child(READINESS_VIOLATION, *key).observe(seen.reaction)
            for side, value in (("lo", seen.reaction_lo), ("hi", seen.reaction_hi)):
                if value is not None and seen.reaction is not None:
                    self._metrics.child(VIOLATION_BOUND, *key, side).observe(value)


class WatchMetrics(MetricSet):
    """The watch streams' series (`daemon.watches.kind`): every label a fixed set of values."""

    def __init__(self, registry: CollectorRegistry, constant: Mapping[str, str]) -> None:
        super().__init__(registry, WATCH_METRICS, constant)

    def heartbeat(self, result: str) -> None:
        """`ok`, `failed`, or `stopped` (cut by the daemon's stop: no failure)."""
        self.child(HEARTBEATS, result).inc()
