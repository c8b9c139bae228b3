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


def _setup_cells(entry: LatencyStreamEntry) -> list[str]:
    """Per phase, the connect's then the TLS handshake's p50/p99 in ms."""
    cells = []
    for phase in _PHASES:
        p = _phase(entry, phase)
        for part in ("connect", "tls"):
            f = cast(dict[str, Any], p).get(part) or {"p50": None, "p99": None}
            cells.append(f"{ms(f['p50'])}/{ms(f['p99'])}")
    return cells


def _setup_headers() -> list[str]:
    return [f"{_WORDS[p]} {part}" for p in _PHASES for part in ("connect", "TLS")]


def _opened(section: LatencySection) -> list[LatencyStreamEntry]:
    """The new-connection streams whose connect and TLS were timed."""
    return [
        e
        for e in section["streams"]
        if e["connection"] == "new" and "connect" in _phase(e, RunPhase.BEFORE)
    ]


def setup_lines(section: LatencySection) -> list[str]:
    opened = _opened(section)
    if not opened:
        return []
    rows = [[e["stream"], *_setup_cells(e)] for e in opened]
    return [
        "",
        "new connections: TCP connect and TLS handshake by run phase (ms, p50/p99), within "
        "the answer times above:",
        *table(["stream", *_setup_headers()], rows),
    ]


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
    lines = ["", "answer times by run phase (ms):", *table(headers, rows), _rule(section)]
    return lines + setup_lines(section)


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
    note = f'<p class="note">{esc(_rule(section))}</p>'
    return f"<table>{head}{''.join(rows)}</table>{note}{_setup_html(section)}"


def _setup_html(section: LatencySection) -> str:
    opened = _opened(section)
    if not opened:
        return ""
    head = "".join(f"<th>{esc(h)} p50/p99 ms</th>" for h in _setup_headers())
    rows = "".join(
        f"<tr><td>{esc(e['stream'])}</td>"
        + "".join(f'<td class="num">{c}</td>' for c in _setup_cells(e))
        + "</tr>"
        for e in opened
    )
    return (
        "<p>New connections: the TCP connect and the TLS handshake, within the answer times "
        f"above.</p><table><tr><th>stream</th>{head}</tr>{rows}</table>"
    )
