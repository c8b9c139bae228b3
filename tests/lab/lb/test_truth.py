"""Ground truth from the apiservers' records and HAProxy's log, and the check against it."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from prober.core.models import LB, Connection
from prober.core.truthlog import SIGNAL_TYPES, Listening, ShutdownInitiated, TruthRecord
from prober.lab.infra.lbstate import ServerEvent
from prober.lab.infra.options import TOLERANCE
from prober.lab.infra.truth import ShutdownTruth, expected_reaction, first_down, read_shutdowns
from prober.lab.judges.compare import Row, ShutdownResult, findings, problems
from tests.support import truthfiles


def record(kind: str) -> TruthRecord:
    if kind == Listening.KIND:
        return Listening(port=6443, holder="apiserver-x_1")
    if kind == ShutdownInitiated.KIND:
        return ShutdownInitiated(delay=70.0)
    return SIGNAL_TYPES[kind]()


def write_truth(path: Path, events: list[tuple[str, float]]) -> None:
    truthfiles.write_truth(path, [truthfiles.at(w, record(e)) for e, w in events])


def test_each_shutdown_in_a_file_restarts_append_to(tmp_path: Path) -> None:
    path = tmp_path / "truth.jsonl"
    write_truth(
        path,
        [
            ("listening", 0.0),
            ("ShutdownInitiated", 10.0),
            ("NotAcceptingNewRequest", 80.0),
            ("HTTPServerStoppedListening", 81.0),
            ("listening", 90.0),
            ("ShutdownInitiated", 100.0),  # killed before it finished
        ],
    )
    first, second = read_shutdowns(path)
    assert (first.t0, first.not_accepting, first.stopped) == (10.0, 80.0, 81.0)
    assert (second.t0, second.not_accepting, second.stopped) == (100.0, math.inf, math.inf)
    assert first.apiserver == "apiserver-x"


SHUTDOWN = ShutdownTruth("master-0", "apiserver-x", t0=10.0, not_accepting=80.0, stopped=81.0)


@pytest.mark.parametrize(
    ("lb_down", "reset", "new", "reused", "until"),
    [
        (15.0, True, 5.0, 5.0, 5.0),  # AWS: reset when marked down
        # GCP/Azure: kept until the server's 429 closes it, which the client's next request
        # meets anywhere in the 429 phase, up to the listener's close
        (15.0, False, 5.0, 70.0, 71.0),
        (math.inf, False, 71.0, 71.0, 71.0),  # localhost: until the server stops listening
        (100.0, False, 71.0, 71.0, 71.0),  # a slow LB: still routing after the server stopped
    ],
)
def test_expected_reaction_per_lb_kind(lb_down, reset, new, reused, until) -> None:
    reaction = expected_reaction(SHUTDOWN, lb_down, reset)
    assert (reaction.new, reaction.reused, reaction.reused_until) == (new, reused, until)


def test_first_down_after_t0_unless_already_down_then() -> None:
    events = [
        ServerEvent(5.0, "master-0", False, "before"),
        ServerEvent(7.0, "master-0", True, "back before T0"),
        ServerEvent(12.0, "master-1", False, "other server"),
        ServerEvent(13.0, "master-0", False, "this one"),
    ]
    assert first_down(events, "master-0", after=10.0) == 13.0
    assert first_down(events, "master-2", after=10.0) == math.inf
    # Out since 5.0 at T0 6.0 (a check that failed under load): routed nothing from 5.0 on.
    assert first_down(events, "master-0", after=6.0) == 5.0


def test_only_the_last_down_period_before_the_server_stopped_counts() -> None:
    flap = [
        ServerEvent(10.1, "master-0", False, "Layer4 timeout"),  # a check starved of CPU
        ServerEvent(10.4, "master-0", True, "Layer7 check passed"),  # routed to it again
        ServerEvent(13.0, "master-0", False, "Layer7 wrong status, code: 500"),
        ServerEvent(13.2, "master-0", False, "maintenance"),
        ServerEvent(20.0, "master-0", True, "restarted"),
    ]
    assert first_down(flap, "master-0", after=10.0, until=15.0) == 13.0
    assert first_down(flap, "master-0", after=10.0, until=10.2) == 10.1
    assert first_down(flap, "master-0", after=10.0, until=12.0) == math.inf  # up when stopped
    out_before = [ServerEvent(9.0, "master-0", False, "before T0"), *flap[2:]]
    assert first_down(out_before, "master-0", after=10.0, until=15.0) == 9.0


def row(
    measured: float | None,
    lo: float | None,
    hi: float | None,
    truth: float,
    *,
    failures: int = 0,
    expected: bool = False,
) -> Row:
    return Row(
        "master-0",
        LB.INTERNAL,
        "http1",
        Connection.NEW,
        measured,
        lo,
        hi,
        truth,
        3,
        failures,
        expected,
    )


def result(*rows: Row, t0_bound: tuple[float, float] = (9.9, 10.05)) -> ShutdownResult:
    window = SimpleNamespace(t0_lo=t0_bound[0], t0_hi=t0_bound[1])
    return ShutdownResult(SHUTDOWN, window, 0.0, rows)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("the_row", "found"),
    [
        (row(1.8, 1.7, 2.3, 2.0), ""),
        (row(1.2, 1.1, 2.05, 2.0), ""),  # a long gap: a point far off, the truth inside
        (row(1.2, 1.1, 1.5, 2.0), "truth 2.000 s, outside the bound [1.100, 1.500] by +0.500 s"),
        (row(2.3, 2.2, 2.6, 2.0), "truth 2.000 s, outside the bound [2.200, 2.600] by -0.200 s"),
        (row(2.05, 2.05, 2.5, 2.0), ""),  # within the tolerance of the clocks
        (row(1.8, 1.7, None, 2.0), ""),  # unbounded above: nothing showed the LB stopped
        (row(None, None, 0.5, 0.3), ""),  # the LB switched before any request could land
        (row(None, None, 0.5, 2.0), "truth 2.000 s, outside the bound [?, 0.500] by +1.500 s"),
        (row(1.9, 1.8, 2.2, 2.0, failures=2), "2 failed requests inside the window"),
        (row(1.9, 1.8, 2.2, 2.0, failures=2, expected=True), ""),
    ],
)
def test_the_truth_must_lie_inside_the_bound(the_row: Row, found: str) -> None:
    got = problems([result(the_row)], TOLERANCE, expect_failures=False)
    where = "master-0 internal-lb http1 new"
    assert [p.split(" (measured")[0] for p in got] == ([f"{where}: {found}"] if found else [])


def test_the_true_t0_must_lie_inside_its_bound() -> None:
    assert problems([result(t0_bound=(9.7, 9.85))], TOLERANCE, False) == [
        "master-0: true T0 at 10.000 s, outside the bound [9.700, 9.850]"
    ]


def test_a_missing_window_and_missing_failures_are_problems() -> None:
    missed = ShutdownResult(SHUTDOWN, None, None, ())
    assert problems([missed], TOLERANCE, False) == ["master-0: the daemon saw no shutdown window"]
    assert problems([result(row(1.9, 1.8, 2.2, 2.0))], TOLERANCE, expect_failures=True) == [
        "the scenario should make requests fail, and none did"
    ]


def test_a_bound_wider_than_the_reaction_is_a_finding_not_a_failure() -> None:
    wide = result(row(0.2, 0.1, 1.6, 0.8), row(0.5, 0.4, None, 0.8), row(None, None, None, 0.8))
    assert problems([wide], TOLERANCE, False) == []
    assert findings([wide]) == [
        "master-0 internal-lb http1 new: bound [0.100, 1.600] is 1.500 s wide, wider than the "
        "reaction itself (0.800 s)",
        "master-0 internal-lb http1 new: no upper bound (nothing after the last late request "
        "showed the LB had stopped); truth 0.800 s",
        "master-0 internal-lb http1 new: no late request and no upper bound: the stream says "
        "nothing of a 0.800 s reaction",
    ]
