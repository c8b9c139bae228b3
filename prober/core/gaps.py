"""The sampling gap a stream achieved: the time between the send times of its consecutive
requests, which is what bounds every reaction it measures (`core.shutdown`).

Samples arrive in completion order, not send order, so send times wait in a small sorted
buffer until nothing sent before them can still arrive: `horizon` seconds behind the newest
send time (the request timeout plus slack). A sample that arrives later still than that (a
daemon stalled for longer than the horizon) cannot be placed between gaps already counted: it
is counted in `late` and left out. Percentiles come from a histogram with 2 % wide buckets
(`core.loghist`), so the memory is fixed however long the run.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from prober.core.loghist import LogHistogram

GAP_RATIO = 1.02  # each bucket 2 % wider than the one before (`core.loghist`)


@dataclass(frozen=True, slots=True)
class GapSummary:
    count: int
    p50: float | None
    p99: float | None
    max: float | None


class GapStats:
    """Fed each sample's send time `t` in completion order; returns the gaps it completes."""

    def __init__(self, horizon: float) -> None:
        self._horizon = horizon
        self._pending: list[float] = []
        self._last: float | None = None
        self._histogram = LogHistogram(GAP_RATIO)
        self.late = 0

    def feed(self, t: float) -> list[float]:
        if self._last is not None and t <= self._last:
            self.late += 1
            return []
        bisect.insort(self._pending, t)
        settled = self._pending[-1] - self._horizon
        done: list[float] = []
        while self._pending and self._pending[0] < settled:
            current = self._pending.pop(0)
            if self._last is not None:
                done.append(self._count_gap(current - self._last))
            self._last = current
        return done

    def _count_gap(self, gap: float) -> float:
        self._histogram.add(gap)
        return gap

    def summary(self) -> GapSummary:
        """Median and p99 (each the upper edge of its bucket) and the largest gap so far."""
        h = self._histogram
        return GapSummary(h.count, h.quantile(0.5), h.quantile(0.99), h.max)
