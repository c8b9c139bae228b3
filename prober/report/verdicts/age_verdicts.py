"""Upstream's 20 % rule as a JUnit test per LB, from summary.json's `connection_ages`
(`report.results.connection_ages` has the findings).

`... should fail only connections opened in the last 20 % of the shutdown delay` is passed
where the rule held, failed where it broke, skipped where it is undecided or untested, and
skipped where it broke on an LB whose settings reset established flows when it marks a server
down (the AWS NLB's connection termination, HAProxy's `shutdown-sessions`): its connections
opened before T0 are cut at its detection by design, which the reset test judges
(`reset_verdicts`); skipped too where the failures that broke it failed their own causes'
tests (`causes`): a failed request is judged by one test. The message says which.
"""

from __future__ import annotations

from collections.abc import Sequence

from prober.core.budgets import Flows, Platform
from prober.core.models import LB
from prober.report.schema.types import AgeFindingEntry, SummaryDocument
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.reset_verdicts import RESETS_BY
from prober.report.verdicts.verdicts import Status, Verdict


def judge_ages(
    summary: SummaryDocument, profile: Platform | None, judged: Sequence[Verdict] = ()
) -> list[Verdict]:
    """The 20 % rule's test per LB the section has a finding for; `judged`: the run's other
    verdicts, whose failures it does not judge again."""
    section = summary.get("connection_ages")
    if section is None:
        return []
    return [_verdict(f, profile, judged) for f in section["findings"]]


def _verdict(f: AgeFindingEntry, profile: Platform | None, judged: Sequence[Verdict]) -> Verdict:
    lb = LB(f["lb"])
    case = CaseId(Case.TWENTY_PERCENT, lb)
    rule, text = f["rule"], f["text"]
    observed = float(sum(f["breaking"].values()))
    if rule == "held":
        return Verdict(case, None, Status.PASSED, text, (), observed, 0.0)
    if rule != "broken":
        why = "the bounds cannot tell" if rule == "undecided" else "nothing to judge"
        return Verdict(case, None, Status.SKIPPED, f"{text} ({why})", (), observed, 0.0)
    if profile is not None and any(p.lb is lb and p.flows is Flows.RESET for p in profile.lbs):
        how = RESETS_BY.get(profile.name, "by its settings")
        why = (
            f"{text}. Not judged here: on {profile.name} this LB resets established "
            f"connections when it marks a server down ({how}), so connections opened before "
            f"T0 are cut at its detection by design; those resets are judged by "
            f"'{CaseId(Case.NO_RESETS, lb).name}'"
        )
        return Verdict(case, None, Status.SKIPPED, why, (text,), observed, 0.0)
    others = [v.name for v in judged if v.status is Status.FAILED and v.id.lb is lb]
    if others:
        why = (
            f"{text}. Not judged here: its failed requests are judged by their causes' tests, "
            + "; ".join(f"'{n}'" for n in others)
        )
        return Verdict(case, None, Status.SKIPPED, why, (text,), observed, 0.0)
    return Verdict(case, None, Status.FAILED, text, (text,), observed, 0.0)


def explain_ages(summary: SummaryDocument) -> list[str]:
    """One line per LB for `explained`: the finding, the platform named."""
    section = summary.get("connection_ages")
    if section is None:
        return []
    return [f"{summary['platform']} {f['text']}" for f in section["findings"]]
