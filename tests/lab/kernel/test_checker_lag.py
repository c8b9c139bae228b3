"""The kernel LB's own lag: how much later than its budget's worst case a state change came,
for reasons no cloud LB has. The lab tests take it off the truth before they blame an LB."""

from __future__ import annotations

import pytest

from prober.lab.infra.kernel.checker import Check, Checker, CheckerConfig
from prober.lab.infra.kernel.nftables import Dispatch

INTERVAL, FAST, TIMEOUT = 1.0, 0.25, 0.5


def checker(fastinter: float | None = FAST) -> Checker:
    dispatch = Dispatch("t", "prerouting", "198.18.0.1", 6443, 6443, 1)
    config = CheckerConfig("lb", dispatch, (), INTERVAL, TIMEOUT, 3, 2, True, fastinter, False)
    return Checker(config)


def check(took: float = 0.01, late: float = 0.0) -> Check:
    return Check(0.0, took, late, "Layer4 timeout")


@pytest.mark.parametrize(
    ("checks", "fastinter", "lag"),
    [
        # On time and quick: the budget's worst case holds, nothing to take off.
        ([check(), check(), check(), check()], FAST, 0.0),
        # The last check timing out is in the budget.
        ([check(), check(), check(), check(took=TIMEOUT)], FAST, 0.0),
        # Lateness adds up, the check before the run's included: it shifts the first one.
        ([check(late=0.2), check(late=0.1), check(), check(late=0.05)], FAST, 0.35),
        # A check before the last slower than its gap: the run's at fastinter, the one
        # before it at the interval.
        ([check(took=1.25), check(took=0.45), check(), check()], FAST, 0.45),
        ([check(), check(took=0.45), check(), check()], None, 0.0),
        # The last check taking longer than the timeout: a stalled checker.
        ([check(), check(), check(), check(took=0.75)], FAST, 0.25),
        # A single check (the first run, no check before it).
        ([check(late=0.1, took=0.6)], FAST, 0.2),
    ],
)
def test_lag_is_what_the_budget_does_not_allow(
    checks: list[Check], fastinter: float | None, lag: float
) -> None:
    assert checker(fastinter).lag(checks) == pytest.approx(lag)
