"""Same-node results in the reports: what reached the prober's own node's apiserver, apart
from the LBs' (`core.samenode`).

summary.json gains `apiservers` (APIServerID -> node, as the daemon learnt it from the
identity Leases) and `same_node`:

    {"node", "hairpins": [lb], "windows": [window as in "windows"],
     "streams": [{"stream", "lb", "protocol", "connection", "samples",
                  "disruption_seconds", "intervals": [...]}]}

`hairpins` names the LBs that hairpin from the prober's node (it runs an apiserver, and the
platform's table or the cluster's `lb_settings` says so): their lost requests are the node's
too. A window here is the prober's own node's apiserver's shutdown as the same-node requests
saw it, and a reaction in it is how long after T0 that apiserver still answered them: through
a hairpin, until it stopped listening, whatever the LB did.

An LB whose every request was same-node was never measured from here: its tests are skipped
with that reason (`same_node_only`), never passed. An LB with some same-node requests is
judged on the others.
"""

from __future__ import annotations

from collections import defaultdict

from prober.core.budgets import hairpins
from prober.core.models import LB
from prober.core.numbers import micro_floats
from prober.report.documents import SameNodeEntry, SameNodeStreamEntry, SummaryDocument
from prober.report.keys import Key, entry_key
from prober.report.replay import Replay
from prober.report.runs import RunLog
from prober.report.summary import forgiven_intervals, interval_entry, same_node_counts, window_entry
from prober.report.svg import esc
from prober.report.tables import bounded, seconds, table


def add_same_node(summary: SummaryDocument, log: RunLog, result: Replay) -> None:
    """The run's `apiservers` and `same_node` sections, into its summary."""
    node = log.run.node
    counts = same_node_counts(log)
    spent: dict[str, float] = defaultdict(float)
    forgiven = forgiven_intervals(result)
    for interval in result.same_node_intervals:
        spent[interval.stream] += interval.seconds
    streams: list[SameNodeStreamEntry] = [
        {
            "stream": entry["stream"],
            "lb": entry["lb"],
            "protocol": entry["protocol"],
            "connection": entry["connection"],
            "samples": counts[entry["stream"]],
            "disruption_seconds": spent[entry["stream"]],
            "intervals": [
                interval_entry(i, i not in forgiven)
                for i in result.same_node_intervals
                if i.stream == entry["stream"]
            ],
        }
        for entry in summary["streams"]
        if counts[entry["stream"]] or spent[entry["stream"]]
    ]
    on_master = node is not None and node in log.apiservers.values()
    lbs = hairpins(summary["platform"], log.run.lb_settings) if on_master else frozenset()
    section: SameNodeEntry = {
        "node": node,
        "hairpins": sorted(str(lb) for lb in lbs),
        "windows": [window_entry(w) for w in result.same_node_windows],
        "streams": streams,
    }
    summary["apiservers"] = dict(sorted(log.apiservers.items()))
    summary["same_node"] = micro_floats(section)


def same_node_only(summary: SummaryDocument, key: Key) -> str | None:
    """Why an LB's tests of this key are skipped: every request of it was same-node; None
    where some request measured the LB (or none was sent at all)."""
    entries = [s for s in summary["streams"] if entry_key(s) == key]
    same = sum(s.get("same_node", 0) for s in entries)
    if key[0] is LB.LOCALHOST or same == 0 or same < sum(s.get("samples", 0) for s in entries):
        return None
    node = summary.get("same_node", {}).get("node")
    return (
        f"every request through {key[0]} reached the prober's own node {node}'s apiserver "
        "(a hairpin): nothing here measured the LB; see same_node"
    )


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
