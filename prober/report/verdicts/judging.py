"""The verdicts stage of `prober analyze`: the history loaded, then every test of a run
judged against it and what its LBs promise, into its summary (`verdicts`, `explained`).

The tests, in the order junit.xml lists them: stop routing and availability against the
history (`verdicts`), the watches (`watch_verdicts`), the health-check budgets and the delay
(`budget_verdicts`), the LB's resets (`reset_verdicts`), the 20 % rule (`age_verdicts`),
the other edge of a restart (`early_verdicts`), the daemon's sampling of each window
(`coverage_verdicts`), slow but up (`latency_verdicts`), and the whole run recorded
(`run_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prober.core.budgets import Platform
from prober.report.history.thresholds import Thresholds, load_thresholds
from prober.report.schema.types import CountsEntry, SummaryDocument, VerdictEntry
from prober.report.verdicts.age_verdicts import explain_ages, judge_ages
from prober.report.verdicts.budget_verdicts import explain, judge_budgets
from prober.report.verdicts.counts import counts
from prober.report.verdicts.coverage_verdicts import judge_coverage
from prober.report.verdicts.early_verdicts import edges_line, explain_restarts, judge_early
from prober.report.verdicts.latency_verdicts import judge_latency
from prober.report.verdicts.reset_verdicts import judge_resets
from prober.report.verdicts.run_verdict import whole_run
from prober.report.verdicts.verdicts import Status, Verdict, judge
from prober.report.verdicts.watch_verdicts import RunContext, WatchAllowed, judge_watches


@dataclass(frozen=True, slots=True)
class Judged:
    verdicts: list[Verdict]
    warnings: list[str]
    edges: str  # which edge of a restart broke, in one line


def load_history(thresholds: Thresholds | Path | None) -> Thresholds | None:
    """The history to judge against: loaded already, read from its thresholds.json, or none."""
    return load_thresholds(thresholds) if isinstance(thresholds, Path) else thresholds


def judge_run(
    summary: SummaryDocument,
    promised: Platform | None,
    history: Thresholds | None,
    watch_allowed: WatchAllowed,
) -> Judged:
    """Every test of the summarised run; `promised`: what its LBs promise (`core.budgets`)."""
    platform = summary["platform"]
    warnings = []
    if history is not None and not history.covers(platform):
        warnings.append(
            f"{history.source}: no history for platform {platform!r} (it has "
            f"{', '.join(history.platforms) or 'nothing'}): verdicts that need it are skipped"
        )
    run = RunContext(summary["windows"], promised)
    verdicts = judge(summary, history) + judge_watches(summary.get("watches"), watch_allowed, run)
    verdicts += judge_budgets(summary, promised)
    verdicts += judge_resets(summary, promised)
    verdicts += judge_ages(summary, promised, verdicts)
    verdicts += judge_early(summary)
    verdicts += judge_coverage(summary)
    verdicts += judge_latency(summary)
    verdicts += whole_run(summary)
    summary["verdicts"] = [verdict_entry(v) for v in verdicts]
    summary["explained"] = [
        *explain(summary, verdicts, promised),
        *explain_ages(summary),
        *explain_restarts(summary),
    ]
    summary["counts"] = counts_entry(verdicts)
    return Judged(verdicts, warnings, edges_line(verdicts))


def verdict_entry(verdict: Verdict) -> VerdictEntry:
    """A verdict as summary.json lists it: its test's name and what it judged, by field."""
    case = verdict.id
    return {
        "name": verdict.name,
        "status": verdict.status.value,
        "message": verdict.message,
        "observed": verdict.observed,
        "allowed": verdict.allowed,
        "lb": None if case.lb is None else str(case.lb),
        "protocol": None if case.protocol is None else str(case.protocol),
        "connection": case.connection,
        "cause": verdict.cause,
    }


def counts_entry(verdicts: list[Verdict]) -> CountsEntry:
    """junit.xml's counts (`junit.counts`), for summary.json's top level."""
    c = counts(verdicts)
    return {
        "tests": c[Status.FAILED] + c[Status.PASSED] + c[Status.SKIPPED],
        "failed": c[Status.FAILED],
        "passed": c[Status.PASSED],
        "skipped": c[Status.SKIPPED],
        "by_design": c[Status.BY_DESIGN],
    }
