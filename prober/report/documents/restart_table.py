"""The restarted apiservers in `report.html`: a row per instance, from summary.json's
`restarts` (`report.results.restarts`), beside the capacity lanes (`report.documents.capacity`).

Each row: the instance as a reader knows it (`node #start`) and its Lease holder, T1 with its
bound and the signal that set each side, then per LB the add-back with its bound against the
LB's worst (its budget: interval x healthy threshold, a timeout) and its early failures, and
the failures through every LB that no answer could put on an instance (unattributed).
"""

from __future__ import annotations

from prober.core.instances import LEASE_FIRST, LEASE_READ, OLD_INSTANCE
from prober.report.format.anchors import instance_anchor
from prober.report.format.svg import esc
from prober.report.format.tables import bounded, seconds, table
from prober.report.schema.types import AddBackEntry, InstanceEntry, RestartsSection

# Which signal set a side of T1 (`core.instances`), in the report's words; an LB's answer
# reads "<lb> answer" and is shown as it is.
_SIGNALS = {
    OLD_INSTANCE: "the old process still answering",
    LEASE_FIRST: "the new holder's first Lease write",
    LEASE_READ: "the Lease read before the new holder",
}


def signal(by: str | None) -> str:
    if by is None:
        return "nothing"
    return _SIGNALS.get(by, by.replace(" answer", "'s first answer from it"))


def restarts_table(section: RestartsSection | None) -> str:
    if section is None or not section["instances"]:
        return "<p>No kube-apiserver was restarted during this run.</p>"
    lbs = [e["lb"] for e in section["lbs"]]
    rows = [_row(entry, lbs) for entry in section["instances"]]
    head = (
        "<tr><th>restarted apiserver</th><th>Lease holder</th>"
        "<th>T1: /readyz went true [where it truly lies]</th><th>lower bound set by</th>"
        "<th>upper bound set by</th>"
        + "".join(f"<th>{esc(lb)}: add-back after T1 [bound]; its worst</th>" for lb in lbs)
        + "<th>early failures</th><th>unattributed failures</th></tr>"
    )
    summary = "".join(f"<li>{esc(e['text'])}</li>" for e in section["lbs"])
    return f'<table>{head}{"".join(rows)}</table><ul class="explained">{summary}</ul>'


def _row(entry: InstanceEntry, lbs: list[str]) -> str:
    backs = {b["lb"]: b for b in entry["lbs"]}
    complete = "" if entry["complete"] else " (the run ended before every LB took it back)"
    cells = [
        f"<td>{esc(entry['label'])}{esc(complete)}</td>",
        f"<td>{esc(entry['holder'] or '-')}</td>",
        f'<td class="num">{bounded(entry["t1"], entry["t1_lo"], entry["t1_hi"])}</td>',
        f"<td>{esc(signal(entry['t1_lo_by']))}</td>",
        f"<td>{esc(signal(entry['t1_hi_by']))}</td>",
        *(_add_back(backs.get(lb)) for lb in lbs),
        f'<td class="num">{entry["early"]}</td>',
        f'<td class="num">{sum(b["unattributed"] for b in entry["lbs"])}</td>',
    ]
    anchor = instance_anchor(entry["host"], entry["start"])
    return f'<tr id="{esc(anchor)}">{"".join(cells)}</tr>'


def _add_back(back: AddBackEntry | None) -> str:
    if back is None:
        return "<td>-</td>"
    if back["seconds"] is None:
        shown = "not taken back"
    else:
        shown = bounded(back["seconds"], back["seconds_lo"], back["seconds_hi"])
    if back["budget"] is not None:
        verdict = f": {back['verdict']}" if back["verdict"] else ""
        shown += f"; worst {seconds(back['budget'])}{verdict}"
    if back["early"]:
        shown += f"; {back['early']} early"
    return f'<td class="num">{esc(shown)}</td>'


def restart_lines(section: RestartsSection | None) -> list[str]:
    """Each restarted apiserver as a table: T1 with its bound and the signals that set it,
    then each LB's add-back with its bound beside the LB's worst."""
    if not section:
        return []
    rows = []
    for e in section["instances"]:
        t1 = f"{bounded(e['t1'], e['t1_lo'], e['t1_hi'])} ({e['t1_lo_by']}; {e['t1_hi_by']})"
        for b in e["lbs"]:
            rows.append(
                [
                    e["label"],
                    e["holder"] or "-",
                    t1,
                    b["lb"],
                    bounded(b["seconds"], b["seconds_lo"], b["seconds_hi"]),
                    seconds(b["budget"]),
                    str(b["early"]),
                ]
            )
    headers = ["instance", "identity", "T1 [bound] (set by)", "lb", "add-back [bound]",
               "worst", "early"]  # fmt: skip
    return ["", "restarted apiservers (add-back: from T1 to the LB's first answer from it):",
            *table(headers, rows)]  # fmt: skip
