"""The daemon evicted in the middle of a shutdown window, as an upgrade's node drain evicts it:
SIGKILLed (a drain's eviction past its grace period ends the same way, and a kill leaves the
least behind), and a new daemon started in its place with a new event log (a new pod's
emptyDir: the old one is gone with its pod). What the lab then judges is only what CI's gather
step would collect: each daemon's stdout, its pod log, read by `prober analyze --pod-logs`.

Judged per shutdown: some run saw its window, and every run that saw it holds the true T0
inside the window's bound. Reactions are not judged here: a reaction that spans the kill is
bounded by neither daemon alone (the rollout scenario judges them without an eviction).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prober.core.models import LB
from prober.lab.infra.truth import LbTruth, ShutdownTruth
from prober.lab.judges.compare import ShutdownResult, compare, problems, wall_offset
from prober.report.analyze import analyze_runs, write_outputs
from prober.report.ci.origin import write_origin_files
from prober.report.replay.runs import ReadStats
from prober.report.verdicts.analysis import RunAnalysis


def judge_pod_logs(
    shutdowns: Sequence[ShutdownTruth],
    logs: Sequence[Path],
    reports: Path,
    options: PodLogJudgement,
    written: list[Path],
) -> tuple[list[RunAnalysis], list[ShutdownResult], list[str]]:
    """Each run of these pod logs (its reports written under REPORTS/RUN), every shutdown
    matched with each run's window for it (replayed where the log has samples: a killed daemon
    never logged the window it had open), and the problems."""
    analyses, stats = analyze_runs(logs, platform=options.platform, pod_logs=True)
    offsets = [wall_offset(a.log) for a in analyses]
    first = min(offsets)
    last = max(offset + a.replay.end_t for a, offset in zip(analyses, offsets, strict=True))
    results: list[ShutdownResult] = []
    found: list[str] = []
    # Tearing the lab down may start shutdowns of its own after the last daemon stopped.
    for shutdown in (s for s in shutdowns if first <= s.t0 < last):
        seen = []
        for analysis, offset in zip(analyses, offsets, strict=True):
            (result,) = compare([shutdown], analysis.replay.windows, options.lbs, offset)
            if result.window is not None:
                seen.append(result)
        if not seen and options.sampled(shutdown):
            found.append(f"{shutdown.hostname}: no run in the pod logs saw its shutdown window")
        results += seen
    found += problems(results, options.tolerance, expect_failures=False)
    for analysis in analyses:
        written += write_reports(analysis, stats, reports / analysis.log.run.run_id)
    return analyses, results, found


def write_reports(analysis: RunAnalysis, stats: ReadStats, out: Path) -> list[Path]:
    """What `prober analyze` writes, and beside it OpenShift CI's own files (`prober origin`)."""
    return [*write_outputs(analysis, stats, out), *write_origin_files(analysis.summary, out)]


@dataclass(frozen=True, slots=True)
class PodLogJudgement:
    platform: str
    tolerance: float
    # The LBs' truth, to judge each reaction too; empty: T0 alone (a reaction that spans a
    # SIGKILL is bounded by neither daemon alone).
    lbs: Mapping[LB, LbTruth] = field(default_factory=dict)
    # Whether any prober sampled the shutdown at all: one none did is missing from the pod
    # logs through no loss (its LB stopped routing there before a sample came).
    sampled: Callable[[ShutdownTruth], bool] = lambda _shutdown: True
