"""Every Prometheus metric of the daemon, created here on an injected registry (their names
and labels: docs/ARCHITECTURE.md, "Metrics"). Constant labels (`platform` and the configured
ones) come first on every metric. Label children are cached: `labels()` costs more than the
increment.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from prober.core.disruption import DisruptionStarted
from prober.core.instances import Instance
from prober.core.models import (
    LB,
    RECORD_TYPES,
    Interval,
    Pace,
    PaceChange,
    Sample,
    StreamId,
    Window,
)
from prober.core.perceived import Felt, Retried
from prober.core.shutdown import DEFAULT_MAX_OPEN, WindowOpened
from prober.daemon.pipeline import Event, Observed, Skipped
from prober.daemon.scheduler import SKIP_REASONS

log = structlog.get_logger("prober.metrics")
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
REACTION_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0)
# Add-back runs from a health check's first pass to its healthy threshold: up to tens of
# seconds on the clouds (interval x healthy threshold, a timeout), more when an LB is slow.
ADD_BACK_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0)
GAP_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0)
STREAM_LABELS = ("lb", "protocol", "connection")
RECORD_KINDS = tuple(record.KIND for record in RECORD_TYPES)


class Metrics:
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
        self._const = tuple(constant.values())
        self._max_apiservers = max_apiservers
        self._apiservers: set[str] = set()  # the `apiserver` label values in use
        self._refusal_logged = False
        names = tuple(constant)

        def labels(*extra: str) -> tuple[str, ...]:
            return (*names, *extra)

        self.requests = Counter(
            "prober_requests_total",
            "Requests sent, by result: success or an error class (stopped: cut by the "
            "daemon's stop, no failure).",
            labels(*STREAM_LABELS, "result"),
            registry=registry,
        )
        self.duration = Histogram(
            "prober_request_duration_seconds",
            "Time from sending a request to its end, whatever the result (but stopped: "
            "the daemon's stop ended it).",
            labels(*STREAM_LABELS),
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.disruption_seconds = Counter(
            "prober_disruption_seconds_total",
            "Seconds of closed disruption intervals (first failure to next success).",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.felt_seconds = Counter(
            "prober_felt_disruption_seconds_total",
            "Seconds of closed disruption intervals a client felt: all of them but those "
            "whose every failure was an answer with Retry-After that client-go's retries got "
            "through (which prober_disruption_seconds_total counts, as origin does).",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.retry_after = Counter(
            "prober_retry_after_answers_total",
            "Answers with Retry-After (429, 5xx) followed as client-go retries them, by how "
            "the retries ended: succeeded, felt (a failure, or out of tries), unresolved "
            "(the run ended first).",
            labels(*STREAM_LABELS, "outcome"),
            registry=registry,
        )
        self.disruption_intervals = Counter(
            "prober_disruption_intervals_total",
            "Closed disruption intervals, by the error class that opened them.",
            labels(*STREAM_LABELS, "error"),
            registry=registry,
        )
        self.readiness_violation = Histogram(
            "prober_readiness_violation_seconds",
            "Per closed shutdown window and stream with late requests: how long after the "
            "apiserver went not-ready this LB still sent it a request.",
            labels(*STREAM_LABELS),
            buckets=REACTION_BUCKETS,
            registry=registry,
        )
        self.violation_bound = Histogram(
            "prober_readiness_violation_bound_seconds",
            "Per closed shutdown window and stream: where the true reaction lies given the "
            "sampling, side=lo (last late request) and side=hi (first request that showed the "
            "LB had stopped); hi is left out where nothing showed it.",
            labels(*STREAM_LABELS, "side"),
            buckets=REACTION_BUCKETS,
            registry=registry,
        )
        self.restarts = Counter(
            "prober_apiserver_restarts_total",
            "Restarted apiserver processes written up: once every LB served it and its young "
            "period ended, or at the end of the run.",
            labels(),
            registry=registry,
        )
        self.add_back = Histogram(
            "prober_apiserver_add_back_seconds",
            "Per restarted apiserver and LB that took it back: from its /readyz going true "
            "(T1) to the first request the LB sent it.",
            labels("lb"),
            buckets=ADD_BACK_BUCKETS,
            registry=registry,
        )
        self.add_back_bound = Histogram(
            "prober_apiserver_add_back_bound_seconds",
            "Per restarted apiserver and LB: where the true add-back lies given the sampling "
            "and T1's own bound, side=lo and side=hi; a side is left out where unbounded.",
            labels("lb", "side"),
            buckets=ADD_BACK_BUCKETS,
            registry=registry,
        )
        self.early = Counter(
            "prober_early_failures_total",
            "Requests that failed on a restarted apiserver in its first seconds after its "
            "/readyz went true (early_for): an LB routed to it before it could serve.",
            labels("lb"),
            registry=registry,
        )
        self.unattributed = Counter(
            "prober_unattributed_failures_total",
            "Unanswered failures (no header: timeouts, resets) through an LB while a restarted "
            "apiserver was young: maybe early, no answer says whose; counted as each "
            "restarted apiserver is written up.",
            labels("lb"),
            registry=registry,
        )
        self.gaps = Histogram(
            "prober_sampling_gap_seconds",
            "Time between the send times of a stream's consecutive requests: what bounds "
            "every reaction it measures. A starved daemon shows here first.",
            labels(*STREAM_LABELS),
            buckets=GAP_BUCKETS,
            registry=registry,
        )
        self.skipped = Counter(
            "prober_skipped_ticks_total",
            "Ticks not sent, by reason: busy (the worker's kept connection still carried a "
            "request), max_in_flight, behind (the event loop fell behind).",
            labels(*STREAM_LABELS, "reason"),
            registry=registry,
        )
        self.replaced = Counter(
            "prober_replaced_connections_total",
            "Connections a reused stream's worker opened, by why: first, closed (by the "
            "server or the LB), failed, timeout.",
            labels(*STREAM_LABELS, "reason"),
            registry=registry,
        )
        self.retried = Counter(
            "prober_retried_requests_total",
            "Requests sent again once on a new connection, as Go's transport would, by why: "
            "goaway (an HTTP/2 stream above a graceful GOAWAY's last_stream_id), closed_idle "
            "(a kept HTTP/1.1 connection closed before a byte of the answer).",
            labels(*STREAM_LABELS, "reason"),
            registry=registry,
        )
        self.bursts = Counter(
            "prober_burst_requests_total",
            "Requests sent as part of a witness burst (fresh connections through an LB that "
            "seems to have stopped routing to a shutting-down apiserver), also counted in "
            "prober_requests_total.",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.same_node = Counter(
            "prober_same_node_requests_total",
            "Requests answered by the apiserver on the prober's own node through an LB, or "
            "failed unanswered through an LB that hairpins from it: the node's, not the LB's "
            "(also counted in prober_requests_total).",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.same_node_disruption = Counter(
            "prober_same_node_disruption_seconds_total",
            "Disruption of same-node requests: the prober's own node's apiserver, not the "
            "LB's (never in prober_disruption_seconds_total).",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.interval = Gauge(
            "prober_sampling_interval_seconds",
            "A stream's mean gap between requests now: the window gap while an apiserver "
            "shuts down, the quiet gap otherwise (adaptive sampling).",
            labels(*STREAM_LABELS),
            registry=registry,
        )
        self.late = Counter(
            "prober_late_requests_total",
            "Requests answered by an apiserver that was shutting down (shutdown=true).",
            labels(*STREAM_LABELS, "apiserver"),
            registry=registry,
        )
        self.shutting_down = Gauge(
            "prober_apiserver_shutting_down",
            "1 while this apiserver's shutdown window is open.",
            labels("apiserver"),
            registry=registry,
        )
        self.windows = Counter(
            "prober_shutdown_windows_total",
            "Closed shutdown windows, by how they closed.",
            labels("apiserver", "closed_by"),
            registry=registry,
        )
        self.apiservers_refused = Counter(
            "prober_apiserver_names_refused_total",
            'Answers naming an apiserver past max_apiservers: counted under apiserver="other" '
            "(a server chooses the name; series must not grow without bound).",
            labels(),
            registry=registry,
        )
        self.event_log_dropped = Counter(
            "prober_event_log_dropped_total",
            "Event-log records that could not be written (disk full, file unwritable), by kind; "
            "the samples among them are still counted in prober_requests_total.",
            labels("kind"),
            registry=registry,
        )
        self.tasks = Gauge(
            "prober_tasks",
            "Asyncio tasks alive in the daemon: its supervised tasks, one per request in "
            "flight, one per open connection to these endpoints. Flat in a healthy run.",
            labels(),
            registry=registry,
        )
        self.build_info = Gauge(
            "prober_build_info", "The prober's version.", labels("version"), registry=registry
        )
        self.build_info.labels(*self._const, version).set(1)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._keys: list[tuple[str, str, str]] = []
        self._stream_keys: dict[str, tuple[str, str, str]] = {}
        self._gaps: dict[Pace, float] = {}
        self._open_windows: collections.Counter[str] = collections.Counter()  # per host
        self._child(self.restarts)  # at zero: an alert can watch it from the start
        for kind in record_kinds:  # exported at zero, so an alert can watch it from the start
            self._child(self.event_log_dropped, kind)

    def _child(self, metric: Any, *values: str) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*self._const, *values)
        return child

    def register_streams(self, streams: Iterable[StreamId]) -> None:
        """Export every stream's series from the start, at zero."""
        for stream in streams:
            key = stream.key
            self._keys.append(key)
            self._stream_keys[stream.name] = key
            self._child(self.requests, *key, "success")
            self._child(self.duration, *key)
            self._child(self.disruption_seconds, *key)
            self._child(self.felt_seconds, *key)
            self._child(self.gaps, *key)
            self._child(self.early, str(stream.lb))
            if stream.lb is not LB.LOCALHOST:  # no LB chose the server: no add-back
                self._child(self.unattributed, str(stream.lb))
            if stream.lb is not LB.LOCALHOST:  # never same-node
                self._child(self.same_node, *key)
            for reason in SKIP_REASONS:
                self._child(self.skipped, *key, reason)

    def pace_gaps(self, *, window: float, quiet: float, pace: Pace, rise: float = 1.0) -> None:
        """The gaps of each pace, and the pace at the start."""
        self._gaps = {Pace.WINDOW: window, Pace.QUIET: quiet, Pace.FAST: window / rise}
        self._set_pace(pace)

    def _set_pace(self, pace: Pace, stream: str | None = None) -> None:
        keys = self._keys if stream is None else [self._stream_keys[stream]]
        for key in keys:
            self._child(self.interval, *key).set(self._gaps[pace])

    def count_tasks(self, count: Callable[[], int]) -> None:
        """`prober_tasks` is read from `count` at each scrape."""
        self._child(self.tasks).set_function(count)

    def count_dropped(self, kind: str) -> None:
        """The event log could not write a record of this kind."""
        self._child(self.event_log_dropped, kind).inc()

    def requests_by_result(self) -> dict[str, int]:
        """`prober_requests_total` summed over streams, by result: what a last scrape sees."""
        totals: dict[str, int] = {}
        for family in self.requests.collect():
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
        self._child(self.apiservers_refused).inc()
        return "other"

    def observe(self, observed: Observed) -> None:
        sample = observed.sample
        key = sample.stream_id.key
        result = sample.error.value if sample.error is not None else "success"
        self._child(self.requests, *key, result).inc()
        if not sample.stopped:  # its end is the daemon's stop, not the server's answer
            self._child(self.duration, *key).observe(sample.dur)
        if sample.late and sample.shutdown is not None:
            self._child(self.late, *key, self._apiserver(sample.shutdown.host)).inc()
        if sample.replaced is not None:
            self._child(self.replaced, *key, sample.replaced.value).inc()
        if sample.retried is not None:
            self._child(self.retried, *key, sample.retried).inc()
        if sample.burst is not None:
            self._child(self.bursts, *key).inc()
        if sample.same_node:
            self._child(self.same_node, *key).inc()
        if sample.early:
            self._child(self.early, str(sample.lb)).inc()
        if observed.gaps:
            gaps = self._child(self.gaps, *key)
            for gap in observed.gaps:
                gaps.observe(gap)

    def keep(self, sample: Sample) -> None:
        pass  # counted when observed

    def event(self, event: Event) -> None:
        if isinstance(event, Skipped):
            key = event.stream.key
            self._child(self.skipped, *key, event.reason).inc(event.count)
        elif isinstance(event, Interval):
            self._interval(event)
        elif isinstance(event, WindowOpened):
            self._open_windows[event.host] += 1
            self._child(self.shutting_down, self._apiserver(event.host)).set(1)
        elif isinstance(event, Window):
            self._window(event)
        elif isinstance(event, PaceChange) and self._gaps:
            if event.stream is None or event.stream in self._stream_keys:
                self._set_pace(event.pace, event.stream)
        elif isinstance(event, Felt | Retried):
            self._perceived(event)
        elif isinstance(event, Instance):
            self._instance(event)
        elif isinstance(event, DisruptionStarted):
            pass  # counted when it closes, with its length

    def _perceived(self, event: Felt | Retried) -> None:
        """What a client felt: of an interval, or of an answer with Retry-After."""
        if isinstance(event, Felt):
            if not event.interval.same_node:  # the prober's own node's, never the LB's
                self._child(self.felt_seconds, *event.interval.stream_id.key).inc(event.seconds)
            return
        if event.sample.same_node:
            return
        outcome = "unresolved" if event.by is None else "felt" if event.felt else "succeeded"
        self._child(self.retry_after, *event.sample.stream_id.key, outcome).inc()

    def _instance(self, instance: Instance) -> None:
        """A restarted apiserver written up: each LB's add-back, its unattributed failures
        (its early ones were counted live, sample by sample)."""
        self._child(self.restarts).inc()
        for back in instance.lbs:
            lb = str(back.lb)
            if back.unattributed:
                self._child(self.unattributed, lb).inc(back.unattributed)
            if back.seconds is None:
                continue  # not taken back by the run's end: no add-back to observe
            self._child(self.add_back, lb).observe(back.seconds)
            for side, value in (("lo", back.seconds_lo), ("hi", back.seconds_hi)):
                if value is not None:
                    self._child(self.add_back_bound, lb, side).observe(value)

    def _interval(self, interval: Interval) -> None:
        key = interval.stream_id.key
        if interval.same_node:  # the prober's own node's, never the LB's
            self._child(self.same_node_disruption, *key).inc(interval.seconds)
            return
        self._child(self.disruption_seconds, *key).inc(interval.seconds)
        self._child(self.disruption_intervals, *key, interval.error).inc()

    def _window(self, window: Window) -> None:
        # A host may have a window on each path (`core.trackers`): it shuts down until both
        # closed; only the LB path's window is the LB's to count.
        self._open_windows[window.host] -= 1
        if self._open_windows[window.host] <= 0:
            del self._open_windows[window.host]
            self._child(self.shutting_down, self._apiserver(window.host)).set(0)
        if window.same_node:
            return
        self._child(self.windows, self._apiserver(window.host), window.closed_by).inc()
        for seen in window.streams:
            key = seen.stream_id.key
            if seen.reaction is not None:
                self._child(self.readiness_violation, *key).observe(seen.reaction)
            for side, value in (("lo", seen.reaction_lo), ("hi", seen.reaction_hi)):
                if value is not None and seen.reaction is not None:
                    self._child(self.violation_bound, *key, side).observe(value)


LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
WATCH_LABELS = ("lb", "protocol")


class WatchMetrics:
    """The watch streams' series (`daemon.watches`): every label a fixed set of values."""

    def __init__(self, registry: CollectorRegistry, constant: Mapping[str, str]) -> None:
        self._const = tuple(constant.values())
        names = tuple(constant)

        def labels(*extra: str) -> tuple[str, ...]:
            return (*names, *WATCH_LABELS, *extra)

        self.attempts = Counter(
            "prober_watch_attempts_total",
            "LISTs and WATCHes sent by the watch streams, by step and outcome.",
            labels("step", "outcome"),
            registry=registry,
        )
        self.ends = Counter(
            "prober_watch_ends_total", "Established watches that ended, by how.",
            labels("how"), registry=registry,
        )  # fmt: skip
        self.doomed = Counter(
            "prober_watch_doomed_total",
            "Watches established on an apiserver already answering shutdown=true.",
            labels(),
            registry=registry,
        )
        self.lag = Histogram(
            "prober_watch_lag_seconds",
            "From a heartbeat write's acknowledgement to its event's arrival on the watch.",
            labels(), buckets=LAG_BUCKETS, registry=registry,
        )  # fmt: skip
        self.blind = Counter(
            "prober_watch_blind_seconds_total",
            "Seconds a watch saw no heartbeat past the blind threshold after its write.",
            labels(),
            registry=registry,
        )
        self.heartbeats = Counter(
            "prober_heartbeat_writes_total", "Writes of the heartbeat Lease, by result.",
            (*names, "result"), registry=registry,
        )  # fmt: skip

    def key(self, lb: str, protocol: str) -> tuple[str, ...]:
        return (*self._const, lb, protocol)

    def heartbeat(self, result: str) -> None:
        """`ok`, `failed`, or `stopped` (cut by the daemon's stop: no failure)."""
        self.heartbeats.labels(*self._const, result).inc()
