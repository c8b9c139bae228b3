"""The daemon's own completeness as a JUnit test per request stream, from summary.json's
`coverage` (`results.coverage`, `core.coverage`).

`... should have sampled each shutdown window without a gap` fails when, in any shutdown
window, the stream's gap largest for its schedule passed its limit: `limit_factor` (4) times
the mean gap the schedule asked for then. The limit is independent of the measurement: not
the reaction's bound, which is computed from the same gaps and so would only widen with them.
The failure names the gap's length, the window (apiserver, T0) and its place in run time and
wall time, so a reader can find the pause, the blocked writer or the starved loop in the
daemon's own logs. It passes with the worst gap and the share of ticks taken, and is skipped
for a stream that met no shutdown window, and for one whose every answer came from the
prober's own node (a hairpin: it measured no LB, so its gaps bound nothing of one). A log
written before the daemon counted its ticks has no such test (as the whole-run test,
`run_verdict`): it could never pass there.
"""

from __future__ import annotations

from collections import Counter

from prober.core.models import StreamId
from prober.report.schema.keys import Key, entry_key
from prober.report.schema.types import (
    CoverageSection,
    CoverageStreamEntry,
    CoverageWindowEntry,
    StreamEntry,
    SummaryDocument,
)
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, unless_same_node

Seen = tuple[CoverageWindowEntry, CoverageStreamEntry]


def judge_coverage(summary: SummaryDocument) -> list[Verdict]:
    """One verdict per request stream, in the summary's stream order."""
    section = summary.get("coverage")
    if section is None:  # a log before the daemon counted it: no such test, as `run_verdict`
        return []
    per_key = Counter(entry_key(s) for s in summary["streams"])
    verdicts = []
    for stream in summary["streams"]:
        key = entry_key(stream)
        target = StreamId.parse(stream["stream"]).target if per_key[key] > 1 else None
        # a hairpin's windows measured no LB: its gaps bound nothing of one
        verdicts.append(unless_same_node(summary, key, _verdict(stream, key, target, section)))
    return verdicts


def _verdict(
    stream: StreamEntry, key: Key, target: str | None, section: CoverageSection
) -> Verdict:
    case, name = CaseId.of(Case.SAMPLED, key, target), stream["stream"]
    seen = [(w, s) for w in section["windows"] for s in w["streams"] if s["stream"] == name]
    if not seen:
        return Verdict(case, name, Status.SKIPPED, "no shutdown window in the run to sample")
    details = tuple(_line(w, s) for w, s in seen)
    over = [(w, s) for w, s in seen if s["within"] is False]
    if over:
        window, worst = max(over, key=_ratio)
        message = f"{len(over)} of {len(seen)} windows had a gap past its limit; worst: "
        message += _line(window, worst)
        return Verdict(case, name, Status.FAILED, message, details, worst["gap"], worst["limit"])
    window, worst = max(seen, key=_ratio)
    message = f"every window sampled within the limit; worst: {_line(window, worst)}"
    return Verdict(case, name, Status.PASSED, message, details, worst["gap"], worst["limit"])


def _ratio(seen: Seen) -> float:
    gap, scheduled = seen[1]["gap"], seen[1]["scheduled"]
    return 0.0 if gap is None else gap / scheduled if scheduled else gap


def _line(window: CoverageWindowEntry, s: CoverageStreamEntry) -> str:
    """One window's coverage of the stream, the gap with its length, window and place."""
    where = f"in the shutdown window of {window['instance']} (apiserver {window['host']}, "
    where += f"T0 {window['t0']:.3f} s)"
    taken = f"{s['taken']} of {s['due']} ticks due taken"
    if s["gap"] is None or s["gap_start"] is None or s["gap_end"] is None:
        return f"{where}: {taken}, no gap measured"
    gap = (
        f"a {s['gap']:.3f} s gap from {s['gap_start']:.3f} s to {s['gap_end']:.3f} s run time "
        f"({s['gap_start_ts']} to {s['gap_end_ts']})"
    )
    if s["limit"] is None or s["scheduled"] is None:
        return f"{where}: {gap}; {taken}"
    limit = f"limit {s['limit']:.3f} s: {s['limit'] / s['scheduled']:g} x the scheduled "
    limit += f"{s['scheduled']:.3f} s"
    return f"{where}: {gap}, {limit}; {taken}"
