"""GapStats: send times in completion order in, the gaps between them out."""

from __future__ import annotations

import random

import pytest

from prober.core.gaps import GapStats


def feed_all(stats: GapStats, times: list[float]) -> list[float]:
    return [gap for t in times for gap in stats.feed(t)]


@pytest.mark.parametrize(
    ("times", "gaps"),
    [
        ([0.0, 1.0, 2.0, 3.0, 10.0], [1.0, 1.0, 1.0]),  # 3.0 settles once 10.0 arrives
        ([0.0, 2.0, 1.0, 10.0], [1.0, 1.0]),  # out of order within the horizon
        ([0.0, 0.5, 6.0, 7.0, 20.0], [0.5, 5.5, 1.0]),
        ([5.0], []),
    ],
    ids=["in order", "reordered", "a hole", "one sample"],
)
def test_gaps_in_send_order(times: list[float], gaps: list[float]) -> None:
    assert feed_all(GapStats(horizon=5.0), times) == pytest.approx(gaps)


def test_a_sample_later_than_the_horizon_is_counted_not_placed() -> None:
    stats = GapStats(horizon=1.0)
    feed_all(stats, [0.0, 1.0, 2.0, 3.0, 4.0])
    assert stats.feed(0.5) == []
    assert stats.late == 1
    assert stats.summary().count == 2


def test_percentiles_and_max() -> None:
    rng = random.Random(7)
    stats = GapStats(horizon=0.5)
    gaps = [rng.uniform(0.04, 0.06) for _ in range(2000)] + [0.3] * 10 + [2.0]
    rng.shuffle(gaps)
    t, times = 0.0, []
    for gap in gaps:
        t += gap
        times.append(t)
    feed_all(stats, [*times, t + 10.0])
    summary = stats.summary()
    assert summary.count == len(gaps) - 1  # between the send times, not before the first
    assert summary.max == pytest.approx(2.0)
    assert summary.p50 == pytest.approx(sorted(gaps)[len(gaps) // 2], rel=0.03)
    assert summary.p99 == pytest.approx(0.06, rel=0.03)  # 11 slow gaps are 0.5 %, above p99


def test_nothing_yet() -> None:
    summary = GapStats(horizon=1.0).summary()
    assert (summary.count, summary.p50, summary.p99, summary.max) == (0, None, None, None)
