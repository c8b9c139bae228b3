"""Percentiles with BigQuery PERCENTILE_CONT's definition (linear interpolation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prober.core.stats import EmptyData, percentile_cont, percentiles


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([1, 2, 3, 4], 0.5, 2.5),
        ([4, 1, 3, 2], 0.5, 2.5),  # order does not matter
        ([1, 2, 3, 4], 0.0, 1.0),
        ([1, 2, 3, 4], 1.0, 4.0),
        ([7], 0.99, 7.0),
        ([0, 10], 0.25, 2.5),
        (list(range(1, 101)), 0.99, 99.01),
        (list(range(1, 101)), 0.95, 95.05),
        ([1.5, 1.5, 1.5], 0.75, 1.5),
    ],
)
def test_linear_interpolation(values: list[float], p: float, expected: float) -> None:
    assert percentile_cont(values, p) == pytest.approx(expected)


def test_empty_and_out_of_range() -> None:
    with pytest.raises(EmptyData):
        percentile_cont([], 0.5)
    with pytest.raises(EmptyData):
        percentiles([])
    with pytest.raises(ValueError, match="not within"):
        percentile_cont([1], 1.5)
    with pytest.raises(ValueError, match="not within"):
        percentile_cont([1], float("nan"))


def test_the_four_threshold_percentiles() -> None:
    got = percentiles(range(1, 101))
    assert (got.p50, got.p75, got.p95, got.p99, got.count) == pytest.approx(
        (50.5, 75.25, 95.05, 99.01, 100)
    )


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50), st.floats(0, 1), st.floats(0, 1))
def test_monotone_and_within_range(values: list[float], p: float, q: float) -> None:
    lo, hi = sorted((p, q))
    a, b = percentile_cont(values, lo), percentile_cont(values, hi)
    assert min(values) - 1e-6 <= a <= b + 1e-6 <= max(values) + 2e-6
