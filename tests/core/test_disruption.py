"""DisruptionTracker: sample sequences in, intervals out (table-driven, as origin's tests)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from prober.core.disruption import DisruptionStarted, DisruptionTracker
from prober.core.models import ErrorClass, Interval, Sample
from tests.factories import OTHER, STREAM, fail, ok

REFUSED = ErrorClass.CONNECT_REFUSED
RESET = ErrorClass.CONNECTION_RESET
END = 100.0
FAILING = [e for e in ErrorClass if e.is_disruption]
BEHIND = [ok(2.0 + 0.05 * i) for i in range(1, 100)]  # sent every 50 ms after t=2.0


@dataclass(frozen=True)
class Case:
    name: str
    samples: list[Sample]
    intervals: list[tuple[float, float, ErrorClass, int]]  # start_t, end_t, error, samples
    seconds: float


CASES = [
    Case("only successes", [ok(1), ok(2), ok(3)], [], 0.0),
    Case(
        "failures closed by a success",
        [ok(1), fail(2), fail(3), ok(4), ok(5)],
        [(2, 4, REFUSED, 2)],
        2.0,
    ),
    Case(
        "a new error class opens a new interval",
        [fail(1), fail(2, RESET), fail(3, RESET), ok(4)],
        [(1, 2, REFUSED, 1), (2, 4, RESET, 2)],
        3.0,
    ),
    Case(
        "two separate outages",
        [fail(1), ok(2), fail(5), fail(6), ok(8)],
        [(1, 2, REFUSED, 1), (5, 8, REFUSED, 2)],
        4.0,
    ),
    Case("an open interval is closed at the end", [ok(1), fail(90)], [(90, END, REFUSED, 1)], 10.0),
    Case(
        "a success sent before the failure does not close it",
        [fail(2.0), ok(1.9), ok(2.1)],
        [(2.0, 2.1, REFUSED, 1)],
        0.1,
    ),
    Case(
        "a stale failure of another class joins the open interval",
        [fail(2.0), fail(1.5, RESET), ok(3.0)],
        [(2.0, 3.0, REFUSED, 2)],
        1.0,
    ),
    Case(
        # It lasted at least until the failure at 2.0 was sent: a success sent at 1.5 (slow,
        # answered after it) cannot end it there (the interval's end_t would lie below its
        # own end_lo).
        "a success sent before the last failure counted in does not close it",
        [fail(1.0), fail(2.0), ok(1.5, dur=1.0), ok(3.0)],
        [(1.0, 3.0, REFUSED, 2)],
        2.0,
    ),
    Case(
        "a failure of another class sent before the last one counted in joins it",
        [fail(1.0), fail(2.0), fail(1.5, RESET), ok(3.0)],
        [(1.0, 3.0, REFUSED, 3)],
        2.0,
    ),
    Case(
        "a stale failure inside a closed interval adds no time",
        [fail(2.0), ok(3.0), fail(2.5), ok(3.5)],
        [(2.0, 3.0, REFUSED, 1), (3.0, 3.0, REFUSED, 1)],
        1.0,
    ),
    Case(
        "a late failure after a close ends at the first success sent after it",
        [fail(1.0), ok(2.0), ok(3.0), fail(2.5), ok(3.5)],
        [(1.0, 2.0, REFUSED, 1), (2.5, 3.0, REFUSED, 1)],
        1.5,
    ),
    Case(
        # One fresh connection black-holed during a rollout: its request times out after the
        # 99 sent every 50 ms behind it all succeeded. origin counts about one sample gap.
        "a timeout answered after the successes sent behind it ends at the first of them",
        [ok(1.95), *BEHIND, fail(2.0, ErrorClass.TIMEOUT, dur=5.0), ok(7.05)],
        [(2.0, 2.05, ErrorClass.TIMEOUT, 1)],
        0.05,
    ),
    Case(
        "successes arriving out of order: the first one sent after the failure closes it",
        [ok(1.0), ok(2.4), ok(2.2), fail(2.0, dur=1.0), ok(3.0)],
        [(2.0, 2.2, REFUSED, 1)],
        0.2,
    ),
    Case(
        "a served request without the header is not a disruption",
        [ok(1), fail(2, ErrorClass.HEADER_MISSING), fail(3, ErrorClass.HEADER_INVALID), ok(4)],
        [],
        0.0,
    ),
    Case(
        "header trouble does not close an outage",
        [fail(1), fail(2, ErrorClass.HEADER_MISSING), ok(3)],
        [(1, 2, REFUSED, 1)],
        1.0,
    ),
    Case(
        "every failing class counts",
        [fail(i + 1, e) for i, e in enumerate(FAILING)] + [ok(50)],
        [(i + 1, i + 2, e, 1) for i, e in enumerate(FAILING[:-1])]
        + [(len(FAILING), 50, FAILING[-1], 1)],
        49.0,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sequences(case: Case) -> None:
    tracker = DisruptionTracker()
    closed: list[Interval] = []
    for s in case.samples:
        closed += [e for e in tracker.feed(s) if isinstance(e, Interval)]
    closed += tracker.close(END, "end")
    got = [(i.start_t, i.end_t, i.error, i.samples) for i in closed]
    assert got == [(float(a), float(b), e, n) for a, b, e, n in case.intervals]
    assert tracker.seconds(STREAM.name) == pytest.approx(case.seconds)
    for i in closed:  # every estimate within its own bound
        assert i.start_lo is None or i.start_lo <= i.start_t
        assert i.start_hi is None or i.start_t <= i.start_hi
        assert i.end_lo is None or i.end_lo <= i.end_t
        assert i.end_hi is None or i.end_t <= i.end_hi


def test_streams_are_independent() -> None:
    tracker = DisruptionTracker()
    events = []
    for s in [fail(1), fail(1.5, stream=OTHER), ok(2), ok(4, stream=OTHER)]:
        events += tracker.feed(s)
    intervals = [e for e in events if isinstance(e, Interval)]
    assert [(i.stream, i.start_t, i.end_t) for i in intervals] == [
        (STREAM.name, 1.0, 2.0),
        (OTHER.name, 1.5, 4.0),
    ]
    assert tracker.seconds(OTHER.name) == pytest.approx(2.5)
    assert tracker.close(10, "end") == []


def test_start_and_close_events_carry_what_a_log_line_needs() -> None:
    tracker = DisruptionTracker()
    (started,) = tracker.feed(fail(1, detail="dial tcp: connection refused"))
    assert started == DisruptionStarted(
        stream_id=STREAM,
        start_t=1.0,
        start_ts=started.start_ts,
        error=REFUSED,
        detail="dial tcp: connection refused",
        start_lo=None,
        start_hi=1.01,
    )
    assert tracker.is_open(STREAM.name)
    (interval,) = tracker.feed(ok(3))
    assert isinstance(interval, Interval)
    assert interval.detail == "dial tcp: connection refused"
    assert interval.end_ts == ok(3).ts
    assert interval.seconds == 2.0
    assert not tracker.is_open(STREAM.name)


def test_a_held_sample_replayed_late_touches_no_interval() -> None:
    tracker = DisruptionTracker()
    tracker.feed(fail(1.0))
    assert tracker.feed(dataclasses.replace(ok(2.0), held=True)) == []
    assert tracker.is_open(STREAM.name)
