"""A sample the daemon's stop cut (`ErrorClass.STOPPED`) says nothing of the LB: to every
tracker it is a sampling gap, never a success, a failure, a late answer or a witness.

Table-driven: each case is a run with stopped samples in it. Fed to the trackers it must give
exactly what the same run gives without them, and what the table says: a stopped sample never
opens, extends, splits or closes a disruption interval, never bounds one's edge, never
adds a failure, a late request or a bound to a shutdown window's reaction (the readiness
violation), and never counts in the connection-age table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from prober.core.burst import BurstPlanner
from prober.core.compaction import Compactor
from prober.core.connection_age import ConnectionAges
from prober.core.models import ErrorClass, Interval, Pace, Sample, Window
from prober.core.pace import PaceTracker
from prober.core.trackers import Trackers
from tests.factories import OTHER, STREAM, fail, ok, sample

END = 100.0
REFUSED, TIMEOUT = ErrorClass.CONNECT_REFUSED, ErrorClass.TIMEOUT


def cut(t: float, **kw: object) -> Sample:
    """A request sent at `t` that the stop cut: no status, no header."""
    return sample(t, error=ErrorClass.STOPPED, **kw)  # type: ignore[arg-type]


def late(t: float, **kw: object) -> Sample:
    return sample(t, host="A", late=True, elapsed=round(t - 9.0), **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Case:
    name: str
    samples: list[Sample]
    # start_t, end_t, error, samples, start_lo
    intervals: list[tuple[float, float, ErrorClass, int, float | None]]
    # per window stream that saw it late: stream, late, failures, bound_by
    windows: list[tuple[str, int, int, str | None]] = dataclasses.field(default_factory=list)


CASES = [
    Case("alone it opens nothing", [ok(1), cut(2), cut(2.5), ok(3)], []),
    Case("it opens nothing at the end of the run", [ok(1), cut(99)], []),
    Case(
        "it does not close an open interval", [fail(1), cut(2), ok(3)], [(1, 3, REFUSED, 1, None)]
    ),
    Case(
        "it does not extend an interval past its success",
        [ok(0.5), fail(1), ok(2), cut(3), cut(4)],
        [(1, 2, REFUSED, 1, 0.5)],
    ),
    Case(
        "it does not split an interval of one class",
        [ok(0.5), fail(1), cut(2), fail(3), ok(4)],
        [(1, 4, REFUSED, 2, 0.5)],
    ),
    Case(
        "it does not end one class's interval and start another",
        [fail(1, TIMEOUT), cut(2), ok(3)],
        [(1, 3, TIMEOUT, 1, None)],
    ),
    Case(
        "it is no closer of a failure answered after it",
        [ok(1.95), cut(2.05), fail(2.0, TIMEOUT, dur=5.0), ok(7.1)],
        [(2.0, 7.1, TIMEOUT, 1, 1.95)],
    ),
    Case(
        "it is no witness of an interval's start",
        [ok(1), cut(1.5), fail(2), ok(3)],
        [(2, 3, REFUSED, 1, 1.0)],
    ),
    Case(
        "an interval open at the end stays open to it",
        [fail(90), cut(95)],
        [(90, END, REFUSED, 1, None)],
    ),
    Case(
        "it is no failure witness of a fresh stream's reaction, nor a failure in the window",
        [ok(8), late(10), late(10.5), cut(11), cut(12, stream=OTHER)],
        [],
        [(STREAM.name, 2, 0, None)],
    ),
    Case(
        "a cut replacement of a kept connection is no `closed` witness",
        [
            dataclasses.replace(late(10, stream=OTHER), local_port=5000),
            dataclasses.replace(cut(11, stream=OTHER), replaced_port=5000, local_port=5001),
        ],
        [],
        [(OTHER.name, 1, 0, None)],
    ),
    Case(
        "it neither ends nor opens a window",
        [late(10), cut(11), cut(50), late(60)],
        [],
        [(STREAM.name, 2, 0, None)],
    ),
]


def run(samples: list[Sample]) -> tuple[list[Interval], list[Window], list[ConnectionAges]]:
    trackers = Trackers([STREAM, OTHER])
    events: list[object] = []
    for s in samples:
        events += trackers.feed(s)
    events += trackers.close(END, "end")
    return (
        [e for e in events if isinstance(e, Interval)],
        [e for e in events if isinstance(e, Window)],
        [e for e in events if isinstance(e, ConnectionAges)],
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_stopped_sample_is_a_sampling_gap_to_the_trackers(case: Case) -> None:
    intervals, windows, ages = run(case.samples)
    assert (intervals, windows, ages) == run([s for s in case.samples if not s.stopped])
    got = [(i.start_t, i.end_t, i.error, i.samples, i.start_lo) for i in intervals]
    assert got == [(float(a), float(b), e, n, lo) for a, b, e, n, lo in case.intervals]
    seen = [
        (ws.stream, ws.late, ws.failures, ws.bound_by)
        for w in windows
        for ws in w.streams
        if ws.late
    ]
    assert seen == case.windows
    assert all(i.error is not ErrorClass.STOPPED for i in intervals)


def test_stopped_is_its_own_class_and_no_failure() -> None:
    s = cut(1.0)
    assert s.stopped
    assert not s.failed
    assert not s.late
    assert not ErrorClass.STOPPED.is_disruption
    assert not fail(1.0).stopped
    assert not ok(1.0).stopped


def test_the_compactor_always_keeps_it_and_never_holds_it_as_a_success() -> None:
    """Kept, so the record counts it; never the newest success that a later interval's
    start is bounded by (held and written before the failure)."""
    compactor = Compactor()
    assert compactor.select(ok(1), [], frozenset()) == []
    stopped = cut(2)
    assert compactor.select(stopped, [], frozenset()) == [stopped]
    trackers = Trackers([STREAM])
    for s in (ok(1), stopped):
        trackers.feed(s)
    opened = trackers.feed(fail(3))
    written = compactor.select(fail(3), opened, frozenset())
    assert [(w.t, w.held) for w in written[:-1]] == [(1.0, True)]


def test_the_pace_passes_over_it() -> None:
    """Quiet: no alarm. At the window rate: the settle time does not pass on its end."""
    pace = PaceTracker(settle=30.0)
    assert pace.feed(cut(1), windows_open=False) == []
    assert pace.pace is Pace.QUIET
    pace.feed(fail(2), windows_open=False)
    assert pace.pace is Pace.WINDOW
    assert pace.feed(cut(40), windows_open=False) == []
    assert pace.pace is Pace.WINDOW


def test_a_burst_counts_its_cut_requests_in_and_plans_nothing_from_them() -> None:
    """A burst is over once every request it sent is in, cut or not; a cut request starts no
    burst of its own."""
    trackers = Trackers([STREAM])
    planner = BurstPlanner(trigger=1)
    for s in (late(10), sample(10.5, host="B")):
        trackers.feed(s)
        burst = planner.feed(s, trackers.shutdown)
    assert burst is not None
    planner.stopped(burst.number, 1, 10.6)
    assert planner.going(burst.number)
    assert (
        planner.feed(dataclasses.replace(cut(10.7), burst=burst.number), trackers.shutdown) is None
    )
    assert not planner.going(burst.number)  # done: its one request is in
    assert planner.feed(cut(10.8), trackers.shutdown) is None
