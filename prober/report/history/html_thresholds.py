"""`thresholds.html`: every platform's history side by side, one chart per metric.

Per LB x protocol x connection, one line per platform: a box from P50 to P75, a whisker on to
P99 with a tick at P95, on one shared axis per metric, so a platform whose LBs react slower
stands out at a glance. Keys with too few runs are drawn faint and say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prober.core.models import LB, Connection, Protocol
from prober.report.format.page import page
from prober.report.format.svg import HOST_COLOURS, Scale, esc, grid, x_axis
from prober.report.history.threshold_rows import ALL_PLATFORMS, METRICS, Entry
from prober.report.schema.keys import Key, key_name

WIDTH = 1040
LEFT = 290
RIGHT = 170
TOP = 12
LINE = 18
GAP = 10
AXIS_TITLES = {
    "reaction": "reaction: seconds from T0 (readyz false) to the last late request, per run",
    "disruption": "disruption: seconds of failed requests per stream, per run",
}
_INTRO = """
<p class="explain">Each line summarises many CI runs of one platform: the box spans the middle
of the runs (P50 to P75), the whisker reaches P99 (the value verdicts allow, rounded up to the
second) with a tick at P95. <b>Reaction</b> is how long after an apiserver's /readyz went false
the LB still sent it requests; <b>disruption</b> how long requests failed. Faint lines have
fewer runs than needed for a verdict. Platform <i>all</i> pools every platform.</p>
"""


def render_dashboard(entries: Sequence[Entry], runs: int, sources: int) -> str:
    platforms = platform_order(entries)
    colours = platform_colours(platforms)
    body = [
        "<h1>Load-balancer reaction and disruption across platforms</h1>",
        f'<p class="meta">{runs} runs from {sources} summaries · platforms: '
        f"{esc(', '.join(platforms))}</p>",
        _INTRO,
        legend(platforms, colours),
        *snapshot_charts(entries, platforms, colours, "h2"),
        "<h2>All numbers</h2>",
        numbers_table(entries),
    ]
    return page("prober thresholds across platforms", "\n".join(body))


# The pieces below are shared with `html_dashboard`, whose page shows the latest period this way.


def platform_order(entries: Sequence[Entry]) -> list[str]:
    """Platforms by name, then `all`: pooled numbers read as a reference below the others."""
    platforms = sorted({e.platform for e in entries} - {ALL_PLATFORMS})
    if any(e.platform == ALL_PLATFORMS for e in entries):
        platforms.append(ALL_PLATFORMS)
    return platforms


def platform_colours(platforms: Sequence[str]) -> dict[str, str]:
    return {p: HOST_COLOURS[i % len(HOST_COLOURS)] for i, p in enumerate(platforms)}


def legend(platforms: Sequence[str], colours: Mapping[str, str], extra: str = "") -> str:
    """One swatch per platform; `extra` appends swatches of other marks."""
    swatches = "".join(
        f'<span><svg class="swatch" width="28" height="14"><rect x="2" y="3" width="24" '
        f'height="8" fill="{colours[p]}"/></svg>{esc(p)}</span>'
        for p in platforms
    )
    return f'<div class="legend">{swatches}{extra}</div>'


def snapshot_charts(
    entries: Sequence[Entry], platforms: list[str], colours: Mapping[str, str], heading: str
) -> list[str]:
    """Per metric present, a `heading` and its chart of every key, platforms side by side."""
    body = []
    for metric in METRICS:
        chosen = [e for e in entries if e.metric == metric]
        if chosen:
            body.append(f"<{heading}>{esc(metric)}</{heading}>")
            body.append(_chart(metric, chosen, platforms, colours))
    return body


def _keys(entries: Sequence[Entry]) -> list[Key]:
    lbs, protocols, connections = list(LB), list(Protocol), list(Connection)
    return sorted(
        {e.key for e in entries},
        key=lambda k: (lbs.index(k[0]), protocols.index(k[1]), connections.index(k[2])),
    )


def _chart(
    metric: str, entries: Sequence[Entry], platforms: list[str], colours: Mapping[str, str]
) -> str:
    keys = _keys(entries)
    by = {(e.key, e.platform): e for e in entries}
    group = LINE * len(platforms) + GAP
    bottom = TOP + group * len(keys)
    height = bottom + 52
    scale = Scale(0.0, max(1.0, max(e.p99 for e in entries) * 1.05), LEFT, WIDTH - RIGHT)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{esc(AXIS_TITLES[metric])}">',
        grid(scale, TOP, bottom),
    ]
    for index, key in enumerate(keys):
        y0 = TOP + group * index
        parts.append(
            f'<text class="label" x="8" y="{y0 + LINE * len(platforms) / 2 + 4:.1f}">'
            f"{esc(key_name(key).replace('/', ' · '))}</text>"
        )
        if index:
            parts.append(
                f'<line class="row" x1="8" x2="{WIDTH - 8}" y1="{y0 - GAP / 2}" '
                f'y2="{y0 - GAP / 2}"/>'
            )
        for row, platform in enumerate(platforms):
            y = y0 + LINE * row + LINE / 2
            parts.append(
                f'<text x="{LEFT - 10}" y="{y + 4:.1f}" text-anchor="end">{esc(platform)}</text>'
            )
            entry = by.get((key, platform))
            if entry is not None:
                parts.append(_distribution(entry, scale, y, colours[platform]))
    parts.append(x_axis(scale, bottom + 4, AXIS_TITLES[metric]))
    parts.append("</svg>")
    return "\n".join(parts)


def _distribution(e: Entry, scale: Scale, y: float, colour: str) -> str:
    opacity = "1" if e.usable else "0.3"
    note = f"P99 {e.p99:.2f} s · {e.runs} runs" + ("" if e.usable else " (too few)")
    p50, p75, p95, p99 = scale(e.p50), scale(e.p75), scale(e.p95), scale(e.p99)
    return (
        f'<g opacity="{opacity}"><title>{esc(e.platform)} {esc(key_name(e.key))} {e.metric}: '
        f"P50 {e.p50:.2f} s, P75 {e.p75:.2f} s, P95 {e.p95:.2f} s, P99 {e.p99:.2f} s, "
        f"{e.runs} runs</title>"
        f'<line x1="{p75:.1f}" x2="{p99:.1f}" y1="{y}" y2="{y}" stroke="{colour}"/>'
        f'<rect x="{p50:.1f}" y="{y - 5}" width="{max(p75 - p50, 1.5):.1f}" height="10" '
        f'fill="{colour}"/>'
        f'<line x1="{p95:.1f}" x2="{p95:.1f}" y1="{y - 4}" y2="{y + 4}" stroke="{colour}"/>'
        f'<line x1="{p99:.1f}" x2="{p99:.1f}" y1="{y - 6}" y2="{y + 6}" stroke="{colour}" '
        'stroke-width="2"/>'
        f'<text x="{WIDTH - RIGHT + 8}" y="{y + 4:.1f}">{esc(note)}</text></g>'
    )


def numbers_table(entries: Sequence[Entry]) -> str:
    head = (
        "<tr><th>platform</th><th>lb</th><th>protocol</th><th>connection</th><th>metric</th>"
        "<th>P50</th><th>P75</th><th>P95</th><th>P99</th><th>allowed</th><th>runs</th>"
        "<th>usable</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{esc(e.platform)}</td><td>{esc(e.lb)}</td><td>{esc(e.protocol)}</td>"
        f"<td>{esc(e.connection)}</td><td>{esc(e.metric)}</td>"
        + "".join(f'<td class="num">{v:.2f} s</td>' for v in (e.p50, e.p75, e.p95, e.p99))
        + f'<td class="num">{e.allowed:.0f} s</td><td class="num">{e.runs}</td>'
        f"<td>{'yes' if e.usable else 'no'}</td></tr>"
        for e in entries
    )
    return f"<table>{head}{rows}</table>"
