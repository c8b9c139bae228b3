"""The run in words, for the terminal and CI logs (`prober analyze`, `prober lab`): what its
summary and its verdicts say, read from them, never worked out again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from prober.report.documents.age_tables import age_lines
from prober.report.documents.coverage_tables import coverage_lines
from prober.report.documents.latency_table import latency_lines
from prober.report.documents.own_late_table import own_late_lines
from prober.report.documents.pattern_table import pattern_lines
from prober.report.documents.rebalance_table import rebalance_lines
from prober.report.documents.restart_table import restart_lines
from prober.report.documents.samenode_tables import same_node_lines
from prober.report.format.tables import bounded, fold, seconds, table
from prober.report.results.watch_syncs import syncs_text
from prober.report.verdicts.analysis import RunAnalysis
from prober.report.verdicts.counts import counts_text
from prober.report.verdicts.identity import Case
from prober.report.verdicts.run_verdict import abrupt_end
from prober.report.verdicts.verdicts import Status, Verdict, plural

# The bracket is read by people who never saw the tool: say once what it is.
BOUND_NOTE = "[bound]: where the true reaction lies, given the sampling; ? = not bounded"
COLUMNS_NOTE = (
    "within budget, before it stops, available: the outcomes of those tests, named in full in "
    "junit.xml"
)


def describe(analysis: RunAnalysis) -> list[str]:
    """The run as text: what the summary and the verdicts say."""
    s, run, result = analysis.summary, analysis.log.run, analysis.replay
    samples = sum(x["samples"] for x in s["streams"])
    lines = [
        f"run {run.run_id} · platform {s['platform']} · prober {run.version} · "
        f"{result.end_t:.1f} s · {samples} requests · {len(result.windows)} shutdown windows",
        *filter(None, [abrupt_end(analysis.verdicts)]),
        analysis.edges,
        "",
    ]
    if result.windows:
        rows = [
            [
                entry["instance"],
                w.host,
                f"{w.delay:g} s",
                f"{w.t0:.2f} s",
                f"± {(w.t0_hi - w.t0_lo) / 2:.2f} s",
                w.closed_by.value,
                str(sum(x.late for x in w.streams)),
                str(sum(x.failures for x in w.streams)),
            ]
            for w, entry in zip(result.windows, s["windows"], strict=True)
        ]
        headers = [
            "instance",
            "apiserver",
            "delay",
            "T0",
            "uncertainty",
            "closed by",
            "late",
            "failed",
        ]
        lines += [*table(headers, rows), ""]
    rows = []
    for worst in s["worst"]:
        key = (worst["lb"], worst["protocol"], worst["connection"])
        mine = [v for v in analysis.verdicts if v.key == key]
        rows.append(
            [
                *key,
                bounded(worst["reaction"], worst["reaction_lo"], worst["reaction_hi"]),
                _outcomes(mine, Case.WITHIN_BUDGET),
                _outcomes(mine, Case.ROUTING),
                seconds(worst["disruption_seconds"]),
                _outcomes(mine, Case.AVAILABLE),
            ]
        )
    # Each test's outcome under a word of its name: junit.xml says them in full.
    headers = ["lb", "protocol", "connection", "worst reaction [bound]", "within budget",
               "before it stops", "disruption", "available"]  # fmt: skip
    lines += table(headers, rows)
    lines += [BOUND_NOTE, COLUMNS_NOTE]
    lines += pattern_lines(s)
    lines += same_node_lines(s)
    resent: Counter[str] = Counter()
    for stream in s["streams"]:
        resent.update(stream.get("retried", {}))
    if resent:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(resent.items()))
        lines.append(
            f"sent again once on a new connection, as Go's transport would: {sum(resent.values())}"
            f" ({reasons}); answered then, they are no disruption"
        )
    stopped = sum(stream.get("stopped", 0) for stream in s["streams"])
    if stopped:
        lines.append(
            f"cut by the daemon's stop, past its grace: {plural(stopped, 'request')}"
            " (class stopped: counted, no disruption, no failure)"
        )
    explained = s.get("explained", [])
    if explained:
        lines += ["", "what each LB's own settings promise, and what it did:"]
        lines += [folded for line in explained for folded in fold(line)]
    lines += age_lines(s.get("connection_ages"))
    lines += own_late_lines(s.get("own_late"))
    lines += restart_lines(s.get("restarts"))
    lines += coverage_lines(s.get("coverage"))
    lines += rebalance_lines(s.get("rebalancing"))
    lines += latency_lines(s.get("latency"))
    lines += watch_lines(s.get("watches"), analysis.verdicts)
    for verdict in analysis.verdicts:
        said = {Status.FAILED: "FAIL", Status.BY_DESIGN: "BY DESIGN"}.get(verdict.status)
        if said is not None:
            lines += ["", f"{said} {verdict.name}"]
            lines += [folded for d in verdict.details for folded in fold(d, "  ")]
    lines += ["", f"verdicts (junit.xml): {counts_text(analysis.verdicts)}"]
    return lines


def watch_lines(section: Mapping[str, Any] | None, verdicts: Sequence[Verdict]) -> list[str]:
    """The watch streams as a table: what each saw and its three tests' outcomes."""
    if not section or not section["streams"]:
        return []
    rows = []
    for entry in section["streams"]:
        mine = [v.status.value for v in verdicts if v.stream == entry["stream"]]
        ends = sum(n for how, n in entry["ends"].items() if how != "stopped")
        rows.append(
            [
                entry["lb"],
                entry["protocol"],
                str(entry["established"]),
                str(ends),
                str(entry["doomed"]),
                seconds(entry["reestablish"]["max"]),
                seconds(entry["blind_seconds"]),
                syncs_text(entry.get("syncs")),
                "/".join(mine) or "-",
            ]
        )
    headers = ["lb", "protocol", "watches", "ends", "doomed", "re-establish max", "blind",
               "syncs", "re-establish/not doomed/not blind"]  # fmt: skip
    return ["", *table(headers, rows)]


def _outcomes(verdicts: Sequence[Verdict], case: Case) -> str:
    """The outcomes of that test's verdicts, every target's, joined by "/"; "-" where none."""
    return "/".join(sorted({v.status.value for v in verdicts if v.id.case is case})) or "-"
