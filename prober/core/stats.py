"""Percentiles as BigQuery's `PERCENTILE_CONT` computes them (linear interpolation).

openshift/origin's allowed-disruption values come from `PERCENTILE_CONT(x, 0.99)` over CI runs,
so our thresholds use the same definition to be comparable: for sorted values `v[0..n-1]` and a
fraction `p`, the position is `p * (n - 1)` and the result interpolates linearly between the
two neighbours (NumPy's default `linear` method, R's type 7).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class EmptyData(ValueError):
    """A percentile of no values."""


def percentile_cont(values: Iterable[float], p: float) -> float:
    """The p-th quantile (0 <= p <= 1) of `values` by linear interpolation."""
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"percentile fraction {p!r} is not within [0, 1]")
    ordered = sorted(values)
    if not ordered:
        raise EmptyData("no values to take a percentile of")
    return _interpolate(ordered, p)


def _interpolate(ordered: Sequence[float], p: float) -> float:
    position = p * (len(ordered) - 1)
    below = math.floor(position)
    above = math.ceil(position)
    if below == above:
        return ordered[below]
    weight = position - below
    return ordered[below] + (ordered[above] - ordered[below]) * weight


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float
    p75: float
    p95: float
    p99: float
    count: int


def percentiles(values: Iterable[float]) -> Percentiles:
    """The four percentiles the thresholds file carries, sorting once."""
    ordered = sorted(values)
    if not ordered:
        raise EmptyData("no values to take percentiles of")
    return Percentiles(
        p50=_interpolate(ordered, 0.50),
        p75=_interpolate(ordered, 0.75),
        p95=_interpolate(ordered, 0.95),
        p99=_interpolate(ordered, 0.99),
        count=len(ordered),
    )
