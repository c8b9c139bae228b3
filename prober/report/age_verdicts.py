"""Upstream's 20 % rule as a JUnit test per LB, from summary.json's `connection_ages`
(`report.connection_ages` has the findings).

`... should fail only connections opened in the last 20 % of the shutdown delay` is passed
where the rule held, failed where it broke, skipped where it is undecided or untested, and
skipped where it broke on an LB whose settings reset established flows when it marks a server
down (the AWS NLB's connection termination, HAProxy's `shutdown-sessions`): its connections
opened before T0 are cut at its detection by design, which its budget test judges
(`budget_verdicts`); the message says so, with the counts. So a default run on a platform
whose LBs keep flows fails it only where a connection opened before the mark really failed.
"""

from __future__ import annotations

from prober.core.budgets import Flows, Platform
from prober.core.models import LB
from prober.report.documents import AgeFindingEntry, SummaryDocument
from prober.report.verdicts import Status, Verdict

TWENTY_PERCENT = (
    "[sig-api-machinery] load-balancer/{lb} should fail only connections opened in the last "
    "20 % of the shutdown delay"
)
# What resets a platform's flows, in its own words (`core.budgets` cites the sources).
RESETS_BY = {
    "aws": "the NLB's connection termination on deregistration",
    "metal": "HAProxy's on-marked-down shutdown-sessions",
}


def judge_ages(summary: SummaryDocument, profile: Platform | None) -> list[Verdict]:
    """The 20 % rule's test per LB the section has a finding for."""
    section = summary.get("connection_ages")
    if section is None:
        return []
    return [_verdict(f, profile) for f in section["findings"]]


def _verdict(f: AgeFindingEntry, profile: Platform | None) -> Verdict:
    name = TWENTY_PERCENT.format(lb=f["lb"])
    rule, text = f["rule"], f["text"]
    observed = float(sum(f["breaking"].values()))
    if rule == "held":
        return Verdict(name, None, None, Status.PASSED, text, (), observed, 0.0)
    if rule != "broken":
        why = "the bounds cannot tell" if rule == "undecided" else "nothing to judge"
        return Verdict(name, None, None, Status.SKIPPED, f"{text} ({why})", (), observed, 0.0)
    lb = LB(f["lb"])
    if profile is not None and any(p.lb is lb and p.flows is Flows.RESET for p in profile.lbs):
        how = RESETS_BY.get(profile.name, "by its settings")
        why = (
            f"{text}. Not judged: on {profile.name} this LB resets established connections "
            f"when it marks a server down ({how}), so connections opened before T0 are cut "
            "at its detection by design; its budget test judges when"
        )
        return Verdict(name, None, None, Status.SKIPPED, why, (text,), observed, 0.0)
    return Verdict(name, None, None, Status.FAILED, text, (text,), observed, 0.0)


def explain_ages(summary: SummaryDocument) -> list[str]:
    """One line per LB for `explained`: the finding, the platform named."""
    section = summary.get("connection_ages")
    if section is None:
        return []
    return [f"{summary['platform']} {f['text']}" for f in section["findings"]]
