"""The HTML pages: self-contained, readable, and rendered by a real headless Chromium.

Each Chromium test saves a full-page screenshot under pytest's tmp dir (the path is printed;
run with -s to see it) and a copy in tests/report/artifacts/ (ignored by git)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from prober.cli import main
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
    assert not re.search(r"\b(src|href)=", html)


def test_the_report_is_labelled_for_a_newcomer(outputs: Path) -> None:
    html = (outputs / "report.html").read_text()
    assert html.count("time since the run started (seconds)") == 8  # 2 LBs x (run + 3 windows)
    for legend in (
        "T0: its /readyz went false",
        "late request (answered after T0)",
        "failed request",
        "disruption interval",
        "end of the shutdown delay",
    ):
        assert legend in html
    assert "<th>worst reaction</th>" in html
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
