"""summary.json's `rebalancing` (`report.results.rebalancing`) as tables: in the text of
`prober analyze` and `prober lab`, and in report.html. One table per restart: a row per
summary period after its T1, each apiserver's share of the kept HTTP/2 requests in it, then
the line saying when each held half its fair share."""

from __future__ import annotations

from prober.report.format.svg import esc
from prober.report.format.tables import bounded, table
from prober.report.schema.types import RebalanceEntry, RebalancingSection, SharePeriodEntry

LEGEND = (
    "after: the period's end, seconds after T1; each apiserver's share of the kept HTTP/2 "
    "connections' requests answered in that period; held: from T1 until it held at least "
    "half its fair share (1/N) in every later period of at least 2N requests [where the true "
    "time lies]"
)


def rebalance_lines(section: RebalancingSection | None) -> list[str]:
    """Every restart's table as text, with the legend: for `prober analyze` and `prober lab`."""
    if not section:
        return []
    lines = ["", f"rebalancing after each restart: {section['text']}"]
    hosts = section["apiservers"]
    for entry in section["restarts"]:
        ready = bounded(entry["ready"], entry["ready_lo"], entry["ready_hi"])
        lines += [
            f"{entry['label']} ready (T1) at {ready}; until {entry['until_by']} at "
            f"{entry['until']:.2f} s:",
            *(f"  {line}" for line in table(["after", "requests", *hosts], _rows(entry, hosts))),
            f"  {entry['text']}",
        ]
    if section["restarts"]:
        lines.append(LEGEND)
    return lines


def rebalance_html(section: RebalancingSection | None) -> str:
    if not section:
        return (
            "<p>No summary record of this run counted the kept HTTP/2 connections' answers "
            "(no such stream, or a log written before they were counted).</p>"
        )
    hosts = section["apiservers"]
    parts = [f"<p>{esc(section['text'])}.</p>"]
    for entry in section["restarts"]:
        ready = bounded(entry["ready"], entry["ready_lo"], entry["ready_hi"])
        head = "".join(f"<th>{esc(h)}</th>" for h in ["after T1 (s)", "requests", *hosts])
        rows = "".join(
            "<tr>" + "".join(f'<td class="num">{esc(c)}</td>' for c in row) + "</tr>"
            for row in _rows(entry, hosts)
        )
        parts += [
            f"<h3>{esc(entry['label'])}: T1 at {esc(ready)}, until {esc(entry['until_by'])}</h3>",
            f"<table><tr>{head}</tr>{rows}</table>",
            f'<ul class="explained"><li>{esc(entry["text"])}</li></ul>',
        ]
    if section["restarts"]:
        parts.append(f'<p class="note">{esc(LEGEND)}</p>')
    return "\n".join(parts)


def _rows(entry: RebalanceEntry, hosts: list[str]) -> list[list[str]]:
    return [_row(period, entry["ready"], hosts) for period in entry["periods"]]


def _row(period: SharePeriodEntry, ready: float, hosts: list[str]) -> list[str]:
    shares = [f"{period['shares'].get(h, 0.0) * 100:.0f} %" for h in hosts]
    return [f"+{period['end'] - ready:.1f}", str(period["requests"]), *shares]
