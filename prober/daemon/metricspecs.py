"""Every Prometheus metric of the daemon, declared as data: name, type, labels, help and
buckets of each in one record (their meaning: docs/ARCHITECTURE.md, "Metrics"). `MetricSet`
creates a tuple of them on an injected registry; the sinks that count into them are
`daemon.metrics`. Constant labels (`platform` and the configured ones) come first on every
metric: a record's labels are those that follow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
REACTION_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0)
# Add-back runs from a health check's first pass to its healthy threshold: up to tens of
# seconds on the clouds (interval x healthy threshold, a timeout), more when an LB is slow.
ADD_BACK_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0)
GAP_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0)
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
STREAM_LABELS = ("lb", "protocol", "connection")
# Why the scheduler skipped a tick (`daemon.requests.scheduler`): each series exists from the start.
BUSY, MAX_IN_FLIGHT, BEHIND = "busy", "max_in_flight", "behind"
SKIP_REASONS = (BUSY, MAX_IN_FLIGHT, BEHIND)
WATCH_LABELS = ("lb", "protocol")


# Compared and hashed by identity: a record is the key of its label children, looked up at
# every count, and two records are never the same metric.
@dataclass(frozen=True, slots=True, eq=False)
class MetricSpec(Generic[M]):
    kind: type[M]
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None  # a histogram's

    def create(self, registry: CollectorRegistry, constant: tuple[str, ...]) -> M:
        # Only a histogram takes buckets.
        extra: dict[str, Any] = {} if self.buckets is None else {"buckets": self.buckets}
        labels = (*constant, *self.labels)
        return self.kind(self.name, self.help, labels, registry=registry, **extra)


class MetricSet:
    """The metrics of some records on a registry, with their constant labels. Label children
    are cached: `labels()` costs more than the increment."""

    def __init__(
        self,
        registry: CollectorRegistry,
        specs: Iterable[MetricSpec[Any]],
        constant: Mapping[str, str],
    ) -> None:
        names = tuple(constant)
        self._const = tuple(constant.values())
        # Created in the records' order: the exposition lists them so.
        self._metrics = {spec: spec.create(registry, names) for spec in specs}
        self._children: dict[tuple[Any, ...], Any] = {}

    def metric(self, spec: MetricSpec[M]) -> M:
        made: M = self._metrics[spec]
        return made

    def child(self, spec: MetricSpec[M], *values: str) -> M:
        """The series of these label values (after the constant ones), made on first use."""
        key = (spec, *values)
        child: M | None = self._children.get(key)
        if child is None:
            child = self._children[key] = self.metric(spec).labels(*self._const, *values)
        return child


REQUESTS = MetricSpec(
    Counter,
    "prober_requests_total",
    "Requests sent, by result: success or an error class (stopped: cut by the daemon's stop, "
    "no failure).",
    (*STREAM_LABELS, "result"),
)
DURATION = MetricSpec(
    Histogram,
    "prober_request_duration_seconds",
    "Time from sending a request to its end, whatever the result (but stopped: the daemon's "
    "stop ended it), by run phase: before_windows, in_windows (the rollout), after_windows.",
    (*STREAM_LABELS, "phase"),
    REQUEST_BUCKETS,
)
DISRUPTION_SECONDS = MetricSpec(
    Counter,
    "prober_disruption_seconds_total",
    "Seconds of closed disruption intervals (first failure to next success).",
    STREAM_LABELS,
)
FELT_SECONDS = MetricSpec(
    Counter,
    "prober_felt_disruption_seconds_total",
    "Seconds of closed disruption intervals a client felt: all of them but those whose every "
    "failure was an answer with Retry-After that client-go's retries got through (which "
    "prober_disruption_seconds_total counts, as origin does).",
    STREAM_LABELS,
)
RETRY_AFTER = MetricSpec(
    Counter,
    "prober_retry_after_answers_total",
    "Answers with Retry-After (429, 5xx) followed as client-go retries them, by how the "
    "retries ended: succeeded, felt (a failure, or out of tries), unresolved (the run ended "
    "first).",
    (*STREAM_LABELS, "outcome"),
)
DISRUPTION_INTERVALS = MetricSpec(
    Counter,
    "prober_disruption_intervals_total",
    "Closed disruption intervals, by the error class that opened them.",
    (*STREAM_LABELS, "error"),
)
READINESS_VIOLATION = MetricSpec(
    Histogram,
    "prober_readiness_violation_seconds",
    "Per closed shutdown window and stream with late requests: how long after the apiserver "
    "went not-ready this LB still sent it a request.",
    STREAM_LABELS,
    REACTION_BUCKETS,
)
VIOLATION_BOUND = MetricSpec(
    Histogram,
    "prober_readiness_violation_bound_seconds",
    "Per closed shutdown window and stream: where the true reaction lies given the sampling, "
    "side=lo (last late request) and side=hi (first request that showed the LB had stopped); "
    "hi is left out where nothing showed it.",
    (*STREAM_LABELS, "side"),
    REACTION_BUCKETS,
)
RESTARTS = MetricSpec(
    Counter,
    "prober_apiserver_restarts_total",
    "Restarted apiserver processes written up: once every LB served it and its young period "
    "ended, or at the end of the run.",
)
ADD_BACK = MetricSpec(
    Histogram,
    "prober_apiserver_add_back_seconds",
    "Per restarted apiserver and LB that took it back: from its /readyz going true (T1) to the "
    "first request the LB sent it.",
    ("lb",),
    ADD_BACK_BUCKETS,
)
ADD_BACK_BOUND = MetricSpec(
    Histogram,
    "prober_apiserver_add_back_bound_seconds",
    "Per restarted apiserver and LB: where the true add-back lies given the sampling and T1's "
    "own bound, side=lo and side=hi; a side is left out where unbounded.",
    ("lb", "side"),
    ADD_BACK_BUCKETS,
)
EARLY = MetricSpec(
    Counter,
    "prober_early_failures_total",
    "Requests that failed on a restarted apiserver in its first seconds after its /readyz "
    "went true (early_for): an LB routed to it before it could serve.",
    ("lb",),
)
UNATTRIBUTED = MetricSpec(
    Counter,
    "prober_unattributed_failures_total",
    "Unanswered failures (no header: timeouts, resets) through an LB while a restarted "
    "apiserver was young: maybe early, no answer says whose; counted as each restarted "
    "apiserver is written up.",
    ("lb",),
)
GAPS = MetricSpec(
    Histogram,
    "prober_sampling_gap_seconds",
    "Time between the send times of a stream's consecutive requests: what bounds every "
    "reaction it measures. A starved daemon shows here first.",
    STREAM_LABELS,
    GAP_BUCKETS,
)
SKIPPED = MetricSpec(
    Counter,
    "prober_skipped_ticks_total",
    "Ticks not sent, by reason: busy (the worker's kept connection still carried a request), "
    "max_in_flight, behind (the event loop fell behind).",
    (*STREAM_LABELS, "reason"),
)
# Proof of completeness (`core.coverage`), advanced at each summary record from its counts.
DUE = MetricSpec(
    Counter,
    "prober_requests_due_total",
    "Ticks the schedule made due: sent, or skipped (prober_skipped_ticks_total). Advanced at "
    "each summary record.",
    STREAM_LABELS,
)
STARTED = MetricSpec(
    Counter,
    "prober_requests_started_total",
    "Requests sent, on ticks and in witness bursts. Advanced at each summary record.",
    STREAM_LABELS,
)
COUNTED = MetricSpec(
    Counter,
    "prober_requests_counted_total",
    "Requests ended and counted as samples, whether or not the event log kept them: all those "
    "started, once none is in flight. Advanced at each summary record.",
    STREAM_LABELS,
)
REPLACED = MetricSpec(
    Counter,
    "prober_replaced_connections_total",
    "Connections a reused stream's worker opened, by why: first, closed (by the server or the "
    "LB), failed, timeout.",
    (*STREAM_LABELS, "reason"),
)
RETRIED = MetricSpec(
    Counter,
    "prober_retried_requests_total",
    "Requests sent again once on a new connection, as Go's transport would, by why: goaway "
    "(an HTTP/2 stream above a graceful GOAWAY's last_stream_id), closed_idle (a kept "
    "HTTP/1.1 connection closed before a byte of the answer).",
    (*STREAM_LABELS, "reason"),
)
BURSTS = MetricSpec(
    Counter,
    "prober_burst_requests_total",
    "Requests sent as part of a witness burst (fresh connections through an LB that seems to "
    "have stopped routing to a shutting-down apiserver), also counted in "
    "prober_requests_total.",
    STREAM_LABELS,
)
SAME_NODE = MetricSpec(
    Counter,
    "prober_same_node_requests_total",
    "Requests answered by the apiserver on the prober's own node through an LB, or failed "
    "unanswered through an LB that hairpins from it: the node's, not the LB's (also counted "
    "in prober_requests_total).",
    STREAM_LABELS,
)
SAME_NODE_DISRUPTION = MetricSpec(
    Counter,
    "prober_same_node_disruption_seconds_total",
    "Disruption of same-node requests: the prober's own node's apiserver, not the LB's (never "
    "in prober_disruption_seconds_total).",
    STREAM_LABELS,
)
INTERVAL = MetricSpec(
    Gauge,
    "prober_sampling_interval_seconds",
    "A stream's mean gap between requests now: the window gap while an apiserver shuts down, "
    "the quiet gap otherwise (adaptive sampling).",
    STREAM_LABELS,
)
LATE = MetricSpec(
    Counter,
    "prober_late_requests_total",
    "Requests answered by an apiserver that was shutting down (shutdown=true).",
    (*STREAM_LABELS, "apiserver"),
)
SHUTTING_DOWN = MetricSpec(
    Gauge,
    "prober_apiserver_shutting_down",
    "1 while this apiserver's shutdown window is open.",
    ("apiserver",),
)
WINDOWS = MetricSpec(
    Counter,
    "prober_shutdown_windows_total",
    "Closed shutdown windows, by how they closed.",
    ("apiserver", "closed_by"),
)
APISERVERS_REFUSED = MetricSpec(
    Counter,
    "prober_apiserver_names_refused_total",
    'Answers naming an apiserver past max_apiservers: counted under apiserver="other" (a '
    "server chooses the name; series must not grow without bound).",
)
EVENT_LOG_DROPPED = MetricSpec(
    Counter,
    "prober_event_log_dropped_total",
    "Event-log records that could not be written (disk full, file unwritable), by kind; the "
    "samples among them are still counted in prober_requests_total.",
    ("kind",),
)
TASKS = MetricSpec(
    Gauge,
    "prober_tasks",
    "Asyncio tasks alive in the daemon: its supervised tasks, one per request in flight, one "
    "per open connection to these endpoints. Flat in a healthy run.",
)
BUILD_INFO = MetricSpec(Gauge, "prober_build_info", "The prober's version.", ("version",))

DAEMON_METRICS: tuple[MetricSpec[Any], ...] = (
    REQUESTS,
    DURATION,
    DISRUPTION_SECONDS,
    FELT_SECONDS,
    RETRY_AFTER,
    DISRUPTION_INTERVALS,
    READINESS_VIOLATION,
    VIOLATION_BOUND,
    RESTARTS,
    ADD_BACK,
    ADD_BACK_BOUND,
    EARLY,
    UNATTRIBUTED,
    GAPS,
    SKIPPED,
    DUE,
    STARTED,
    COUNTED,
    REPLACED,
    RETRIED,
    BURSTS,
    SAME_NODE,
    SAME_NODE_DISRUPTION,
    INTERVAL,
    LATE,
    SHUTTING_DOWN,
    WINDOWS,
    APISERVERS_REFUSED,
    EVENT_LOG_DROPPED,
    TASKS,
    BUILD_INFO,
)

# The watch streams' series (`daemon.watches.kind`): every label a fixed set of values.
WATCH_ATTEMPTS = MetricSpec(
    Counter,
    "prober_watch_attempts_total",
    "LISTs and WATCHes sent by the watch streams, by step and outcome.",
    (*WATCH_LABELS, "step", "outcome"),
)
WATCH_ENDS = MetricSpec(
    Counter,
    "prober_watch_ends_total",
    "Established watches that ended, by how.",
    (*WATCH_LABELS, "how"),
)
WATCH_DOOMED = MetricSpec(
    Counter,
    "prober_watch_doomed_total",
    "Watches established on an apiserver already answering shutdown=true.",
    WATCH_LABELS,
)
WATCH_LAG = MetricSpec(
    Histogram,
    "prober_watch_lag_seconds",
    "From a heartbeat write's acknowledgement to its event's arrival on the watch.",
    WATCH_LABELS,
    LAG_BUCKETS,
)
WATCH_BLIND = MetricSpec(
    Counter,
    "prober_watch_blind_seconds_total",
    "Seconds a watch saw no heartbeat past the blind threshold after its write.",
    WATCH_LABELS,
)
WATCH_SYNC = MetricSpec(
    Histogram,
    "prober_watch_sync_seconds",
    "Watch-list syncs: from the request to the initial-events-end marker.",
    WATCH_LABELS,
    LAG_BUCKETS,
)
WATCH_STALLS = MetricSpec(
    Counter,
    "prober_watch_sync_stalls_total",
    "Watch-lists whose end marker had not come 10 s (scaled) after the request, by whether "
    "it came at all.",
    (*WATCH_LABELS, "synced"),
)
HEARTBEATS = MetricSpec(
    Counter,
    "prober_heartbeat_writes_total",
    "Writes of the heartbeat Lease, by result.",
    ("result",),
)

WATCH_METRICS: tuple[MetricSpec[Any], ...] = (
    WATCH_ATTEMPTS,
    WATCH_ENDS,
    WATCH_DOOMED,
    WATCH_LAG,
    WATCH_BLIND,
    WATCH_SYNC,
    WATCH_STALLS,
    HEARTBEATS,
)
