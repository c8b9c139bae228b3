"""Ground truth from the apiservers' records and HAProxy's log, and the check against it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from prober.core.models import LB, Connection
from prober.lab.compare import Row, ShutdownResult, Tolerance, problems
from prober.lab.haproxy import ServerEvent
from prober.lab.truth import ShutdownTruth, expected_reaction, first_down, read_shutdowns


def write_truth(path: Path, events: list[tuple[str, float]]) -> None:
    lines = [
        json.dumps({"event": e, "host": "master-0", "apiserver": "apiserver-x", "wall": w})
        for e, w in events
    ]
    path.write_text("\n".join(lines) + "\n")


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
    ("lb_down", "reset", "new", "reused"),
    [
        (15.0, True, 5.0, 5.0),  # AWS: reset when marked down
        (15.0, False, 5.0, 70.0),  # GCP/Azure: kept until the server's 429 closes it
        (math.inf, False, 71.0, 71.0),  # localhost: until the server stops listening
        (100.0, False, 71.0, 71.0),  # a slow LB: still routing after the server stopped
    ],
)
def test_expected_reaction_per_lb_kind(lb_down, reset, new, reused) -> None:
    reaction = expected_reaction(SHUTDOWN, lb_down, reset)
    assert (reaction.new, reaction.reused) == (new, reused)


def test_first_down_after_t0_only() -> None:
    events = [
        ServerEvent(5.0, "master-0", False, "before"),
        ServerEvent(12.0, "master-1", False, "other server"),
        ServerEvent(13.0, "master-0", False, "this one"),
    ]
    assert first_down(events, "master-0", after=10.0) == 13.0
    assert first_down(events, "master-2", after=10.0) == math.inf


def row(measured: float | None, truth: float, failures: int = 0, expected: bool = False) -> Row:
    return Row(
        "master-0", LB.INTERNAL, "http1", Connection.NEW, measured, truth, 3, failures, expected
    )


def result(*rows: Row) -> ShutdownResult:
    return ShutdownResult(SHUTDOWN, object(), 0.0, rows)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("the_row", "found"),
    [
        (row(1.8, 2.0), ""),
        (
            row(1.2, 2.0),
            "measured 1.200 s, truth 2.000 s, error -0.800 s beyond 0.5 s",
        ),  # a gap too long
        (row(2.05, 2.0), ""),
        (
            row(2.3, 2.0),
            "measured 2.300 s, truth 2.000 s, error +0.300 s beyond 0.1 s",
        ),  # later than possible
        (row(None, 0.3), ""),  # the LB switched before any request could land
        (row(None, 2.0), "no late request, but the LB routed 2.00 s"),
        (row(1.9, 2.0, failures=2), "2 failed requests inside the window"),
        (row(1.9, 2.0, failures=2, expected=True), ""),
    ],
)
def test_check_is_asymmetric(the_row: Row, found: str) -> None:
    got = problems([result(the_row)], Tolerance(), expect_failures=False)
    assert got == ([f"master-0 internal-lb http1 new: {found}"] if found else [])


def test_a_missing_window_and_missing_failures_are_problems() -> None:
    missed = ShutdownResult(SHUTDOWN, None, None, ())
    assert problems([missed], Tolerance(), False) == ["master-0: the daemon saw no shutdown window"]
    assert problems([result(row(1.9, 2.0))], Tolerance(), expect_failures=True) == [
        "the scenario should make requests fail, and none did"
    ]
