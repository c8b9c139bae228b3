"""The delayed-lb scenario's claim (`lab.judges.slowness`): the delayed LB's streams, each of
them, and no other, slow but up."""

from __future__ import annotations

import pytest

from prober.core.models import LB, StreamId
from prober.lab.judges.slowness import judge_slowness
from prober.report.results.latency import LatencySection, LatencyStreamEntry

EXT = [
    "kube-api-http1-external-lb-new-connections",
    "kube-api-http2-external-lb-reused-connections",
]
INT = ["kube-api-http1-internal-lb-new-connections"]


def entry(name: str, slow: bool) -> LatencyStreamEntry:
    s = StreamId.parse(name)
    empty = {"count": 0, "p50": None, "p99": None}
    return {
        "stream": name, "lb": str(s.lb), "protocol": str(s.protocol),
        "connection": str(s.connection), "before_windows": empty, "in_windows": empty,
        "after_windows": empty, "slow_but_up": slow, "why": "in-window p99 ...",
    }  # fmt: skip


def section(slow: set[str], recorded: bool = True) -> LatencySection:
    return {
        "recorded": recorded, "multiple": 3.0, "floor": 1.0, "min_quiet": 20,
        "min_in_window": 20, "ratio": 1.1,
        "streams": [entry(name, name in slow) for name in (*EXT, *INT)],
    }  # fmt: skip


# (slow streams, recorded) -> problems naming these streams
CASES = [
    (set(EXT), True, []),
    ({EXT[0]}, True, [EXT[1]]),  # a kept connection through the delayed LB was not slow
    ({*EXT, *INT}, True, [INT[0]]),  # an LB that was not delayed was slow
    (set(), True, EXT),
    (set(EXT), False, ["no answer times"]),
]


@pytest.mark.parametrize(("slow", "recorded", "named"), CASES)
def test_the_delayed_lb_and_only_it_is_slow_but_up(
    slow: set[str], recorded: bool, named: list[str]
) -> None:
    judged = judge_slowness(section(slow, recorded), LB.EXTERNAL, 0.6)
    assert len(judged.problems) == len(named)
    for problem, name in zip(judged.problems, named, strict=True):
        assert name in problem
    assert len(judged.findings) == (len(slow) if recorded else 0)
