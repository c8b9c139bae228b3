"""The pacer: each stream's mean gap as the pace changes, and who is woken when."""

from __future__ import annotations

from prober.core.models import Pace, PaceChange
from prober.daemon.requests.pacer import Pacer


class Sleeper:
    def __init__(self, name: str) -> None:
        self.stream_name = name
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


def change(pace: Pace, stream: str | None = None) -> PaceChange:
    return PaceChange(1.0, "2026-12-01T00:00:01.000000Z", pace, "test", stream)


def test_quiet_window_and_a_released_stream() -> None:
    pacer, a, b = Pacer(quiet=1.0), Sleeper("a"), Sleeper("b")
    pacer.attach(a)
    pacer.attach(b)
    assert (pacer.gap("a", 0.05), pacer.gap("b", 0.05)) == (1.0, 1.0)
    pacer.set(change(Pace.WINDOW))
    assert (pacer.gap("a", 0.05), a.woken, b.woken) == (0.05, 1, 1)
    pacer.set(change(Pace.QUIET, "a"))  # a's reaction is bounded
    assert (pacer.gap("a", 0.05), pacer.gap("b", 0.05)) == (1.0, 0.05)
    pacer.set(change(Pace.WINDOW, "a"))  # open again: only a is woken
    assert (pacer.gap("a", 0.05), a.woken, b.woken) == (0.05, 2, 1)
    pacer.set(change(Pace.QUIET))
    assert pacer.gap("b", 0.05) == 1.0


def test_without_a_quiet_rate_the_pace_never_changes() -> None:
    pacer, a = Pacer(quiet=None), Sleeper("a")
    pacer.attach(a)
    pacer.set(change(Pace.QUIET))
    assert (pacer.pace, pacer.gap("a", 0.05), a.woken) == (Pace.WINDOW, 0.05, 0)


def test_a_quiet_gap_is_never_shorter_than_the_window_gap() -> None:
    assert Pacer(quiet=0.01).gap("a", 0.05) == 0.05


def test_a_fast_stream_samples_rise_times_the_window_rate_until_the_next_window() -> None:
    pacer, a = Pacer(quiet=1.0, rise=2.0), Sleeper("a")
    pacer.attach(a)
    pacer.set(change(Pace.WINDOW))
    pacer.set(change(Pace.QUIET, "a"))
    pacer.set(change(Pace.FAST, "a"))  # out of the quiet rate: woken
    assert (pacer.gap("a", 0.05), a.woken) == (0.025, 2)
    pacer.set(change(Pace.WINDOW, "a"))
    assert pacer.gap("a", 0.05) == 0.05
    pacer.set(change(Pace.FAST, "a"))
    pacer.set(change(Pace.QUIET))  # no window open: every stream quiet again
    assert pacer.gap("a", 0.05) == 1.0
