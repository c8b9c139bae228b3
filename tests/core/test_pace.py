"""PaceTracker: sample sequences in, changes of the sampling rate out (table-driven)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from prober.core.models import ErrorClass, Pace, Sample
from prober.core.pace import PaceTracker
from tests.factories import STREAM, fail, ok, sample

DUR = 0.01


def late(t: float) -> Sample:
    return sample(t, host="A", late=True, elapsed=1)


@dataclass(frozen=True)
class Case:
    name: str
    # (sample, whether a shutdown window is open once it is fed)
    feed: list[tuple[Sample, bool]]
    changes: list[tuple[float, Pace, str]]  # (t, pace, reason starts with)


CASES = [
    Case("quiet while nothing happens", [(ok(1), False), (ok(2), False)], []),
    Case(
        "a late answer engages the window rate",
        [(ok(1), False), (late(2), True), (ok(3), True)],
        [(2 + DUR, Pace.WINDOW, f"shutdown=true from A on {STREAM.name}")],
    ),
    Case(
        "so does a failure",
        [(fail(2), False)],
        [(2 + DUR, Pace.WINDOW, f"connect_refused on {STREAM.name}")],
    ),
    Case(
        "a served answer without the header is no alarm",
        [(fail(2, ErrorClass.HEADER_MISSING), False)],
        [],
    ),
    Case(
        "back to quiet once no window is open and the settle time passed",
        [(late(2), True), (ok(20), True), (ok(31), False), (ok(32.1), False), (ok(33), False)],
        [(2 + DUR, Pace.WINDOW, "shutdown=true"), (32.1 + DUR, Pace.QUIET, "no shutdown window")],
    ),
    Case(
        "an open window keeps the window rate however long it lasts",
        [(late(2), True), (ok(100), True)],
        [(2 + DUR, Pace.WINDOW, "shutdown=true")],
    ),
    Case(
        "a failure restarts the settle time",
        [(late(2), True), (fail(25), False), (ok(40), False), (ok(56), False)],
        [(2 + DUR, Pace.WINDOW, "shutdown=true"), (56 + DUR, Pace.QUIET, "no shutdown window")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_stream_together(case: Case) -> None:
    tracker = PaceTracker(settle=30.0)
    changes = []
    for s, open_ in case.feed:
        # Never settled: this table is about the pace of every stream together.
        changes += [c for c in tracker.feed(s, windows_open=open_) if c.stream is None]
    assert [(c.t, c.pace) for c in changes] == [(t, p) for t, p, _ in case.changes]
    for change, (_, _, reason) in zip(changes, case.changes, strict=True):
        assert change.reason.startswith(reason)


def test_a_stream_whose_reaction_is_bounded_goes_quiet_after_the_hold() -> None:
    tracker = PaceTracker(settle=30.0)
    feed = tracker.feed
    assert [c.pace for c in feed(late(10.0), windows_open=True, opened=True)] == [Pace.WINDOW]
    # Within the hold every stream stays fast, settled or not: T0's rounding step.
    assert feed(ok(11.0), windows_open=True, settled=True) == []
    (released,) = feed(ok(12.5), windows_open=True, settled=True)
    assert (released.stream, released.pace) == (STREAM.name, Pace.QUIET)
    assert released.reason == "its reaction to every open window is bounded"
    assert feed(ok(13.5), windows_open=True, settled=True) == []
    assert tracker.released == {STREAM.name}
    # A failure on it brings it back, and a new window brings every stream back.
    (back,) = feed(fail(14.0), windows_open=True, settled=True, disrupted=True)
    assert (back.stream, back.pace, back.reason) == (
        STREAM.name, Pace.WINDOW, "in a disruption interval",
    )  # fmt: skip
    feed(ok(15.0), windows_open=True, settled=True)
    assert tracker.released == {STREAM.name}
    (again,) = feed(late(16.0), windows_open=True, opened=True, settled=False)
    assert (again.stream, again.pace) == (None, Pace.WINDOW)
    assert tracker.released == set()


def test_an_lbs_fresh_streams_sample_fast_while_its_reaction_is_open() -> None:
    tracker = PaceTracker(settle=30.0)
    feed = tracker.feed
    feed(late(10.0), windows_open=True, opened=True)
    (fast,) = feed(ok(10.5), windows_open=True, rising=True)
    assert (fast.stream, fast.pace) == (STREAM.name, Pace.FAST)
    assert fast.reason == "its LB has not shown that it stopped routing to the server"
    assert feed(ok(10.6), windows_open=True, rising=True) == []
    (back,) = feed(ok(12.5), windows_open=True)
    assert (back.pace, back.reason) == (Pace.WINDOW, "its LB's reaction is bounded")
    (quiet,) = feed(ok(13.0), windows_open=True, settled=True)
    assert quiet.pace is Pace.QUIET
    # A new window brings every stream back to the window rate together.
    feed(late(20.0), windows_open=True, opened=True)
    assert tracker.streams == {}


def test_a_stream_waiting_for_the_delay_rests_and_wakes_before_it_ends() -> None:
    tracker = PaceTracker(settle=30.0, wake=5.0)
    feed = tracker.feed
    feed(late(10.0), windows_open=True, opened=True)
    assert feed(late(11.0), windows_open=True, rests=(-math.inf, 80.0)) == []  # the hold
    (rest,) = feed(late(12.5), windows_open=True, rests=(-math.inf, 80.0))
    assert (rest.pace, rest.reason) == (
        Pace.QUIET, "its reaction can only end with the shutdown delay its server announced",
    )  # fmt: skip
    assert feed(late(74.0), windows_open=True, rests=(-math.inf, 80.0)) == []
    (awake,) = feed(late(75.5), windows_open=True, rests=(-math.inf, 80.0))
    assert (awake.pace, awake.reason) == (Pace.WINDOW, "its reaction is open again")
