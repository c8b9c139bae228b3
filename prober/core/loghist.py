"""A fixed-memory histogram of positive durations on logarithmic buckets: what the sampling
gaps (`core.gaps`) and the answer times (`core.latency`) are counted in, so that a run of
any length keeps a few hundred counters per stream, not its samples.

Bucket 0 holds every value up to `FLOOR` (0.1 ms); bucket i >= 1 holds the values in
[FLOOR * ratio**(i-1), FLOOR * ratio**i). A quantile is the upper edge of the bucket that
holds its rank, capped at the largest value counted: at most one bucket's width (`ratio`)
above the true value, never below it, and never past what was seen.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

FLOOR = 1e-4  # seconds: values at or below this share bucket 0


class LogHistogram:
    """Counts values into buckets each `ratio` times wider than the one before."""

    def __init__(self, ratio: float) -> None:
        if ratio <= 1.0:
            raise ValueError(f"a bucket ratio must exceed 1: {ratio!r}")
        self.ratio = ratio
        self._log_ratio = math.log(ratio)
        self.buckets: Counter[int] = Counter()
        self.count = 0
        self.max: float | None = None

    @classmethod
    def restored(
        cls, ratio: float, buckets: Mapping[int, int], largest: float | None
    ) -> LogHistogram:
        """A histogram as `buckets` and `max` wrote it down (a summary record's)."""
        histogram = cls(ratio)
        for bucket, count in buckets.items():
            histogram.buckets[bucket] += count
            histogram.count += count
        histogram.max = largest
        return histogram

    def bucket(self, value: float) -> int:
        if value <= FLOOR:
            return 0
        return 1 + math.floor(math.log(value / FLOOR) / self._log_ratio)

    def upper(self, bucket: int) -> float:
        return FLOOR * self.ratio**bucket

    def add(self, value: float) -> None:
        self.buckets[self.bucket(value)] += 1
        self.count += 1
        self.max = value if self.max is None else max(self.max, value)

    def merged(self, others: Iterable[LogHistogram]) -> LogHistogram:
        """This and `others` (of the same ratio) as one histogram."""
        total = LogHistogram.restored(self.ratio, self.buckets, self.max)
        for other in others:
            if other.ratio != self.ratio:
                raise ValueError(f"cannot merge ratios {self.ratio} and {other.ratio}")
            total.buckets.update(other.buckets)
            total.count += other.count
            if other.max is not None:
                total.max = other.max if total.max is None else max(total.max, other.max)
        return total

    def quantile(self, q: float) -> float | None:
        """The upper edge of the bucket holding rank ceil(q * count), capped at the max;
        None while empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                return min(self.upper(bucket), self.max if self.max is not None else math.inf)
        return self.max  # pragma: no cover - the ranks add up to the count
