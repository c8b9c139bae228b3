"""The same-node requests (`results.samenode`) as a table: in the text of `prober analyze` and
in report.html. Per LB x protocol x connection: how many reached the prober's own node's
apiserver, its latest answer after T0 with the bound, and their disruption."""

from __future__ import annotations

from collections import defaultdict

from prober.report.format.svg import esc
from prober.report.format.tables import bounded, seconds, table
from prober.report.schema.keys import Key, entry_key
from prober.report.schema.types import SummaryDocument

HEADERS = ["lb", "protocol", "connection", "same-node", "answered late [bound]", "disruption"]


def same_node_rows(summary: SummaryDocument) -> list[list[str]]:
    """Per LB x protocol x connection with same-node requests: how many, the latest answer
    after T0 (its bound) of the node's own apiserver, their disruption."""
    section = summary.get("same_node")
    if section is None:
        return []
    reactions: dict[Key, list[tuple[float, float | None, float | None]]] = defaultdict(list)
    for window in section["windows"]:
        for ws in window["streams"]:
            if ws["reaction"] is not None:
                lo, hi = ws.get("reaction_lo"), ws.get("reaction_hi")
                reactions[entry_key(ws)].append((ws["reaction"], lo, hi))
    rows = []
    for entry in section["streams"]:
        key = entry_key(entry)
        worst = max(reactions.get(key, []), default=None, key=lambda r: r[0])
        rows.append(
            [
                *(str(k) for k in key),
                str(entry["samples"]),
                "-" if worst is None else bounded(*worst),
                seconds(entry["disruption_seconds"]),
            ]
        )
    return rows


def _said(summary: SummaryDocument) -> str:
    section = summary["same_node"]
    hairpin = ", ".join(section["hairpins"])
    through = f"; {hairpin} hairpins from it, so what it lost is the node's too" if hairpin else ""
    return (
        f"requests that reached the prober's own node {section['node']}'s apiserver through "
        f"an LB{through}: not the LB's, so none of it is in the LB's results"
    )


def same_node_lines(summary: SummaryDocument) -> list[str]:
    """The same-node requests as a table, for `describe`; nothing where there were none."""
    rows = same_node_rows(summary)
    if not rows:
        return []
    return ["", f"same-node: {_said(summary)}:", *table(HEADERS, rows)]


def same_node_table(summary: SummaryDocument) -> str:
    """The same-node requests as a table, for report.html."""
    rows = same_node_rows(summary)
    if not rows:
        return "<p>No request reached the prober's own node through an LB.</p>"
    head = "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in HEADERS) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<p>{esc(_said(summary))}.</p><table>{head}{body}</table>"
