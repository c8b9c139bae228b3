"""The HTML pages: self-contained, readable, and rendered by a real headless Chromium.

Each Chromium test saves a full-page screenshot under pytest's tmp dir (the path is printed;
run with -s to see it) and a copy in tests/report/artifacts/ (ignored by git)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import (
    LB,
    ClosedBy,
    Connection,
    ErrorClass,
    Interval,
    Protocol,
    StreamId,
    Window,
    WindowStream,
)
from prober.report.documents.timeline import LEFT, RIGHT, WIDTH, StreamMarks, View, lb_timeline
from prober.report.format.anchors import interval_anchor
from prober.report.format.svg import Scale
from tests.report.browser import open_page
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.history import history_thresholds
from tests.report.rollout import NODES, rollout, streams

ARTIFACTS = Path(__file__).parent / "artifacts"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rollout analyzed against an AWS history: passes, failures and skips in one page;
    and a two-platform dashboard."""
    base = tmp_path_factory.mktemp("html")
    log = base / "events.jsonl"
    write_daemon_log(log, run_record(streams()), rollout().samples(), nodes=NODES)
    thresholds = history_thresholds(base / "aws")
    out = base / "out"
    assert main(["analyze", str(log), "--thresholds", str(thresholds), "--out", str(out)]) == 1
    history = [*sorted((base / "aws" / "history").glob("*.json")), out / "summary.json"]
    history_thresholds(base / "gcp", "gcp")
    history += sorted((base / "gcp" / "history").glob("*.json"))
    assert main(["thresholds", *map(str, history), "--out", str(out), "--min-runs", "50"]) == 0
    return out


def _save(shot: Path, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / name)
    print(f"\nscreenshot: {shot} (copy: {ARTIFACTS / name})")


@pytest.mark.parametrize("page", ["report.html", "thresholds.html"])
def test_pages_are_self_contained(outputs: Path, page: str) -> None:
    html = (outputs / page).read_text()
    assert "Content-Security-Policy" in html
    assert "default-src 'none'" in html
    urls = set(re.findall(r"https?://[^\s\"'<>]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}  # an XML namespace, never fetched
    # no source from elsewhere; links only to places on the page itself
    assert not re.search(r"\bsrc=", html)
    assert set(re.findall(r"\bhref=\"(.)", html)) <= {"#"}
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    assert set(re.findall(r'\bhref="#([^"]+)"', html)) <= ids  # every link has its place


def test_the_report_is_labelled_for_a_newcomer(outputs: Path) -> None:
    html = (outputs / "report.html").read_text()
    assert html.count("time since the run started (seconds)") == 8  # 2 LBs x (run + 3 windows)
    for legend in (
        "T0: its /readyz went false",
        "late request (answered after T0)",
        "failed request",
        "disruption interval",
        "end of the shutdown delay",
        "where the true reaction lies, given the sampling",
        "where a disruption truly began and ended",
    ):
        assert legend in html
    assert "<th>worst reaction [where it truly lies]</th>" in html
    assert "apiserver-bbbb" in html
    assert "master-1" in html


def test_the_report_renders_in_chromium_without_console_errors(outputs: Path) -> None:
    shot = outputs / "report.png"
    zoom = (
        'const z = document.getElementById("zoom"); z.value = "w2";'
        'z.dispatchEvent(new Event("change"));'
        'document.querySelectorAll("figure[data-view=w2]:not([hidden])").length'
    )
    figures = 'document.querySelectorAll("figure:not([hidden])").length'
    seen = open_page(
        (outputs / "report.html").as_uri(),
        shot,
        {"before": figures, "zoomed": zoom, "after": figures},
    )
    assert seen.errors == []
    assert seen.requests == [(outputs / "report.html").as_uri()]
    assert seen.values == {"before": 2, "zoomed": 2, "after": 2}
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _save(shot, "report.png")


def test_the_dashboard_renders_in_chromium_without_console_errors(outputs: Path) -> None:
    shot = outputs / "thresholds.png"
    seen = open_page(
        (outputs / "thresholds.html").as_uri(),
        shot,
        {"charts": 'document.querySelectorAll("svg[role=img]").length'},
    )
    assert seen.errors == []
    assert seen.requests == [(outputs / "thresholds.html").as_uri()]
    assert seen.values == {"charts": 2}
    _save(shot, "thresholds.png")


def test_the_browser_check_itself_sees_errors_and_requests(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        '<img src="http://127.0.0.1:9/x.png"><script>console.error("bad");'
        "undefinedFunction();</script>"
    )
    seen = open_page(page.as_uri())
    assert len(seen.errors) >= 2
    assert "http://127.0.0.1:9/x.png" in seen.requests


def test_a_zoomed_timeline_draws_only_what_falls_inside_it(outputs: Path) -> None:
    html = (outputs / "report.html").read_text()
    figures = re.findall(r'<figure data-view="(\w+)".*?</figure>', html, flags=re.S)
    assert figures == ["all", "w1", "w2", "w3"] * 2
    second = re.findall(r'<figure data-view="w2".*?</figure>', html, flags=re.S)[0]
    assert "disruption connect_refused from 110.15 s" in second
    assert "from 50.15 s" not in second
    assert "from 170.15 s" not in second


def _figure(html: str, label: str) -> str:
    [figure] = re.findall(
        rf'<figure data-view="\w+"[^>]*><svg [^>]*aria-label="{label}".*?</figure>',
        html,
        flags=re.S,
    )
    return figure


def _hi(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def test_the_timeline_shades_where_the_true_reaction_and_disruption_edges_lie(
    outputs: Path,
) -> None:
    html = (outputs / "report.html").read_text()
    summary = json.loads((outputs / "summary.json").read_text())
    for lb in ("internal-lb", "external-lb"):
        figure = _figure(html, f"load balancer {lb}: the whole run")
        titles = re.findall(r'<rect class="reaction-bound" [^>]*><title>(.*?)</title>', figure)
        expected = [
            f"reaction {ws['reaction']:.2f} s to {w['host']}: the true value lies within "
            f"[{ws['reaction_lo']:.2f}, {_hi(ws['reaction_hi'])}] s after T0 given the sampling"
            + (f", upper bound set by {ws['bound_by']}" if ws["bound_by"] else "")
            for w in summary["windows"]
            for ws in w["streams"]
            if ws["lb"] == lb
        ]
        assert len(titles) == 12  # 4 streams x 3 windows
        assert sorted(titles) == sorted(expected)
        edges = re.findall(r'<rect class="disruption-bound" [^>]*><title>(.*?)</title>', figure)
        expected = [
            f"{edge} of the disruption (connect_refused, {edge} at {i[f'{edge}_t']:.2f} s): "
            f"within [{i[f'{edge}_lo']:.2f}, {i[f'{edge}_hi']:.2f}] s given the sampling"
            for s in summary["streams"]
            if s["lb"] == lb
            for i in s["intervals"]
            for edge in ("start", "end")
        ]
        assert sorted(edges) == sorted(expected)
        assert len(edges) == (12 if lb == "external-lb" else 0)  # 2 streams x 3 intervals x 2
    assert (
        "start of the disruption (connect_refused, start at 50.15 s): within [49.90, 50.17] s"
        in html
    )


def test_the_tables_show_each_reaction_and_interval_with_its_bound(outputs: Path) -> None:
    html = (outputs / "report.html").read_text()
    summary = json.loads((outputs / "summary.json").read_text())
    for worst in summary["worst"]:
        cell = (
            f"{worst['reaction']:.2f} s [{worst['reaction_lo']:.2f}, {_hi(worst['reaction_hi'])}]"
        )
        assert f'<td class="num">{cell}</td>' in html
    assert "<th>reaction [where it truly lies]</th><th>upper bound set by</th>" in html
    for ws in summary["windows"][0]["streams"]:
        cell = f"{ws['reaction']:.2f} s [{ws['reaction_lo']:.2f}, {_hi(ws['reaction_hi'])}]"
        assert re.search(
            rf"<td>{ws['stream']}</td><td class=\"num\">\d+</td><td class=\"num\">[^<]*</td>"
            rf'<td class="num">{re.escape(cell)}</td><td>[a-z ]+</td>',
            html,
        )
    assert '<td class="num">50.15 s [49.90, 50.17]</td>' in html  # an interval's start
    assert re.search(
        r'<td class="num">53\.15 s \[52\.90, 53\.17\]</td>'  # its end, then its length
        r'<td class="num">3\.00 s \[\d\.\d\d, \d\.\d\d\]</td>',
        html,
    )
    assert "<td>a failed request</td>" in html  # the external LB's reused connections
    assert "<td>kept until its connection closed</td>" in html  # the internal LB's


def _bounded_window() -> Window:
    stream = StreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, Connection.NEW)
    seen = WindowStream(
        stream,
        late=3,
        max_elapsed=3.0,
        last_late_t=13.0,
        reaction=3.0,
        failures=0,
        reaction_lo=2.5,
        reaction_hi=None,
    )
    return Window("h", None, 20.0, 10.0, 10.0, 9.9, 10.1, ClosedBy.END, 40.0, (seen,))


def _draw(window: Window, lo: float, hi: float, intervals: Sequence[Interval] = ()) -> str:
    marks = StreamMarks(StreamId.parse(window.streams[0].stream), intervals=list(intervals))
    view = View("v", "a view", lo, hi, zoomed=True)
    return lb_timeline("lb", [marks], [window], {"h": "#0072B2"}, view)


def _band(svg: str, css: str) -> list[tuple[float, float]]:
    return [
        (float(x), float(x) + float(w))
        for x, w in re.findall(
            rf'<rect class="{css}" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg
        )
    ]


def test_bands_are_clamped_to_the_view_and_an_unbounded_reaction_runs_to_the_window_end() -> None:
    window = _bounded_window()
    scale = Scale(0.0, 20.0, LEFT, WIDTH - RIGHT)
    # T0 10 s + [2.5 s, ?]: from 12.5 s on, past the view's end at 20 s (the window ends at 40 s)
    [(x0, x1)] = _band(_draw(window, 0.0, 20.0), "reaction-bound")
    assert (x0, x1) == pytest.approx((scale(12.5), WIDTH - RIGHT), abs=0.11)
    # inside a wider view it stops at the window's end
    wide = Scale(0.0, 50.0, LEFT, WIDTH - RIGHT)
    [(x0, x1)] = _band(_draw(window, 0.0, 50.0), "reaction-bound")
    assert (x0, x1) == pytest.approx((wide(12.5), wide(40.0)), abs=0.11)
    bounded = dataclasses.replace(
        window, streams=(dataclasses.replace(window.streams[0], reaction_hi=4.0),)
    )
    [(x0, x1)] = _band(_draw(bounded, 0.0, 50.0), "reaction-bound")
    assert (x0, x1) == pytest.approx((wide(12.5), wide(14.0)), abs=0.11)
    assert _band(_draw(bounded, 20.0, 50.0), "reaction-bound") == []  # wholly outside
    assert "[2.50, ?] s after T0" in _draw(window, 0.0, 20.0)


def test_an_unbounded_disruption_start_runs_to_the_view_edge() -> None:
    window = _bounded_window()
    interval = Interval(
        window.streams[0].stream_id,
        15.0,
        16.0,
        "a",
        "b",
        ErrorClass.TIMEOUT,
        "timeout",
        2,
        start_lo=None,
        start_hi=15.5,
        end_lo=15.75,
        end_hi=16.25,
    )
    scale = Scale(12.0, 20.0, LEFT, WIDTH - RIGHT)
    svg = _draw(window, 12.0, 20.0, [interval])
    start, end = _band(svg, "disruption-bound")
    assert start == pytest.approx((LEFT, scale(15.5)), abs=0.11)
    assert end == pytest.approx((scale(15.75), scale(16.25)), abs=0.11)
    assert "start of the disruption (timeout, start at 15.00 s): within [?, 15.50] s" in svg
    assert _band(_draw(window, 30.0, 40.0, [interval]), "disruption-bound") == []


def test_every_anchor_a_verdict_names_is_on_the_page(outputs: Path) -> None:
    # A failed test's message points into report.html: the window or the interval it rests on.
    junit = (outputs / "junit.xml").read_text()
    named = set(re.findall(r"report\.html#([\w.-]+)", junit))
    assert any(a.startswith("window-") for a in named)
    ids = set(re.findall(r'\bid="([^"]+)"', (outputs / "report.html").read_text()))
    assert named <= ids, f"anchors named in junit.xml but not on the page: {named - ids}"
    # and every interval an availability message may name: each stream's, in its own order
    summary = json.loads((outputs / "summary.json").read_text())
    intervals = {
        interval_anchor(s["stream"], n)
        for s in summary["streams"]
        for n in range(1, len(s["intervals"]) + 1)
    }
    assert intervals
    assert intervals <= ids
