"""Answer times by run phase (`core.latency`) and the histogram they are counted in
(`core.loghist`): table tests of sample sequences, and the summary record's round trip."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from prober.core.eventlog import decode, encode
from prober.core.latency import (
    LATENCY_RATIO,
    MIN_IN_WINDOW,
    MIN_QUIET,
    LatencyStats,
    Part,
    PhaseLatency,
    RunPhase,
    figures,
    run_phase,
    slow_but_up,
)
from prober.core.loghist import LogHistogram
from prober.core.models import StreamCounters, Summary

BEFORE, IN, AFTER = RunPhase.BEFORE, RunPhase.IN, RunPhase.AFTER


@pytest.mark.parametrize(
    ("values", "q", "true"),
    [
        ([0.010] * 99 + [0.500], 0.5, 0.010),
        ([0.010] * 99 + [0.500], 0.99, 0.010),
        ([0.010] * 98 + [0.500] * 2, 0.99, 0.500),
        ([0.00005, 0.00007], 0.5, 0.00005),  # below the floor: bucket 0, capped at the max
        ([3.0], 0.99, 3.0),
        ([0.001 * i for i in range(1, 1001)], 0.5, 0.5),
    ],
)
def test_a_quantile_is_at_most_one_bucket_above_the_true_value_never_below(
    values: list[float], q: float, true: float
) -> None:
    histogram = LogHistogram(LATENCY_RATIO)
    for value in values:
        histogram.add(value)
    found = histogram.quantile(q)
    assert found is not None
    assert true <= found <= max(true * LATENCY_RATIO, 1e-4)
    assert found <= max(values)


def test_an_empty_histogram_has_no_quantile_and_merging_adds_counts() -> None:
    a, b = LogHistogram(1.1), LogHistogram(1.1)
    assert a.quantile(0.5) is None
    a.add(0.01)
    b.add(0.02)
    merged = a.merged([b])
    assert (merged.count, merged.max) == (2, 0.02)
    with pytest.raises(ValueError, match="cannot merge"):
        a.merged([LogHistogram(1.02)])
    with pytest.raises(ValueError, match="must exceed 1"):
        LogHistogram(1.0)


# (window open at each sample) -> the phase of each sample
PHASES = [
    ([False, False], [BEFORE, BEFORE]),
    ([False, True, True, False], [BEFORE, IN, IN, AFTER]),
    ([True, False, True, False], [IN, AFTER, IN, AFTER]),  # between windows is after
    ([False, False, True], [BEFORE, BEFORE, IN]),
]


@pytest.mark.parametrize(("open_at", "phases"), PHASES)
def test_the_run_phase_of_each_sample(open_at: list[bool], phases: list[RunPhase]) -> None:
    seen = False
    got = []
    for window_open in open_at:
        seen = seen or window_open
        got.append(run_phase(window_open=window_open, window_seen=seen))
    assert got == phases


def _written(
    quiet: Sequence[float], inside: Sequence[float], after: Sequence[float] = ()
) -> dict[str, PhaseLatency]:
    stats = LatencyStats()
    for phase, values in ((BEFORE, quiet), (IN, inside), (AFTER, after)):
        for value in values:
            stats.feed(phase, value)
    return stats.written()


# (quiet answers, in-window answers, floor) -> slow?, and the start of why
FINDINGS = [
    # 3 x quiet p99 and the floor both passed: slow
    ([0.010] * 30, [1.5] * 30, 1.0, True, "in-window p99 1.5"),
    # past 3 x quiet, under the floor: a fast LB a little slower is no finding
    ([0.010] * 30, [0.5] * 30, 1.0, False, "in-window p99 0.5"),
    # past the floor, not 3 x quiet: always this slow
    ([1.0] * 30, [2.0] * 30, 1.0, False, "in-window p99 2.0"),
    # too few quiet answers to compare
    ([0.010] * (MIN_QUIET - 1), [1.5] * 30, 1.0, False, "not compared"),
    # too few in the windows (a run without a window has none)
    ([0.010] * 30, [1.5] * (MIN_IN_WINDOW - 1), 1.0, False, "not compared"),
    ([0.010] * 30, [], 1.0, False, "not compared"),
    # one slow answer in a hundred quiet ones is the quiet p99's own
    ([0.010] * 98 + [1.5] * 2, [1.5] * 30, 1.0, False, "in-window p99 1.5"),
]


@pytest.mark.parametrize(("quiet", "inside", "floor", "slow", "why"), FINDINGS)
def test_slow_but_up(
    quiet: list[float], inside: list[float], floor: float, slow: bool, why: str
) -> None:
    finding = slow_but_up(_written(quiet, inside), floor)
    assert finding.slow is slow
    assert finding.why.startswith(why)


def test_quiet_is_before_and_after_the_windows_together() -> None:
    finding = slow_but_up(_written([0.010] * 10, [1.5] * 30, [0.010] * 10), 1.0)
    assert (finding.quiet_count, finding.in_count, finding.slow) == (20, 30, True)


def test_figures_name_every_phase_even_an_empty_one() -> None:
    got = figures(_written([0.010] * 3, []))
    assert got[BEFORE.value].count == 3
    assert got[BEFORE.value].p50 is not None
    assert math.isclose(got[BEFORE.value].p50, 0.010)
    assert (got[IN.value].count, got[IN.value].p99) == (0, None)


def test_a_summary_record_carries_the_histograms_back_unchanged() -> None:
    written = _written([0.010, 0.012, 0.3], [1.5, 1.6], [0.011])
    counters = StreamCounters("kube-api-http1-internal-lb-new-connections", 6, 0, 0, 0.0)
    record = Summary("2026-12-06T00:00:00.000000Z", 10.0, (counters,))
    with_latency = Summary(
        record.ts, record.t, (StreamCounters(**{**_fields(counters), "latency": written}),)
    )
    line = encode(with_latency)
    back = decode(line)
    assert back == with_latency
    assert figures(back.streams[0].latency) == figures(written)  # type: ignore[union-attr]
    assert '"latency"' not in encode(record)  # left out while empty: old lines keep their bytes


def _fields(counters: StreamCounters) -> dict[str, object]:
    return {name: getattr(counters, name) for name in counters.__dataclass_fields__}


def test_connect_and_tls_are_counted_apart_under_keys_of_their_own() -> None:
    stats = LatencyStats()
    stats.feed(IN, 0.050)
    stats.feed(IN, 0.002, Part.CONNECT)
    stats.feed(IN, 0.010, Part.TLS)
    written = stats.written()
    assert sorted(written) == ["in_windows", "in_windows/connect", "in_windows/tls"]
    assert figures(written)[IN.value].p99 == pytest.approx(0.050)
    assert figures(written, Part.CONNECT)[IN.value].count == 1
    assert figures(written, Part.TLS)[BEFORE.value].count == 0
    # The finding reads the answer times only.
    assert slow_but_up(written, 1.0).in_count == 1
