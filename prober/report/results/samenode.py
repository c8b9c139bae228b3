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
with that reason (`verdicts.same_node_only`), never passed. An LB with some same-node
requests is judged on the others. `samenode_tables` shows them in the text and report.html.
"""

from __future__ import annotations

from collections import defaultdict

from prober.core.budgets import hairpins
from prober.core.numbers import micro_floats
from prober.report.replay.replay import Replay
from prober.report.replay.runs import RunLog
from prober.report.results.summary import (
    forgiven_intervals,
    interval_entry,
    same_node_counts,
    window_entry,
)
from prober.report.schema.types import SameNodeEntry, SameNodeStreamEntry, SummaryDocument


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
