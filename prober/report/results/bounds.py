"""Where a disruption's true length lies, from the bounds the sampling puts on its intervals'
edges (summary.json v2, `core.disruption`): what the verdicts' messages and report.html say."""

from __future__ import annotations

import math
from collections.abc import Sequence

from prober.report.schema.types import IntervalEntry


def disruption_bound(intervals: Sequence[IntervalEntry]) -> tuple[float, float | None] | None:
    """Where a stream's true disruption seconds lie: the sum of its intervals' bounds.

    None without intervals (the sampling cannot rule out a failure shorter than its gap, so
    0 s gets no bound) or without bounds (a v1 summary)."""
    if not intervals or any("start_lo" not in i for i in intervals):
        return None
    bounds = [
        interval_bound(i["start_lo"], i["start_hi"], i["end_lo"], i["end_hi"]) for i in intervals
    ]
    his = [hi for _, hi in bounds]
    total_hi = None if None in his else math.fsum(hi for hi in his if hi is not None)
    return math.fsum(lo for lo, _ in bounds), total_hi


def interval_bound(
    start_lo: float | None, start_hi: float | None, end_lo: float | None, end_hi: float | None
) -> tuple[float, float | None]:
    """Where one interval's true length lies, from the bounds on its edges.

    It lasted at least from its latest possible start to its earliest possible end (never
    less than 0 s, which also stands in for an unbounded edge), at most from its earliest
    start to its latest end (unbounded if either is)."""
    lo = 0.0 if end_lo is None or start_hi is None else max(0.0, end_lo - start_hi)
    return lo, None if end_hi is None or start_lo is None else end_hi - start_lo
