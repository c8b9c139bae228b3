"""Where the true reaction and the true edges of an outage lie: sample sequences in, bounds out
(table-driven), and a property over balanced LBs: the truth lies inside the bound."""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

import pytest

from prober.core.disruption import DisruptionTracker
from prober.core.models import (
    Connection,
    ErrorClass,
    Interval,
    Protocol,
    Sample,
    StreamId,
    Window,
)
from prober.core.reaction import MISS_CHANCE, misses_needed
from prober.core.shutdown import ShutdownTracker
from tests.factories import OTHER, STREAM, fail, ok, sample

END = 100.0
DUR = 0.01


def late(t: float, elapsed: float | None = None, **kw) -> Sample:
    """A late answer from A, whose shutdown began at 10.0 unless `elapsed` says otherwise."""
    if elapsed is None:
        elapsed = float(math.floor(t - 10.0 + 0.5))
    return sample(t, host="A", late=True, elapsed=elapsed, **kw)


def answered(t: float, host: str, **kw) -> Sample:
    return sample(t, host=host, **kw)


SIBLING = dataclasses.replace(STREAM, protocol=Protocol.HTTP1)  # same target and LB


def replace_stream(s: Sample, stream: StreamId) -> Sample:
    return dataclasses.replace(s, stream_id=stream)


REUSED = dataclasses.replace(STREAM, connection=Connection.REUSED)


def reuse(s: Sample) -> Sample:
    """The same request on the reused stream of the same LB and protocol, over a fresh
    connection (a replacement)."""
    return dataclasses.replace(s, stream_id=REUSED)


def kept(s: Sample, port: int) -> Sample:
    """The same request, sent over a kept connection from this local port."""
    return dataclasses.replace(s, reused=True, local_port=port)


def misses(start: float, count: int, hosts: tuple[str, ...] = ("B", "C")) -> list[Sample]:
    return [answered(start + i * 0.1, hosts[i % len(hosts)]) for i in range(count)]


@dataclass(frozen=True)
class Case:
    name: str
    samples: list[Sample]
    last_late: float | None  # reaction_lo = last_late - t0_hi
    hi_end: float | None  # the end of the witness; reaction_hi = hi_end - t0_lo
    bound_by: str | None
    stream: StreamId = STREAM


K3 = misses_needed(3)

CASES = [
    Case(
        "a failure after the last late request bounds it at its end",
        [late(10.0), late(10.5), fail(10.6, ErrorClass.CONNECTION_RESET, dur=0.3)],
        10.5,
        10.9,
        "failure",
    ),
    Case(
        "the restarted server answering bounds it",
        [late(10.0), late(10.5), answered(20.0, "A", dur=0.02)],
        10.5,
        20.02,
        "restarted",
    ),
    Case(
        "through an LB balancing over three servers, the m-th answer from elsewhere bounds it",
        [late(10.0), late(10.5), *misses(10.6, K3 + 5)],
        10.5,
        10.6 + (K3 - 1) * 0.1 + DUR,
        "sampling",
    ),
    Case(
        "one miss short of m: no bound yet",
        [late(10.0), late(10.5), *misses(10.6, K3 - 1)],
        10.5,
        None,
        None,
    ),
    Case(
        "with only one other server, fewer misses are needed",
        [late(10.0), *misses(10.1, misses_needed(2), hosts=("B",))],
        10.0,
        10.1 + (misses_needed(2) - 1) * 0.1 + DUR,
        "sampling",
    ),
    Case(
        "a failure before the m-th miss wins",
        [late(10.0), *misses(10.1, 3), fail(10.45), *misses(10.5, K3)],
        10.0,
        10.45 + DUR,
        "failure",
    ),
    Case(
        "a later late request moves the reference and forgets the misses before it",
        [late(10.0), *misses(10.1, K3 - 2), late(12.0), fail(12.1)],
        12.0,
        12.1 + DUR,
        "failure",
    ),
    Case(
        "a slow late request: the witness after it, but never before its end (the LB chose "
        "the server for it at some instant up to then)",
        [late(10.0), fail(10.2, dur=0.05), late(10.1, dur=0.5), fail(10.3)],
        10.1,
        10.6,
        "failure",
    ),
    Case(
        "the LB's rotation is shared: fresh connections of its other streams count as misses",
        [late(10.0), *(replace_stream(a, SIBLING) for a in misses(10.1, K3))],
        10.0,
        10.1 + (K3 - 1) * 0.1 + DUR,
        "sampling",
    ),
    Case(
        "a stream without late requests has no lower bound, and an upper one from what it saw",
        [late(10.0, stream=dataclasses.replace(STREAM, target="other")), fail(10.2)],
        None,
        10.2 + DUR,
        "failure",
    ),
    Case(
        "answers over kept connections are pinned: no witnesses, whatever their number",
        [late(10.0), *(kept(a, 5000) for a in misses(10.1, 3 * K3))],
        10.0,
        None,
        None,
    ),
    Case(
        "a kept connection that fails is a witness if the last late request went over it",
        [kept(late(10.0), 5000), kept(fail(10.2), 6000), kept(fail(10.4, dur=0.1), 5000)],
        10.0,
        10.5,
        "failure",
    ),
    Case(
        "a reused stream whose kept connections were all elsewhere has no reaction to bound",
        [late(10.0, stream=SIBLING), *(reuse(a) for a in misses(10.1, 2 * K3)), reuse(fail(13))],
        None,
        None,
        None,
        stream=REUSED,
    ),
    Case(
        "a fresh stream's reaction is its LB's: a sibling's later late request raises its "
        "lower bound, and the misses count from it",
        [late(10.0), replace_stream(late(10.3), SIBLING), *misses(10.4, K3)],
        10.3,
        10.4 + (K3 - 1) * 0.1 + DUR,
        "sampling",
    ),
    Case(
        "misses before the LB's last late request, whichever stream sent it, bound nothing",
        [late(10.0), *misses(10.1, 3), replace_stream(late(10.45), SIBLING), *misses(10.5, K3 - 1)],
        10.45,
        None,
        None,
    ),
    Case(
        "a kept connection is bounded when its replacement is opened, by the replacement's "
        "send time",
        [
            kept(late(10.0, stream=REUSED), 5000),
            dataclasses.replace(
                answered(10.3, "B", stream=REUSED),
                reused=False,
                local_port=5001,
                replaced_port=5000,
            ),
        ],
        10.0,
        10.3,
        "closed",
        stream=REUSED,
    ),
    Case(
        "the replacement of another kept connection of the stream is no witness",
        [
            kept(late(10.0, stream=REUSED), 5000),
            dataclasses.replace(
                answered(10.3, "B", stream=REUSED),
                reused=False,
                local_port=6001,
                replaced_port=6000,
            ),
        ],
        10.0,
        None,
        None,
        stream=REUSED,
    ),
    Case(
        "fresh connections sent elsewhere say nothing of a kept connection (an LB that keeps "
        "flows keeps it on the server after dropping the server from its rotation)",
        [kept(late(10.0, stream=REUSED), 5000), *misses(10.1, 2 * K3)],
        10.0,
        None,
        None,
        stream=REUSED,
    ),
    Case(
        "a 2xx without the header proves nothing",
        [late(10.0), ok(10.1), ok(10.2)],
        10.0,
        None,
        None,
    ),
    Case(
        "a request that timed out may have reached the server: no witness",
        [late(10.0), fail(10.2, ErrorClass.TIMEOUT, dur=1.0), fail(11.5)],
        10.0,
        11.5 + DUR,
        "failure",
    ),
    Case(
        "a request sent before T0 that fails inside the window is no witness: the LB chose "
        "its server before the shutdown began (seen on a loaded machine)",
        [
            late(10.0, stream=dataclasses.replace(STREAM, target="other")),
            fail(8.0, ErrorClass.CONNECTION_RESET, dur=2.8),
            fail(11.0),
        ],
        None,
        11.0 + DUR,
        "failure",
    ),
    Case(
        "fresh connections sent elsewhere before T0 and answered inside the window are no "
        "misses of its rotation",
        [
            late(10.2, elapsed=0.0, stream=dataclasses.replace(STREAM, target="other")),
            *misses(6.0, K3),
            *misses(10.3, 1),
        ],
        None,
        None,
        None,
    ),
    Case(
        "held samples (written late to the log) are no witnesses",
        [late(10.0), dataclasses.replace(fail(10.5), held=True)],
        10.0,
        None,
        None,
    ),
]


def stream_result(samples: list[Sample], stream: StreamId = STREAM):
    tracker = ShutdownTracker()
    windows = []
    for s in samples:
        windows += [e for e in tracker.feed(s) if isinstance(e, Window)]
    (window,) = windows + tracker.close(END)
    (ws,) = [ws for ws in window.streams if ws.stream == stream.name]
    return window, ws


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_reaction_bounds(case: Case) -> None:
    window, ws = stream_result(case.samples, case.stream)
    if case.last_late is None:
        assert ws.reaction_lo is None
    else:
        assert ws.reaction_lo == pytest.approx(case.last_late - window.t0_hi)
    if case.hi_end is None:
        assert ws.reaction_hi is None
    else:
        assert ws.reaction_hi == pytest.approx(case.hi_end - window.t0_lo)
    assert ws.bound_by == case.bound_by
    if ws.reaction is not None and ws.reaction_hi is not None:
        assert ws.reaction_lo <= ws.reaction <= ws.reaction_hi


def test_misses_needed_meets_the_chance() -> None:
    assert misses_needed(1) == 1
    for servers in range(2, 8):
        m = misses_needed(servers)
        assert (1 - 1 / servers) ** m <= MISS_CHANCE < (1 - 1 / servers) ** (m - 1)


def test_a_balanced_lb_reaction_lies_inside_its_bound() -> None:
    """Thousands of shutdowns behind an LB that picks one of three servers at random per
    request and drops the shutting-down one at a random instant: the truth falls outside
    [lo, hi] no more often than MISS_CHANCE allows, and never below lo."""
    rng = random.Random(12)
    outside = 0
    trials = 500
    for _ in range(trials):
        t0 = 10.0 + rng.random()
        switch = t0 + rng.uniform(0.0, 3.0)  # the LB's last instant routing to A
        samples = [late(t0 + 0.001, 0, stream=OTHER)]  # another stream opens the window
        t = rng.random() * 0.05
        while t < switch + 10:
            dur = rng.uniform(0.002, 0.03)
            routed = t + rng.uniform(0, dur)
            host = rng.choice("ABC") if routed <= switch else rng.choice("BC")
            served = routed + rng.uniform(0, t + dur - routed)
            if host == "A" and served >= t0:
                samples.append(late(t, round(served - t0), dur=dur))
            else:
                samples.append(answered(t, host, dur=dur))
            t += rng.uniform(0.025, 0.075)
        samples.sort(key=lambda s: s.end)
        _, ws = stream_result(samples)
        truth = switch - t0
        if ws.reaction_lo is not None:
            assert ws.reaction_lo <= truth + 1e-9
        if ws.reaction_hi is None or truth > ws.reaction_hi:
            outside += 1
    assert outside <= max(1, 3 * MISS_CHANCE * trials)


@dataclass(frozen=True)
class Edges:
    name: str
    samples: list[Sample]
    # start_lo, start_hi, end_lo, end_hi of each interval
    edges: list[tuple[float | None, float, float, float]]


EDGES = [
    Edges(
        "failures between two successes",
        [ok(1), fail(2, dur=0.3), fail(3), ok(4, dur=0.2)],
        [(1, 2.3, 3, 4.2)],
    ),
    Edges("no success before the first failure", [fail(2), ok(4)], [(None, 2 + DUR, 2, 4 + DUR)]),
    Edges(
        "a success sent after a slow failure but answered first closes it, no start witness",
        [ok(1), ok(3, dur=0.1), fail(2, ErrorClass.TIMEOUT, dur=5), ok(7.5)],
        [(None, 7, 2, 3.1)],
    ),
    Edges(
        "a change of error class: the new one began after the old one's last failure",
        [ok(1), fail(2), fail(3, ErrorClass.CONNECTION_RESET), ok(5)],
        [(1, 2 + DUR, 2, 3 + DUR), (2, 3 + DUR, 3, 5 + DUR)],
    ),
    Edges("open at the end of the run", [ok(1), fail(2)], [(1, 2 + DUR, 2, END)]),
]


@pytest.mark.parametrize("case", EDGES, ids=lambda c: c.name)
def test_interval_edges(case: Edges) -> None:
    tracker = DisruptionTracker()
    closed: list[Interval] = []
    for s in case.samples:
        closed += [e for e in tracker.feed(s) if isinstance(e, Interval)]
    closed += tracker.close(END, "end")
    got = [(i.start_lo, i.start_hi, i.end_lo, i.end_hi) for i in closed]
    assert got == [pytest.approx(edges) for edges in case.edges]
    for interval in closed:
        assert interval.start_hi >= interval.start_t
        assert interval.start_lo is None or interval.start_lo <= interval.start_t
        assert interval.end_lo is not None
        assert interval.end_hi is not None
        assert interval.end_hi >= interval.end_t
