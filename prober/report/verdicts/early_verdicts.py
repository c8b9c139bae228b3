"""The other edge as a JUnit test per LB, from summary.json's `restarts` (`results.restarts`),
and the one line that tells a reader which edge of a restart broke.

`... should not route to an apiserver before it can serve` fails on any early failure through
the LB: an answer that failed from a restarted instance in its first seconds after its
`/readyz` went true (the bug of openshift/kubernetes #2730). It passes where the LB took a
restarted instance back and met none, and is skipped where it took none back. The direct
path (localhost) is no LB: nothing chose the server there, so it is never judged.
"""

from __future__ import annotations

from collections.abc import Iterable

from prober.core.models import LB
from prober.report.results.causes import Cause
from prober.report.schema.types import RestartLBEntry, SummaryDocument
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, plural


def judge_early(summary: SummaryDocument) -> list[Verdict]:
    section = summary.get("restarts")
    if section is None:
        return []
    return [_verdict(e) for e in section["lbs"] if e["lb"] != LB.LOCALHOST]


def _verdict(e: RestartLBEntry) -> Verdict:
    case = CaseId(Case.BEFORE_IT_CAN_SERVE, LB(e["lb"]))
    observed = float(e["early"])
    if e["early"]:
        message = (
            f"{plural(e['early'], 'request')} {Cause.EARLY.words} (cause {Cause.EARLY}): it "
            f"sent them in the apiserver's first seconds after /readyz went true: {e['text']}"
        )
        return Verdict(
            case, None, Status.FAILED, message, (e["text"],), observed, 0.0, str(Cause.EARLY)
        )
    if not e["taken_back"]:
        message = f"it took no restarted apiserver back in the run: {e['text']}"
        return Verdict(case, None, Status.SKIPPED, message, (), observed, 0.0)
    return Verdict(case, None, Status.PASSED, e["text"], (), observed, 0.0)


def explain_restarts(summary: SummaryDocument) -> list[str]:
    """One line per LB for `explained`."""
    section = summary.get("restarts")
    if section is None:
        return []
    return [f"{summary['platform']} {e['text']}" for e in section["lbs"]]


def edges_line(verdicts: Iterable[Verdict]) -> str:
    """Which edge of a restart broke, in one line: the shutdown's (an LB kept routing to a
    server going away) or the add-back's (an LB routed to one that could not serve yet)."""
    failed = [v for v in verdicts if v.status is Status.FAILED]
    early = early_lbs(failed)
    shutdown = [v for v in failed if v.key is not None and v.id.case is not Case.SAMPLED]
    if not early and not shutdown:
        return "edges: nothing failed at either edge of a restart"
    parts = []
    if shutdown:
        parts.append(f"shutdown edge (readyz false): {len(shutdown)} LB tests failed")
    if early:
        lbs = ", ".join(early)
        parts.append(f"add-back edge (readyz true too early): routed before it could serve: {lbs}")
    return "edges: " + "; ".join(parts)


def early_lbs(verdicts: Iterable[Verdict]) -> list[str]:
    """The LBs whose add-back test failed: they routed to an apiserver before it could serve."""
    return [
        str(v.id.lb)
        for v in verdicts
        if v.id.case is Case.BEFORE_IT_CAN_SERVE and v.status is Status.FAILED
    ]
