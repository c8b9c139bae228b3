"""ShutdownTracker: sample sequences in, shutdown windows out (table-driven)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from prober.core.models import ClosedBy, ErrorClass, Sample, Window
from prober.core.shutdown import ShutdownTracker, WindowOpened
from tests.factories import OTHER, STREAM, fail, ok, sample

END = 105.0  # before the default timeout of a window first seen at 10 s
S, OT = STREAM.name, OTHER.name


def late(t: float, elapsed: float, host: str = "A", **kw) -> Sample:
    return sample(t, host=host, late=True, elapsed=elapsed, **kw)


def ready(t: float, host: str = "A", **kw) -> Sample:
    return sample(t, host=host, late=False, **kw)


@dataclass(frozen=True)
class Expect:
    host: str
    closed_by: ClosedBy
    t0_lo: float
    t0_hi: float
    end_t: float
    # stream -> (late, max_elapsed, reaction, failures); streams not named saw nothing.
    streams: dict[str, tuple[int, float | None, float | None, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str
    samples: list[Sample]
    windows: list[Expect]
    stragglers: int = 0


def reaction(last_late_t: float, lo: float, hi: float) -> float:
    return last_late_t - (lo + hi) / 2


CASES = [
    Case("no header, no window", [ok(1), ok(2), fail(3)], []),
    Case("only ready answers, no window", [ready(1), ready(2, host="B")], []),
    Case(
        "one shutdown, recovered when the host answers shutdown=false again",
        [
            ready(9.9),
            late(10.2, 0),
            late(10.8, 1),
            late(12.0, 2),
            ok(13.0),
            ready(80.0),
        ],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.9,
                10.21,
                80.0,
                {S: (3, 2.0, reaction(12.0, 9.9, 10.21), 0)},
            )
        ],
    ),
    Case(
        "rounding steps between neighbouring samples narrow T0",
        [late(10.40, 0, dur=0.001), late(10.62, 1, dur=0.001)],
        # 10.40 - 0.5 <= T0 <= 10.401 and 10.62 - 1.5 <= T0 <= 10.621 - 0.5
        [
            Expect(
                "A", ClosedBy.END, 9.9, 10.121, END, {S: (2, 1.0, reaction(10.62, 9.9, 10.121), 0)}
            )
        ],
    ),
    Case(
        "interleaved hosts",
        [
            late(10.0, 0, host="A"),
            late(11.0, 0, host="B", stream=OTHER),
            late(12.0, 2, host="A"),
            late(13.0, 2, host="B", stream=OTHER),
            ready(50.0, host="A", stream=OTHER),
            ready(60.0, host="B"),
        ],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.5,
                10.01,
                50.0,
                {S: (2, 2.0, reaction(12, 9.5, 10.01), 0)},
            ),
            Expect(
                "B",
                ClosedBy.RECOVERED,
                10.5,
                11.01,
                60.0,
                {OT: (2, 2.0, reaction(13, 10.5, 11.01), 0)},
            ),
        ],
    ),
    Case(
        "a host that shuts down twice",
        [late(10.0, 0), ready(30.0), ready(59.8), late(60.0, 0)],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.5,
                10.01,
                30.0,
                {S: (1, 0.0, reaction(10, 9.5, 10.01), 0)},
            ),
            Expect(
                "A", ClosedBy.END, 59.8, 60.01, END, {S: (1, 0.0, reaction(60, 59.8, 60.01), 0)}
            ),
        ],
    ),
    Case(
        "closed by timeout delay + 30 s after first seen; its stragglers open nothing",
        [late(10.0, 0, delay=10), ok(60.0), late(61.0, 51, delay=10)],
        [
            Expect(
                "A", ClosedBy.TIMEOUT, 9.5, 10.01, 50.0, {S: (1, 0.0, reaction(10, 9.5, 10.01), 0)}
            )
        ],
        stragglers=1,
    ),
    Case(
        "failures inside the window count, before and after do not",
        [
            fail(5.0, stream=OTHER),
            late(10.0, 0),
            fail(10.5, stream=OTHER),
            fail(11.0, ErrorClass.GOAWAY, stream=OTHER),
            fail(11.5, ErrorClass.HEADER_MISSING, stream=OTHER),
            ready(80.0),
            fail(90.0, stream=OTHER),
        ],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.5,
                10.01,
                80.0,
                {S: (1, 0.0, reaction(10, 9.5, 10.01), 0), OT: (0, None, None, 2)},
            )
        ],
    ),
    Case(
        "a failure just before the first late answer still counts",
        [ready(9.0), fail(9.8, stream=OTHER), late(10.0, 0)],
        [
            Expect(
                "A",
                ClosedBy.END,
                9.5,
                10.01,
                END,
                {S: (1, 0.0, reaction(10, 9.5, 10.01), 0), OT: (0, None, None, 1)},
            )
        ],
    ),
    Case(
        "a slow shutdown=false sent before t0_hi narrows t0_lo and keeps the window open",
        [late(10.0, 0), ready(9.95, dur=0.2)],
        [Expect("A", ClosedBy.END, 9.95, 10.01, END, {S: (1, 0.0, reaction(10, 9.95, 10.01), 0)})],
    ),
    Case(
        "a shutdown=false newer than the window's start cannot be pre-shutdown: a restart",
        [late(10.0, 0), ready(10.02)],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.5,
                10.01,
                10.02,
                {S: (1, 0.0, reaction(10, 9.5, 10.01), 0)},
            )
        ],
    ),
    Case(
        "a shutdown=false that contradicts the late answers is dropped",
        [ready(10.5), late(10.0, 0, dur=0.2)],
        [Expect("A", ClosedBy.END, 9.5, 10.2, END, {S: (1, 0.0, reaction(10, 9.5, 10.2), 0)})],
    ),
    Case(
        "a stream that never reached the host has no reaction, not zero",
        [ok(9.0, stream=OTHER), late(10.0, 0), ok(10.5, stream=OTHER), ready(40.0)],
        [
            Expect(
                "A",
                ClosedBy.RECOVERED,
                9.5,
                10.01,
                40.0,
                {S: (1, 0.0, reaction(10, 9.5, 10.01), 0), OT: (0, None, None, 0)},
            )
        ],
    ),
    Case(
        "late answers in completion order, not send order",
        [late(10.6, 1, dur=0.01), late(10.3, 0, dur=0.5)],
        # [9.1, 10.11] and [9.8, 10.8]
        [Expect("A", ClosedBy.END, 9.8, 10.11, END, {S: (2, 1.0, reaction(10.6, 9.8, 10.11), 0)})],
    ),
]


def run(
    samples: list[Sample], tracker: ShutdownTracker | None = None
) -> tuple[list[Window], ShutdownTracker]:
    tracker = tracker or ShutdownTracker()
    windows: list[Window] = []
    for s in samples:
        windows += [e for e in tracker.feed(s) if isinstance(e, Window)]
    windows += tracker.close(END)
    return windows, tracker


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_sequences(case: Case) -> None:
    windows, tracker = run(case.samples)
    assert len(windows) == len(case.windows)
    for got, want in zip(windows, case.windows, strict=True):
        assert (got.host, got.closed_by, got.end_t) == (want.host, want.closed_by, want.end_t)
        assert got.t0_lo == pytest.approx(want.t0_lo)
        assert got.t0_hi == pytest.approx(want.t0_hi)
        assert got.t0 == pytest.approx((want.t0_lo + want.t0_hi) / 2)
        seen = {ws.stream: ws for ws in got.streams}
        for name, ws in seen.items():
            late_n, max_elapsed, react, failures = want.streams.get(name, (0, None, None, 0))
            assert (ws.late, ws.max_elapsed, ws.failures) == (late_n, max_elapsed, failures), name
            if react is None:
                assert ws.reaction is None
                assert ws.last_late_t is None
            else:
                assert ws.reaction == pytest.approx(react)
    assert tracker.stragglers == case.stragglers
    assert tracker.open_hosts == frozenset()


def test_window_lists_every_stream_seen_in_the_run() -> None:
    (window,), _ = run([ok(1.0, stream=OTHER), late(10.0, 0)])
    assert [(ws.stream, ws.lb, ws.protocol, ws.connection) for ws in window.streams] == [
        (OT, OTHER.lb, OTHER.protocol, OTHER.connection),
        (S, STREAM.lb, STREAM.protocol, STREAM.connection),
    ]


def test_opened_event_and_node_names() -> None:
    nodes = {"A": "master-0"}
    tracker = ShutdownTracker(node_of=nodes.get)
    assert tracker.feed(late(10.0, 0, delay=129)) == [
        WindowOpened("A", "master-0", 129.0, 10.0, S, 0.0)
    ]
    assert tracker.open_hosts == {"A"}
    nodes["A"] = "master-0.example"  # the decoder learnt better meanwhile
    (window,) = tracker.close(20.0)
    assert (window.node, window.delay, window.first_seen_t) == ("master-0.example", 129.0, 10.0)


def test_old_failures_are_forgotten_but_not_those_an_open_window_needs() -> None:
    tracker = ShutdownTracker(failure_lookback=5.0)
    tracker.feed(fail(1.0, stream=OTHER))
    tracker.feed(late(10.0, 9))  # T0 in [0.5, 1.51]: the failure at 1.0 is inside
    for t in range(11, 40):
        tracker.feed(fail(float(t), stream=OTHER))
    (window,) = tracker.close(40.0)
    other = next(ws for ws in window.streams if ws.stream == OT)
    assert other.failures == 30


def test_a_server_naming_a_new_host_each_time_opens_at_most_max_open_windows() -> None:
    """The header's host is the server's to choose: 2,000 open windows in 4,000 samples."""
    tracker = ShutdownTracker(max_open=2)
    opened = []
    for n in range(10):
        opened += [e for e in tracker.feed(sample(1.0 + n, host=f"h{n}", late=True))
                   if isinstance(e, WindowOpened)]  # fmt: skip
    assert [e.host for e in opened] == ["h0", "h1"]
    assert tracker.refused == 8
    assert tracker.open_hosts == frozenset({"h0", "h1"})


def test_what_a_tracker_keeps_per_host_is_bounded() -> None:
    tracker = ShutdownTracker(max_open=2)
    for n in range(1000):  # ready answers naming a new host each: T0 lower bounds per host
        tracker.feed(sample(float(n), host=f"ready-{n}"))
    assert len(tracker._false_since) <= 8
