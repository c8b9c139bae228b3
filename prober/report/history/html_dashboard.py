"""`dashboard.html`: many thresholds.json, one per period, as one page.

On top, the latest period as `thresholds.html` draws it (platforms side by side per key, the
same chart functions). Below, per LB and metric, one line chart of P99 per platform over the
periods, which is what the release team asks week to week: is an LB getting slower somewhere?

Each trend point is the *worst* protocol x connection of that LB, for that platform, in that
period, rather than small multiples of every protocol x connection: those would be 4 charts per
LB and metric, 32 on the page, each a handful of nearly flat lines a reader has to compare
across charts. The worst key is the one that decides (verdicts fail on it, `recommend` sizes
the shutdown delay from the worst P99), and a point's tooltip names which key it was, with its
run count; the latest period's snapshot above still shows every key.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.models import LB, parse_rfc3339
from prober.report.format.page import page
from prober.report.format.svg import Scale, esc, nice_ticks, tick_label
from prober.report.history.html_thresholds import (
    legend,
    platform_colours,
    platform_order,
    snapshot_charts,
)
from prober.report.history.threshold_rows import ALL_PLATFORMS, METRICS, Entry
from prober.report.history.thresholds import load_period, load_thresholds
from prober.report.schema.errors import BadInput
from prober.report.schema.types import Metric, Period

WIDTH = 1040
LEFT = 64
RIGHT = 24
PAD = 28  # keeps the first and the last period's points off the axes
TOP = 34
PLOT = 220
LABEL_GAP = 84  # pixels a date label needs; closer periods go unlabelled (their points stay)
DAY = 86400.0
FAINT = "0.35"

_INTRO = """
<p class="explain">Each file is one period of CI runs. The first part shows the latest period:
per LB, protocol and connection, each platform's box from P50 to P75 and whisker to P99.
The trend below follows P99, the value verdicts allow, over the periods: per LB and metric one
line per platform, each point the <b>worst</b> protocol and connection of that LB in that period
(hover a point to see which, and over how many runs). Hollow, faint points had fewer runs than a
verdict needs; a gap in a line is a period without that platform. Platform <i>all</i> pools
every platform and is drawn dashed.</p>
"""

_MARKS = (
    '<span><svg class="swatch" width="28" height="14"><circle cx="14" cy="7" r="4" '
    'fill="#555" stroke="#555"/></svg>enough runs for a verdict</span>'
    '<span><svg class="swatch" width="28" height="14"><circle cx="14" cy="7" r="4" '
    f'fill="#fff" stroke="#555" stroke-width="1.5" opacity="{FAINT}"/></svg>'
    "too few runs</span>"
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One thresholds.json and the period it covers; `start`, `end` as instants, to order by."""

    source: Path
    period: Period
    start: float
    end: float
    entries: list[Entry]


def load_snapshots(paths: Sequence[Path]) -> list[Snapshot]:
    """Every file, checked, ordered by the end of its period; two of one period refused."""
    snapshots = []
    for path in paths:
        entries = load_thresholds(path).entries
        period = load_period(path)
        if period is None:
            raise BadInput(
                f"{path}: no 'period': the trend needs the runs each file covers (thresholds "
                "from summaries that carry 'started', or from --from-query-result, have it)"
            )
        start, end = parse_rfc3339(period["start"]), parse_rfc3339(period["end"])
        snapshots.append(Snapshot(path, period, start, end, entries))
    seen: dict[tuple[float, float], Snapshot] = {}
    for snapshot in snapshots:
        other = seen.setdefault((snapshot.start, snapshot.end), snapshot)
        if other is not snapshot:
            # Two values for one point: a copy or a re-run of the query, and which one is
            # current is not for the page to guess. Periods that merely overlap are drawn.
            raise BadInput(
                f"{other.source} and {snapshot.source}: the same period, "
                f"{snapshot.period['start']} to {snapshot.period['end']}"
            )
    return sorted(snapshots, key=lambda s: (s.end, s.start))


def span(snapshots: Sequence[Snapshot]) -> str:
    """How many periods, from the first's start to the last's end."""
    count = len(snapshots)
    return (
        f"{count} period{'' if count == 1 else 's'} from {snapshots[0].period['start']} "
        f"to {snapshots[-1].period['end']}"
    )


def render_trend_page(snapshots: Sequence[Snapshot]) -> str:
    latest = snapshots[-1]
    # Colours over every period's platforms: a platform missing from the latest keeps its own.
    platforms = platform_order([e for s in snapshots for e in s.entries])
    colours = platform_colours(platforms)
    body = [
        "<h1>Load-balancer reaction and disruption: trend across periods</h1>",
        f'<p class="meta">{esc(span(snapshots))} · platforms: {esc(", ".join(platforms))}</p>',
        _INTRO,
        legend(platforms, colours, _MARKS),
        f"<h2>Latest period: {esc(latest.period['start'])} to {esc(latest.period['end'])}</h2>",
        f'<p class="meta">from {esc(latest.source)}</p>',
        *snapshot_charts(latest.entries, platform_order(latest.entries), colours, "h3"),
        "<h2>Trend: P99 per period, worst protocol and connection of each LB</h2>",
    ]
    lbs = [lb for lb in LB if any(e.lb == lb for s in snapshots for e in s.entries)]
    for lb in lbs:
        body.append(f"<h3>{esc(lb)}</h3>")
        for metric in METRICS:
            series = _series(snapshots, lb, metric)
            if series:
                body.append(trend_chart(lb, metric, snapshots, series, colours))
    body += ["<h2>Periods</h2>", _periods_table(snapshots)]
    return page("prober thresholds: trend across periods", "\n".join(body))


def _series(snapshots: Sequence[Snapshot], lb: LB, metric: Metric) -> dict[str, dict[int, Entry]]:
    """Per platform, per period index: the entry of that LB and metric with the largest P99."""
    series: dict[str, dict[int, Entry]] = {}
    for index, snapshot in enumerate(snapshots):
        for e in snapshot.entries:
            if e.lb != lb or e.metric != metric:
                continue
            points = series.setdefault(e.platform, {})
            # Strictly larger: on a tie the key listed first in the file stays, every time.
            if index not in points or e.p99 > points[index].p99:
                points[index] = e
    return series


def trend_chart(
    lb: LB,
    metric: Metric,
    snapshots: Sequence[Snapshot],
    series: Mapping[str, Mapping[int, Entry]],
    colours: Mapping[str, str],
) -> str:
    title = f"{lb} · {metric}: P99 of the worst protocol × connection, per period"
    bottom = TOP + PLOT
    height = bottom + 56
    ends = [s.end for s in snapshots]
    # One period alone would sit on a zero-width scale: give it a day either side.
    lo, hi = (ends[0], ends[-1]) if ends[-1] > ends[0] else (ends[0] - DAY, ends[0] + DAY)
    x = Scale(lo, hi, LEFT + PAD, WIDTH - RIGHT - PAD)
    top = max(e.p99 for points in series.values() for e in points.values())
    y = Scale(0.0, max(1.0, top * 1.1), bottom, TOP)
    parts = [
        f'<figure class="trend" data-lb="{esc(lb)}" data-metric="{metric}">'
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{esc(title)}">',
        f'<text class="label" x="{LEFT}" y="16">{esc(title)}</text>',
        _y_axis(y),
        _x_axis(x, snapshots, bottom),
    ]
    for platform in (p for p in colours if p in series):
        parts.append(
            _line(platform, series[platform], snapshots, x=x, y=y, colour=colours[platform])
        )
    parts.append("</svg></figure>")
    return "\n".join(parts)


def _y_axis(y: Scale) -> str:
    parts = [
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{y.end}" y2="{y.start}"/>',
        f'<text class="axis-title" transform="translate(16 {(y.start + y.end) / 2:.1f}) '
        'rotate(-90)" text-anchor="middle">P99 (seconds)</text>',
    ]
    for tick in nice_ticks(y.lo, y.hi, 5):
        at = y(tick)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{at:.1f}" y2="{at:.1f}"/>'
        )
        parts.append(
            f'<text class="tick" x="{LEFT - 6}" y="{at + 4:.1f}" text-anchor="end">'
            f"{tick_label(tick)}</text>"
        )
    return "\n".join(parts)


def _x_axis(x: Scale, snapshots: Sequence[Snapshot], bottom: float) -> str:
    parts = [f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}"/>']
    labelled = float("inf")
    # From the latest back, so that the latest period is always labelled.
    for snapshot in reversed(snapshots):
        at = x(snapshot.end)
        parts.append(
            f'<line class="axis" x1="{at:.1f}" x2="{at:.1f}" y1="{bottom}" y2="{bottom + 5}"/>'
        )
        if labelled - at >= LABEL_GAP:
            labelled = at
            parts.append(
                f'<text class="tick period" x="{at:.1f}" y="{bottom + 18}" text-anchor="middle">'
                f"{_date(snapshot.end)}</text>"
            )
    parts.append(
        f'<text class="axis-title" x="{(x.start + x.end) / 2:.1f}" y="{bottom + 40}" '
        'text-anchor="middle">end of the period (UTC)</text>'
    )
    return "\n".join(parts)


def _line(
    platform: str,
    points: Mapping[int, Entry],
    snapshots: Sequence[Snapshot],
    *,
    x: Scale,
    y: Scale,
    colour: str,
) -> str:
    """Segments join consecutive periods only (a gap stays a gap); a segment touching a point
    of too few runs is as faint as that point."""
    dash = ' stroke-dasharray="6 4"' if platform == ALL_PLATFORMS else ""
    at = {i: (x(snapshots[i].end), y(e.p99)) for i, e in points.items()}
    parts = [f'<g class="series" data-platform="{esc(platform)}">']
    for i in sorted(points):
        if i + 1 in points:
            (x0, y0), (x1, y1) = at[i], at[i + 1]
            faint = not (points[i].usable and points[i + 1].usable)
            parts.append(
                f'<line class="segment" x1="{x0:.1f}" x2="{x1:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" '
                f'stroke="{colour}" stroke-width="2"{dash}'
                + (f' opacity="{FAINT}"' if faint else "")
                + "/>"
            )
    for i in sorted(points):
        parts.append(_point(points[i], snapshots[i].period, at[i], colour))
    parts.append("</g>")
    return "\n".join(parts)


def _point(e: Entry, period: Period, at: tuple[float, float], colour: str) -> str:
    kind, fill = ("usable", colour) if e.usable else ("unusable", "#fff")
    faint = "" if e.usable else f' opacity="{FAINT}"'
    note = (
        f"{e.platform}, {period['start']} to {period['end']}: P99 {e.p99:.2f} s, "
        f"{e.protocol} {e.connection} connections, the worst of {e.lb}; {e.runs} runs"
        + ("" if e.usable else ", too few for a verdict")
    )
    return (
        f'<circle class="point {kind}" cx="{at[0]:.1f}" cy="{at[1]:.1f}" r="4.5" '
        f'fill="{fill}" stroke="{colour}" stroke-width="1.5"{faint}>'
        f"<title>{esc(note)}</title></circle>"
    )


def _periods_table(snapshots: Sequence[Snapshot]) -> str:
    head = (
        "<tr><th>period start</th><th>period end</th><th>file</th><th>platforms</th>"
        "<th>usable entries</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{esc(s.period['start'])}</td><td>{esc(s.period['end'])}</td>"
        f"<td>{esc(s.source)}</td><td>{esc(', '.join(platform_order(s.entries)))}</td>"
        f'<td class="num">{sum(e.usable for e in s.entries)} of {len(s.entries)}</td></tr>'
        for s in snapshots
    )
    return f"<table>{head}{rows}</table>"


def _date(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%d")


def dashboard_command(
    paths: Sequence[Path],
    *,
    out: Path,
    stdout: TextIO | None = None,
) -> int:
    """Many thresholds.json, one per period: the latest side by side, each LB's P99 over time."""
    stdout = stdout or sys.stdout
    snapshots = load_snapshots(paths)
    html = render_trend_page(snapshots)
    path = out / "dashboard.html"
    with writing(path):
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
    print(f"{span(snapshots)}\nwrote {path}", file=stdout)
    return ExitCode.OK
