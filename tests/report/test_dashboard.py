"""`prober dashboard`: many periods' thresholds.json as one page, the latest snapshot and a
P99 trend per LB and metric; rendered by a real headless Chromium (see test_html.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection, Protocol
from prober.report.format.svg import HOST_COLOURS
from prober.report.history.html_dashboard import FAINT
from prober.report.history.html_thresholds import AXIS_TITLES
from prober.report.history.threshold_rows import METRICS, Entry
from prober.report.history.thresholds import load_period, to_document
from prober.report.schema.jsonio import write_json
from prober.report.schema.types import Period
from tests.report.browser import open_page

ARTIFACTS = Path(__file__).parent / "artifacts"
LBS = (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK)  # no localhost: it gets no chart
WEEKS = ("2026-10-01", "2026-10-08", "2026-10-15", "2026-10-22", "2026-10-29")
BASE = {"aws": 2.0, "azure": 6.0, "gcp": 4.0, "all": 3.0, "vsphere": 8.0}
ORDER = ["aws", "azure", "gcp", "vsphere", "all"]  # by name, the pooled `all` last
SPIKE = 30.0  # aws, week 3, external-lb reaction, http1 over new connections


def _period(week: int) -> Period:
    return {"start": f"{WEEKS[week - 1]}T00:00:00Z", "end": f"{WEEKS[week]}T00:00:00Z"}


def _entries(week: int, platforms: list[str]) -> list[Entry]:
    """Per key a P99 growing with the week; the last key (http2, reused) is each LB's worst,
    but for one spike. Azure has too few runs every week."""
    entries = []
    for platform in platforms:
        for lb in LBS:
            keys = [(p, c) for p in Protocol for c in Connection]
            for index, (protocol, connection) in enumerate(keys):
                for metric in METRICS:
                    p99 = BASE[platform] + week + 0.1 * index + (metric == "disruption")
                    spike = (platform, week, lb, metric, index) == (
                        "aws",
                        3,
                        LB.EXTERNAL,
                        METRICS[0],
                        0,
                    )
                    p99 = SPIKE if spike else p99
                    runs = 20 if platform == "azure" else 300
                    entries.append(
                        Entry(
                            platform, lb, protocol, connection, metric,
                            p99 / 4, p99 / 3, p99 / 2, p99, runs, runs >= 100,
                        )
                    )  # fmt: skip
    return entries


def _write(path: Path, week: int, platforms: list[str], *, period: bool = True) -> Path:
    write_json(path, to_document(_entries(week, platforms), _period(week) if period else None))
    return path


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four weeks, given out of order: vsphere only in the first, azure missing in the second."""
    base = tmp_path_factory.mktemp("periods")
    return [
        _write(base / "w3.json", 3, ["aws", "azure", "gcp", "all"]),
        _write(base / "w1.json", 1, ["aws", "azure", "gcp", "vsphere", "all"]),
        _write(base / "w4.json", 4, ["aws", "azure", "gcp", "all"]),
        _write(base / "w2.json", 2, ["aws", "gcp", "all"]),
    ]


@pytest.fixture(scope="module")
def dashboard(history: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dashboard") / "out"
    assert main(["dashboard", *map(str, history), "--out", str(out)]) == 0
    return out / "dashboard.html"


def _figures(html: str) -> dict[tuple[str, str], str]:
    found = re.findall(
        r'<figure class="trend" data-lb="([^"]+)" data-metric="(\w+)">(.*?)</figure>', html, re.S
    )
    return {(lb, metric): body for lb, metric, body in found}


def _series(figure: str) -> dict[str, str]:
    found = re.findall(r'<g class="series" data-platform="(\w+)">(.*?)</g>', figure, re.S)
    return dict(found)


def test_one_trend_chart_per_lb_and_metric_present(dashboard: Path) -> None:
    html = dashboard.read_text()
    figures = _figures(html)
    assert list(figures) == [(lb.value, metric) for lb in LBS for metric in METRICS]
    assert "localhost" not in html
    for (lb, metric), figure in figures.items():
        title = f"{lb} · {metric}: P99 of the worst protocol × connection, per period"
        assert f'aria-label="{title}"' in figure
        assert f">{title}</text>" in figure
        assert list(_series(figure)) == ORDER


def test_each_platform_is_a_line_in_its_snapshot_colour_with_gaps_kept(dashboard: Path) -> None:
    html = dashboard.read_text()
    colours = dict(zip(ORDER, HOST_COLOURS, strict=False))
    for platform, colour in colours.items():
        assert f'fill="{colour}"/></svg>{platform}</span>' in html  # the one legend
    for figure in _figures(html).values():
        for platform, series in _series(figure).items():
            points = re.findall(r'<circle class="point (\w+)"', series)
            segments = re.findall(r'<line class="segment" [^>]*stroke="([^"]+)"', series)
            assert set(re.findall(r'stroke="([^"]+)"', series)) == {colours[platform]}
            # azure has no week 2: weeks 1 and 3 are not joined; vsphere has week 1 alone
            expected = {"azure": (3, 1), "vsphere": (1, 0)}.get(platform, (4, 3))
            assert (len(points), len(segments)) == expected, platform
        assert 'stroke-dasharray="6 4"' in _series(figure)["all"]
        assert "stroke-dasharray" not in _series(figure)["aws"]


def test_points_with_too_few_runs_are_hollow_and_faint(dashboard: Path) -> None:
    for figure in _figures(dashboard.read_text()).values():
        for platform, series in _series(figure).items():
            points = re.findall(r'<circle class="point (\w+)" [^>]*fill="([^"]+)"([^>]*)>', series)
            if platform == "azure":
                assert points == [("unusable", "#fff", f' stroke="{HOST_COLOURS[1]}" '
                                   f'stroke-width="1.5" opacity="{FAINT}"')] * 3  # fmt: skip
                assert series.count(f'opacity="{FAINT}"') == 3 + 1  # and its one segment
            else:
                assert {(kind, "opacity" in rest) for kind, _, rest in points} == {
                    ("usable", False)
                }


def test_the_x_axis_labels_each_period_end(dashboard: Path) -> None:
    for figure in _figures(dashboard.read_text()).values():
        labels = re.findall(r'<text class="tick period" [^>]*>([\d-]+)</text>', figure)
        assert labels == ["2026-10-29", "2026-10-22", "2026-10-15", "2026-10-08"]
        assert "end of the period (UTC)" in figure
        assert ">P99 (seconds)</text>" in figure


def test_each_point_is_the_worst_key_of_its_lb_and_says_which(dashboard: Path) -> None:
    figure = _figures(dashboard.read_text())[("external-lb", "reaction")]
    aws = _series(figure)["aws"]
    titles = re.findall(r"<title>(.*?)</title>", aws)
    assert titles[2] == (
        "aws, 2026-10-15T00:00:00Z to 2026-10-22T00:00:00Z: P99 30.00 s, http1 new connections, "
        "the worst of external-lb; 300 runs"
    )
    assert titles[3] == (
        "aws, 2026-10-22T00:00:00Z to 2026-10-29T00:00:00Z: P99 6.30 s, http2 reused "
        "connections, the worst of external-lb; 300 runs"
    )
    heights = [float(y) for y in re.findall(r'<circle [^>]*cy="([\d.]+)"', aws)]
    assert min(heights) == heights[2]  # the spike is drawn highest
    azure = re.findall(r"<title>(.*?)</title>", _series(figure)["azure"])
    assert azure[0].endswith("; 20 runs, too few for a verdict")


def test_the_latest_period_is_drawn_as_thresholds_html_draws_it(dashboard: Path) -> None:
    html = dashboard.read_text()
    assert "<h2>Latest period: 2026-10-22T00:00:00Z to 2026-10-29T00:00:00Z</h2>" in html
    assert '<p class="meta">4 periods from 2026-10-01T00:00:00Z to 2026-10-29T00:00:00Z' in html
    snapshot = html.split("<h2>Trend")[0]
    for metric in METRICS:
        assert f'aria-label="{AXIS_TITLES[metric]}"' in snapshot
    # week 4's numbers, its platforms only (vsphere was in week 1 alone)
    assert (
        "aws external-lb/http2/reused reaction: P50 1.57 s, P75 2.10 s, P95 3.15 s, P99 6.30 s"
        in snapshot
    )
    assert "vsphere" not in snapshot.split('<div class="legend">')[1].split("</div>", 1)[1]


def test_the_page_renders_in_chromium_without_console_errors(dashboard: Path) -> None:
    shot = dashboard.with_suffix(".png")
    seen = open_page(
        dashboard.as_uri(),
        shot,
        {
            "charts": 'document.querySelectorAll("svg[role=img]").length',
            "trends": 'document.querySelectorAll("figure.trend svg").length',
        },
    )
    assert seen.errors == []
    assert seen.requests == [dashboard.as_uri()]
    assert seen.values == {"charts": 2 + 6, "trends": 6}
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "dashboard.png")
    print(f"\nscreenshot: {shot} (copy: {ARTIFACTS / 'dashboard.png'})")


def test_the_page_is_self_contained(dashboard: Path) -> None:
    html = dashboard.read_text()
    assert "default-src 'none'" in html
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}
    assert not re.search(r"\b(src|href)=", html)
    assert "<script" not in html


def test_it_says_what_it_did(history: list[Path], tmp_path: Path, capsys) -> None:
    assert main(["dashboard", *map(str, history), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        "4 periods from 2026-10-01T00:00:00Z to 2026-10-29T00:00:00Z\n"
        f"wrote {tmp_path / 'dashboard.html'}\n"
    )


def test_one_period_alone_is_a_point_per_platform(tmp_path: Path) -> None:
    only = _write(tmp_path / "w1.json", 1, ["aws", "gcp"])
    assert main(["dashboard", str(only), "--out", str(tmp_path)]) == 0
    html = (tmp_path / "dashboard.html").read_text()
    assert '<p class="meta">1 period from 2026-10-01T00:00:00Z to 2026-10-08T00:00:00Z' in html
    figure = _figures(html)[("internal-lb", "disruption")]
    assert re.findall(r'<text class="tick period" [^>]*>([\d-]+)</text>', figure) == ["2026-10-08"]
    assert figure.count('<circle class="point usable"') == 2
    assert 'class="segment"' not in figure


def _fails(capsys, *args: str) -> str:
    assert main(["dashboard", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    return captured.err


def test_a_file_without_a_period_is_named(tmp_path: Path, capsys) -> None:
    good = _write(tmp_path / "w1.json", 1, ["aws"])
    old = _write(tmp_path / "old.json", 2, ["aws"], period=False)
    assert load_period(old) is None
    assert _fails(capsys, str(good), str(old), "--out", str(tmp_path)) == (
        f"prober dashboard: {old}: no 'period': the trend needs the runs each file covers "
        "(thresholds from summaries that carry 'started', or from --from-query-result, have it)\n"
    )
    assert not (tmp_path / "dashboard.html").exists()


def test_two_files_of_one_period_are_both_named(tmp_path: Path, capsys) -> None:
    first = _write(tmp_path / "a.json", 1, ["aws"])
    doc = json.loads(first.read_text())
    # the same instants spelt another way (as `thresholds` from summaries writes them)
    doc["period"] = {"start": "2026-10-01T00:00:00.000000Z", "end": "2026-10-08T02:00:00+02:00"}
    second = tmp_path / "b.json"
    second.write_text(json.dumps(doc))
    other = _write(tmp_path / "c.json", 2, ["aws"])
    assert _fails(capsys, str(first), str(other), str(second)) == (
        f"prober dashboard: {first} and {second}: the same period, "
        "2026-10-01T00:00:00.000000Z to 2026-10-08T02:00:00+02:00\n"
    )


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
         "(char 1)"),
        ('{"v": 2, "entries": []}', "thresholds version 2, this reader knows 1"),
        ('{"v": 1, "entries": [], "period": "last week"}',
         "field 'period': expected an object, got 'last week'"),
        ('{"v": 1, "entries": [], "period": {"start": "2026-10-01", "end": "2026-10-08"}}',
         "period.start: expected an RFC 3339 time, got '2026-10-01'"),
        ('{"v": 1, "entries": [], "period": {"start": "2026-10-01T00:00:00Z"}}',
         "period.end: expected an RFC 3339 time, got None"),
        ('{"v": 1, "entries": [], "period": {"start": "2026-10-08T00:00:00Z", '
         '"end": "2026-10-01T00:00:00Z"}}',
         "period: start 2026-10-08T00:00:00Z is after end 2026-10-01T00:00:00Z"),
    ],
)  # fmt: skip
def test_a_bad_file_is_named(tmp_path: Path, capsys, content: str, error: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = _write(tmp_path / "w1.json", 1, ["aws"])
    assert _fails(capsys, str(good), str(bad)) == f"prober dashboard: {bad}: {error}\n"


def test_no_file_is_bad_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["dashboard"])
    assert exit_.value.code == 2
    assert "THRESHOLDS" in capsys.readouterr().err


def test_an_output_directory_that_cannot_be_made_is_one_line(tmp_path: Path, capsys) -> None:
    good = _write(tmp_path / "w1.json", 1, ["aws"])
    blocker = tmp_path / "file"
    blocker.write_text("")
    error = _fails(capsys, str(good), "--out", str(blocker / "sub"))
    assert error.startswith(
        f"prober dashboard: cannot write {blocker / 'sub' / 'dashboard.html'}: "
    )
