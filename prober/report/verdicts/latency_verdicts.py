""" "Slow but up" as a JUnit test per stream, from summary.json's `latency`
(`results.latency`, `core.latency.slow_but_up`).

`... should answer in the shutdown windows about as fast as outside them` fails where the
stream's in-window p99 answer time passed `SLOW_MULTIPLE` times its quiet p99 and the floor:
an LB that kept answering, slowly, through the rollout, which no availability test sees. It is
skipped where the run had too few answers to compare (`MIN_QUIET`, `MIN_IN_WINDOW`): a run
with no shutdown window has none inside one; and, as every LB test, where every request of the
stream reached the prober's own node (`verdicts.unless_same_node`).
"""

from __future__ import annotations

from typing import cast

from prober.core.models import StreamId
from prober.report.results.latency import LatencySection, LatencyStreamEntry
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, unless_same_node


def judge_latency(summary: SummaryDocument) -> list[Verdict]:
    section = cast(LatencySection | None, summary.get("latency"))
    if section is None:
        return []
    verdicts = []
    for entry in section["streams"]:
        # a hairpin's answers, all from the prober's own node, timed no LB
        key = StreamId.parse(entry["stream"]).key
        verdicts.append(unless_same_node(summary, key, _verdict(entry)))
    return verdicts


def _verdict(e: LatencyStreamEntry) -> Verdict:
    stream = StreamId.parse(e["stream"])
    case = CaseId.of(Case.NOT_SLOW, stream.key)
    observed = e["in_windows"]["p99"]
    if e["slow_but_up"]:
        message = f"slow but up: {e['why']}"
        return Verdict(case, e["stream"], Status.FAILED, message, (e["why"],), observed)
    if e["why"].startswith("not compared"):
        return Verdict(case, e["stream"], Status.SKIPPED, e["why"], (), observed)
    return Verdict(case, e["stream"], Status.PASSED, e["why"], (), observed)
