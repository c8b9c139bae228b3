"""BurstPlanner and what it asks the shutdown tracker: sample sequences in, bursts out."""

from __future__ import annotations

import dataclasses
import math

import pytest

from prober.core.burst import Burst, BurstPlanner
from prober.core.models import LB, Connection, ErrorClass, Protocol, Sample
from prober.core.reaction import misses_needed
from prober.core.shutdown import ShutdownTracker
from prober.core.windows import Wanted
from tests.factories import STREAM, sample

SIBLING = dataclasses.replace(STREAM, protocol=Protocol.HTTP1)
REUSED = dataclasses.replace(STREAM, connection=Connection.REUSED)
LOCAL = dataclasses.replace(STREAM, lb=LB.LOCALHOST)
M3 = misses_needed(3)


def late(t: float, **kw) -> Sample:
    return sample(t, host="A", late=True, elapsed=round(t - 10.0), **kw)


def miss(t: float, host: str = "B", **kw) -> Sample:
    return sample(t, host=host, **kw)


class Feeder:
    """A tracker and a planner fed together, as the pipeline feeds them."""

    def __init__(self, **planner: float) -> None:
        self.tracker = ShutdownTracker()
        for stream in (STREAM, SIBLING, REUSED, LOCAL):
            self.tracker.add_stream(stream)
        self.planner = BurstPlanner(**planner)  # type: ignore[arg-type]

    def feed(self, *samples: Sample) -> list[Burst]:
        out = []
        for s in samples:
            self.tracker.feed(s)
            burst = self.planner.feed(s, self.tracker)
            if burst is not None:
                out.append(burst)
        return out


def test_no_burst_without_an_open_reaction() -> None:
    feeder = Feeder()
    assert feeder.feed(miss(1.0), miss(1.1, "C"), miss(1.2)) == []
    assert feeder.tracker.wanted(STREAM.target, STREAM.lb) is None


def test_three_misses_after_the_last_late_one_ask_for_the_rest() -> None:
    feeder = Feeder()
    assert feeder.feed(late(10.0), miss(10.1), miss(10.2, "C")) == []
    wanted = feeder.tracker.wanted(STREAM.target, STREAM.lb)
    assert wanted == Wanted("A", 10.0, 2, 2 * M3 - 2, M3 - 2)
    (burst,) = feeder.feed(miss(10.35, "C", stream=SIBLING))  # the LB's: any fresh stream
    assert burst == Burst(1, STREAM.target, STREAM.lb, "A", 2 * M3 - 3, M3 - 3)
    assert feeder.planner.going(1)


def test_misses_before_a_later_late_one_do_not_count() -> None:
    feeder = Feeder()
    assert feeder.feed(late(10.0), miss(10.1), miss(10.2)) == []
    assert feeder.feed(late(10.35, stream=SIBLING), miss(10.4), miss(10.5)) == []
    assert feeder.tracker.wanted(STREAM.target, STREAM.lb).have == 2  # type: ignore[union-attr]


def test_one_burst_per_lb_at_a_time_until_its_samples_are_fed() -> None:
    feeder = Feeder()
    (burst,) = feeder.feed(late(10.0), *(miss(10.1 + i / 10) for i in range(4)))
    assert feeder.feed(miss(10.6), miss(10.7)) == []  # in flight
    feeder.planner.stopped(burst.number, 2, now=10.8)
    assert feeder.feed(dataclasses.replace(miss(10.8), burst=burst.number)) == []
    assert feeder.planner.going(burst.number)
    # The last of its samples is fed: the LB may be asked again at once (it met no server).
    (again,) = feeder.feed(dataclasses.replace(miss(10.81, "C"), burst=burst.number))
    assert again.number == 2


def test_a_burst_that_meets_the_server_stops_and_spaces_the_next_out() -> None:
    feeder = Feeder(spacing=0.1, max_spacing=0.3)
    (first,) = feeder.feed(late(10.0), *(miss(10.1 + i / 10) for i in range(4)))
    met = dataclasses.replace(late(10.55, dur=0.01), burst=first.number)
    assert feeder.feed(met) == []
    assert not feeder.planner.going(first.number)
    feeder.planner.stopped(first.number, 1, now=10.56)
    # Four misses after the burst's late answer, but within 0.1 s of its end: not yet.
    assert feeder.feed(*(miss(10.57 + i / 100) for i in range(4))) == []
    (second,) = feeder.feed(miss(10.67))
    feeder.feed(dataclasses.replace(late(10.7), burst=second.number))
    feeder.planner.stopped(second.number, 1, now=10.71)
    # Doubled: 0.2 s after the second one's end.
    assert feeder.feed(*(miss(10.72 + i / 100) for i in range(10))) == []
    assert len(feeder.feed(miss(10.92))) == 1


def test_an_lb_that_only_showed_the_server_is_never_asked() -> None:
    feeder = Feeder()
    local = [late(10.0 + i / 10, stream=LOCAL) for i in range(30)]
    assert feeder.feed(*local) == []


def test_only_fresh_streams_of_a_balancing_lb_rise() -> None:
    feeder = Feeder()
    feeder.feed(late(10.0), late(10.1, stream=LOCAL), late(10.1, stream=REUSED), miss(10.2))
    assert feeder.tracker.rising(STREAM)
    assert feeder.tracker.rising(SIBLING)
    assert not feeder.tracker.rising(REUSED)
    assert not feeder.tracker.rising(LOCAL)
    # Bounded and confirmed (2m misses after the last late one): no longer.
    feeder.feed(*(miss(10.3 + i / 100, "BC"[i % 2]) for i in range(2 * M3)))
    assert not feeder.tracker.rising(STREAM)


def test_a_stream_that_waits_for_the_delay_rests_until_it_ends() -> None:
    feeder = Feeder()
    feeder.feed(late(10.0, stream=LOCAL), late(10.5, stream=LOCAL))
    lo = 10.0 - 0.5  # t0's lower bound from elapsed 0 at t=10
    rests = feeder.tracker.rests(LOCAL.name)
    assert rests is not None
    assert rests == (-math.inf, pytest.approx(lo + 70.0, abs=0.6))
    # A fresh stream of a balancing LB waits for its LB, not for the delay.
    feeder.feed(late(10.6), miss(10.7))
    assert feeder.tracker.rests(STREAM.name) is None


def test_a_kept_connection_the_lb_did_not_break_rests_until_the_delay_ends() -> None:
    feeder = Feeder()
    kept = dataclasses.replace(late(10.1, stream=REUSED), reused=True, local_port=5000)
    feeder.feed(late(10.0), miss(10.05), kept)
    assert feeder.tracker.rests(REUSED.name) is None  # the LB may still route to A
    confirming = [miss(10.2 + i / 100, "BC"[i % 2]) for i in range(2 * M3)]
    feeder.feed(*confirming)
    rests = feeder.tracker.rests(REUSED.name)
    assert rests is not None
    # From 2 s after the LB's fresh connections confirmed it dropped A (the 2m-th miss after
    # its last late one, counting the one at 10.05), to the delay's end.
    assert rests[0] == pytest.approx(confirming[2 * M3 - 2].end + 2.0)
    assert rests[1] == pytest.approx(10.0 - 0.5 + 70.0, abs=0.6)
    # Its kept connection broke: it has something to show, and samples at the window rate.
    broken = dataclasses.replace(kept, t=13.0, error=ErrorClass.CONNECTION_RESET, shutdown=None)
    feeder.feed(broken)
    assert feeder.tracker.rests(REUSED.name) is None
