"""The phase of a server's shutdown at a moment: the edges, table-driven."""

from __future__ import annotations

import pytest

from prober.core.phase import LATE_FRACTION, ShutdownPhase, phase_at

B, EARLY, LATE, AFTER = (
    ShutdownPhase.BEFORE,
    ShutdownPhase.DELAY_EARLY,
    ShutdownPhase.DELAY_LATE,
    ShutdownPhase.AFTER,
)


@pytest.mark.parametrize(
    ("t", "t0", "delay", "phase"),
    [
        (9.999, 10.0, 70.0, B),  # just before T0
        (10.0, 10.0, 70.0, EARLY),  # T0 itself: not ready, still serving
        (30.0, 10.0, 70.0, EARLY),
        (66.0, 10.0, 70.0, EARLY),  # exactly 80 %: not yet late (the server's rule is `>`)
        (66.001, 10.0, 70.0, LATE),  # just past 80 %
        (79.999, 10.0, 70.0, LATE),
        (80.0, 10.0, 70.0, AFTER),  # the delay is over
        (500.0, 10.0, 70.0, AFTER),
        (-5.0, 0.0, 70.0, B),  # run time may start after T0 is estimated: negative is fine
        (0.0, 0.0, 0.0, AFTER),  # no delay: straight past it
        (-0.1, 0.0, 0.0, B),
        (104.0, 0.0, 129.0, LATE),  # AWS: 103.2 s is 80 % of 129 s
        (103.2, 0.0, 129.0, EARLY),
    ],
)
def test_phase_at(t: float, t0: float, delay: float, phase: ShutdownPhase) -> None:
    assert phase_at(t, t0, delay) is phase


def test_the_late_fraction_is_openshifts() -> None:
    assert LATE_FRACTION == 0.8


def test_a_negative_delay_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        phase_at(1.0, 0.0, -1.0)
