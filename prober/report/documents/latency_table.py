"""Answer times by run phase, from summary.json's `latency` (`report.results.latency`): a row
per stream with its p50 and p99 before the shutdown windows, inside them and after, and
whether it was slow but up. `latency_html` for `report.html`, `latency_lines` for the
terminal (`prober analyze`, `prober lab`)."""

from __future__ import annotations

from typing import Any, cast

from prober.core.latency import RunPhase
from prober.report.format.svg import esc
from prober.report.format.tables import table
from prober.report.results.latency import (
    UNRECORDED,
    LatencySection,
    LatencyStreamEntry,
    PhaseEntry,
)

_PHASES = (RunPhase.BEFORE, RunPhase.IN, RunPhase.AFTER)
_WORDS = {RunPhase.BEFORE: "before", RunPhase.IN: "in windows", RunPhase.AFTER: "after"}


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _phase(entry: LatencyStreamEntry, phase: RunPhase) -> PhaseEntry:
    return cast(PhaseEntry, cast(dict[str, Any], entry)[phase.value])


def _rule(section: LatencySection) -> str:
    return (
        f"slow but up: in-window p99 > {section['multiple']:g} x the quiet p99 (before and after "
        f"the windows) and > {section['floor']:g} s; compared with at least "
        f"{section['min_quiet']} quiet answers and {section['min_in_window']} in the windows. "
        f"p50/p99 in ms, answered requests only, each at most "
        f"{(section['ratio'] - 1) * 100:.0f} % above the true value (its bucket's upper edge)"
    )


def _cells(entry: LatencyStreamEntry) -> list[str]:
    cells = []
    for phase in _PHASES:
        p = _phase(entry, phase)
        cells += [str(p["count"]), ms(p["p50"]), ms(p["p99"])]
    return cells


def latency_lines(section: LatencySection | None) -> list[str]:
    if section is None:
        return []
    if not section["recorded"]:
        return ["", f"answer times by run phase: none, {UNRECORDED}"]
    headers = ["stream"]
    for phase in _PHASES:
        word = _WORDS[phase]
        headers += [f"{word} n", f"{word} p50", f"{word} p99"]
    headers.append("slow but up")
    rows = [
        [e["stream"], *_cells(e), "SLOW" if e["slow_but_up"] else "no"] for e in section["streams"]
    ]
    return ["", "answer times by run phase (ms):", *table(headers, rows), _rule(section)]


def latency_html(section: LatencySection | None) -> str:
    if section is None or not section["streams"]:
        return "<p>No request stream in this run.</p>"
    head = "<tr><th>stream</th>" + "".join(
        f"<th>{esc(_WORDS[p])}: answers</th><th>p50 ms</th><th>p99 ms</th>" for p in _PHASES
    )
    head += "<th>slow but up</th></tr>"
    rows = []
    for e in section["streams"]:
        cells = [f"<td>{esc(e['stream'])}</td>"]
        cells += [f'<td class="num">{c}</td>' for c in _cells(e)]
        verdict = "SLOW" if e["slow_but_up"] else "no"
        cells.append(f'<td title="{esc(e["why"])}">{verdict}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table>{head}{"".join(rows)}</table><p class="note">{esc(_rule(section))}</p>'
