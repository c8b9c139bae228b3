"""The proof of completeness, per shutdown window and stream, as the terminal and report.html
show it: from summary.json's `coverage` (`report.results.coverage`).

A row per window and stream: the ticks the schedule made due inside the window and the share
taken, the gap largest for its schedule with its place in run time, the limit it is judged
against (`core.coverage.GAP_LIMIT` times the scheduled mean gap) and whether it stayed within
it. Under the table, per stream over the whole run: due, started and counted. A summary
without the section (a log before the daemon counted it) shows nothing.
"""

from __future__ import annotations

from prober.report.format.svg import esc
from prober.report.format.tables import seconds, table
from prober.report.schema.types import (
    CoverageSection,
    CoverageStreamEntry,
    CoverageTotalEntry,
    CoverageWindowEntry,
)

HEADERS = ["window", "lb", "protocol", "connection", "due", "taken", "coverage",
           "worst gap", "at (run time)", "limit", "within"]  # fmt: skip
TOTAL_HEADERS = ["stream", "due", "started", "counted", "skipped"]


def coverage_lines(section: CoverageSection | None) -> list[str]:
    """The section as text tables; [] without one."""
    if section is None:
        return []
    lines = [
        "",
        "coverage per shutdown window and stream (due: ticks the schedule made due inside the "
        "window; worst gap: the largest for its schedule; limit: "
        f"{section['limit_factor']:g} x the scheduled mean gap):",
    ]
    if section["windows"]:
        rows = [_row(w, s) for w in section["windows"] for s in w["streams"]]
        lines += table(HEADERS, rows)
    else:
        lines.append("no shutdown window closed: nothing to cover")
    if section["streams"]:
        lines += ["", "the whole run per stream (counted: samples taken, logged or not):"]
        lines += table(TOTAL_HEADERS, [_total(t) for t in section["streams"]])
    return lines


def _row(window: CoverageWindowEntry, s: CoverageStreamEntry) -> list[str]:
    return [
        window["instance"],
        s["lb"],
        s["protocol"],
        s["connection"],
        str(s["due"]),
        str(s["taken"]),
        _share(s),
        seconds(s["gap"], 3),
        _place(s),
        seconds(s["limit"], 3),
        _within(s),
    ]


def _total(t: CoverageTotalEntry) -> list[str]:
    return [t["stream"], str(t["due"]), str(t["started"]), str(t["counted"]), str(t["skipped"])]


def _share(s: CoverageStreamEntry) -> str:
    return "-" if s["share"] is None else f"{100 * s['share']:.1f} %"


def _place(s: CoverageStreamEntry) -> str:
    if s["gap_start"] is None or s["gap_end"] is None:
        return "-"
    return f"{s['gap_start']:.3f}..{s['gap_end']:.3f} s"


def _within(s: CoverageStreamEntry) -> str:
    return {True: "yes", False: "NO", None: "-"}[s["within"]]


def coverage_html(section: CoverageSection | None) -> list[str]:
    """The section for report.html, heading first; [] without one."""
    if section is None:
        return []
    heading = '<h2 id="coverage">Coverage: what was due and taken, per window and stream</h2>'
    note = (
        f"<p>A gap is judged against {section['limit_factor']:g} times the mean gap the "
        "schedule asked for then: a healthy schedule's jitter and a busy worker stay within "
        "it; a paused daemon, a blocked writer or a starved event loop does not.</p>"
    )
    rows = []
    for window in section["windows"]:
        for s in window["streams"]:
            cells = _row(window, s)
            cells[8] = (
                "-"
                if s["gap_start_ts"] is None
                else f"{cells[8]} ({s['gap_start_ts']} to {s['gap_end_ts']})"
            )
            mark = ' class="failed"' if s["within"] is False else ""
            rows.append(f"<tr{mark}>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in HEADERS) + "</tr>"
    body = f"<table>{head}{''.join(rows)}</table>" if rows else "<p>No shutdown window.</p>"
    totals = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in _total(t)) + "</tr>"
        for t in section["streams"]
    )
    total_head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in TOTAL_HEADERS) + "</tr>"
    return [heading, note, body, f"<table>{total_head}{totals}</table>"]
