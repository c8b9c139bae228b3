"""Every metric `prober audit follow` exports, created here on an injected registry.

The follower keeps its counts in its state (so they survive a restart); `update` turns the
difference since the last update into counter increments, so the exported counters always
equal the state's counts.
"""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter

from prober.audit.state import FollowState


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.late_requests = Counter(
            "prober_audit_late_requests_total",
            "Requests kube-apiserver received late in its graceful termination (audit log), "
            "by apiserver and user-agent product",
            ["apiserver", "user_agent"],
            registry=registry,
        )
        self.events = Counter(
            "prober_audit_events_total",
            "Audit events read from the audit log",
            ["apiserver"],
            registry=registry,
        )
        self.bad_lines = Counter(
            "prober_audit_bad_lines_total",
            "Audit log lines that are not audit events, by reason",
            ["apiserver", "reason"],
            registry=registry,
        )
        self.problems = Counter(
            "prober_audit_problems_total",
            "Problems met while following: bad lines, truncations, missing directories",
            registry=registry,
        )
        self._exported: Tally[tuple[str, ...]] = Tally()

    def update(self, state: FollowState) -> None:
        for apiserver, counts in state.counts.items():
            self._bring(("events", apiserver), counts.stats.events, self.events, apiserver)
            for reason, value in counts.stats.bad.items():
                key = ("bad", apiserver, reason)
                self._bring(key, value, self.bad_lines, apiserver, reason)
            for agent, value in counts.late.items():
                key = ("late", apiserver, agent)
                self._bring(key, value, self.late_requests, apiserver, agent)
        self._bring(("problems",), state.problems, self.problems)

    def _bring(self, key: tuple[str, ...], value: int, counter: Counter, *labels: str) -> None:
        delta = value - self._exported[key]
        child = counter.labels(*labels) if labels else counter
        if delta > 0:
            child.inc(delta)
            self._exported[key] = value
