"""Capacity per LB over a rolling restart in report.html: the lane (routed against ready, T1
over its bound, early failures), the table of restarted apiservers, and their bounds held."""

from __future__ import annotations

import re

import pytest

from prober.cli import main
from prober.core.instances import AddBack, Instance
from prober.core.models import LB, ClosedBy, Window, WindowStream
from prober.lab.judges.inbounds.page import check_html
from prober.report.documents.capacity import restarts, routed_steps
from tests.factories import OTHER, STREAM
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.test_restarts import early_run


def window(host: str, t0: float, *seen: WindowStream) -> Window:
    return Window(host, None, 20.0, t0, t0, t0 - 0.1, t0 + 0.1, ClosedBy.RECOVERED, t0 + 25, seen)


def restarted(host: str, first_t: float, t1: float | None, added_hi: float | None) -> Instance:
    back = AddBack("kube-api", LB.INTERNAL, added_hi, None, added_hi, None, None, None)
    return Instance(host, None, 2, None, first_t, t1, t1, t1, None, None, (back,), 0, True)


def reacted(reaction: float | None) -> WindowStream:
    return WindowStream(STREAM, 3, 1.0, None, reaction, 0)


@pytest.mark.parametrize(
    ("windows", "instances", "steps"),
    [
        # One restart: out at T0 + the LB's reaction, back at its add-back.
        ([window("A", 10.0, reacted(2.5))], [restarted("A", 30.0, 31.0, 35.0)],
         ((0.0, 3), (12.5, 2), (35.0, 3))),
        # No late fresh request: out at T0.
        ([window("A", 10.0, reacted(None))], [restarted("A", 30.0, 31.0, 35.0)],
         ((0.0, 3), (10.0, 2), (35.0, 3))),
        # A rolling restart overlapping: A not back before B leaves.
        ([window("A", 10.0, reacted(1.0)), window("B", 40.0, reacted(1.0))],
         [restarted("A", 30.0, 31.0, 45.0), restarted("B", 60.0, 61.0, 70.0)],
         ((0.0, 3), (11.0, 2), (41.0, 1), (45.0, 2), (70.0, 3))),
        # Never taken back by this LB, and a window with no restart after it: out to the end.
        ([window("A", 10.0, reacted(1.0)), window("B", 40.0, reacted(1.0))],
         [restarted("A", 30.0, 31.0, None)],
         ((0.0, 3), (11.0, 2), (41.0, 1))),
        # A restart with no window (a crash): nothing says when it left.
        ([], [restarted("A", 30.0, 31.0, 35.0)], ((0.0, 3),)),
    ],
)  # fmt: skip
def test_the_routed_line_steps_at_each_reaction_and_add_back(windows, instances, steps) -> None:
    assert routed_steps(3, restarts(windows, instances), LB.INTERNAL) == steps


def test_each_window_meets_the_restart_that_followed_it_once() -> None:
    early, late = restarted("A", 30.0, 31.0, 35.0), restarted("A", 90.0, 91.0, 95.0)
    pairs = restarts([window("A", 80.0), window("A", 10.0)], [late, early])
    assert [(r.window.t0, r.instance) for r in pairs] == [(10.0, early), (80.0, late)]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Instance, Window]:
    tmp = tmp_path_factory.mktemp("capacity")
    log = tmp / "events.jsonl"
    live = write_daemon_log(log, run_record([STREAM, OTHER]), early_run())
    assert main(["analyze", str(log), "--out", str(tmp / "out")]) == 1  # early: failed
    [instance], [win] = live.instances, live.windows
    return (tmp / "out" / "report.html").read_text(), instance, win


def figure(html: str, lb: str, view: str = "all") -> str:
    found = re.search(
        rf'<figure data-view="{view}"[^>]*><svg [^>]*aria-label="load balancer {lb}: [^"]*">'
        r"(.*?)</figure>",
        html,
        re.S,
    )
    assert found is not None, (lb, view)
    return found[1]


def test_a_lane_per_lb_shows_routed_against_ready(report) -> None:
    html, instance, win = report
    t1, t0 = instance.t1, win.t0
    assert t1 is not None
    reaction = max(s.reaction or 0.0 for s in win.streams if s.stream == STREAM.name)
    for lb, leaves in ((LB.INTERNAL, t0 + reaction), (LB.EXTERNAL, t0)):  # OTHER: reused only
        drawn = figure(html, lb)
        assert "capacity: routed / ready of 2" in drawn
        back = next(b for b in instance.lbs if b.lb is lb).added_hi
        assert back is not None
        ready = f"<title>apiservers ready: 2 from 0.00 s, 1 from {t0:.2f} s, 2 from {t1:.2f} s"
        assert ready in drawn
        assert (
            f"<title>apiservers {lb} sent new connections to: 2 from 0.00 s, 1 from "
            f"{leaves:.2f} s, 2 from {back:.2f} s</title>"
        ) in drawn
        # Four early failures through each LB, a point each; T1 over its bound.
        assert drawn.count('class="early"') == 4
        assert drawn.count('<g class="instance-t1">') == 1


def test_each_restarted_apiserver_has_a_row(report) -> None:
    html, instance, _ = report
    row = re.search(r'<tr id="restart-A-2">(.*?)</tr>', html)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1])
    by_lb = {b.lb: b for b in instance.lbs}
    expected = [
        "A #2",
        "-",
        f"{instance.t1:.2f} s [{instance.t1_lo:.2f}, {instance.t1_hi:.2f}]",
        "the old process still answering",
        "internal-lb&#x27;s first answer from it",
        *(
            f"{b.seconds:.2f} s [{b.seconds_lo:.2f}, {b.seconds_hi:.2f}]; worst 30.00 s: "
            "within; 4 early"
            for b in (by_lb[LB.EXTERNAL], by_lb[LB.INTERNAL])
        ),
        "8",
        "0",
    ]
    assert cells == expected


def test_the_bounds_checker_holds_t1_and_finds_nothing_outside(report) -> None:
    html, _, _ = report
    checked = check_html("report.html", html)
    assert checked.problems() == []
    # Moved far left of its band, the T1 line is found outside it.
    moved = re.sub(r'(<line class="t1" x1=")[\d.]+', r"\g<1>231.0", html, count=1)
    [outside] = check_html("report.html", moved).outside
    assert "T1 at x" in outside.record
    assert outside.estimate == 231.0
