"""What a scenario holds its run to: a reader that makes the result from what the daemons
wrote (their event log, their pod logs, or what a gather kept), then checks, each a judge of
one claim against the truth, folded over the result in the scenario's order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import cast

from prober.core.watch import WATCH
from prober.lab.infra.daemons import daemon_logs
from prober.lab.infra.instances import all_instances
from prober.lab.infra.options import LabError
from prober.lab.judges import nodeloss
from prober.lab.judges.answered import check_answered
from prober.lab.judges.compare import compare, findings, problems, wall_offset
from prober.lab.judges.informers import differences, judge_informers
from prober.lab.judges.lossblind import watched
from prober.lab.judges.podlogs import PodLogJudgement, judge_pod_logs, write_reports
from prober.lab.judges.restartcheck import check_restarts, junit_problems
from prober.lab.judges.slowness import judge_slowness
from prober.lab.judges.stallcheck import check_stalls
from prober.lab.judges.survival import problems as survival_problems
from prober.lab.judges.survival import sampled_by_any, survival, unsampled_findings
from prober.lab.judges.watchcheck import check_run
from prober.lab.judges.watchcuts import cuts, joins
from prober.lab.result import Judging, LabResult
from prober.report.analyze import analyze_runs
from prober.report.results.latency import LatencySection

Reader = Callable[[Judging], LabResult]
Check = Callable[[Judging, LabResult], LabResult]


def event_log(judging: Judging, *, lb_fails: bool = False) -> LabResult:
    """The daemon's event log analyzed as `prober analyze` does, each LB's reaction to each
    shutdown held against the truth; `lb_fails`: a scenario whose LB fails its budget on
    purpose (the bound must still hold the truth)."""
    j, options = judging, judging.options
    (analysis, *_), stats = analyze_runs([j.out / "events.jsonl"], platform=options.platform)
    written = write_reports(analysis, stats, j.out)
    offset = wall_offset(analysis.log)
    # Tearing the lab down may start shutdowns of its own after the daemon stopped.
    during = [s for s in j.shutdowns if offset <= s.t0 < offset + analysis.replay.end_t]
    windows = [w for w in analysis.log.windows if not w.same_node]  # the LBs' (`core.trackers`)
    results = compare(sorted(during, key=lambda s: s.t0), windows, j.lbs, offset)
    last = analysis.log.last_summary
    return LabResult(
        j.platform,
        options.scenario,
        j.out,
        analysis,
        tuple(results),
        tuple(problems(results, options.tolerance, expect_failures=lb_fails)),
        tuple(written),
        findings=tuple(findings(results)),
        load=j.load,
        streams=last.streams if last is not None else (),
        tolerance=options.tolerance,
        lb_truth=tuple(j.lbs.values()),
    )


def pod_logs(j: Judging) -> LabResult:
    """An evicted daemon: what a CI gather step collects, the daemons' pod logs, judged."""
    written: list[Path] = []
    judgement = PodLogJudgement(j.options.platform, j.options.tolerance)
    logs = daemon_logs(j.out / "logs")
    analyses, results, found = judge_pod_logs(
        list(j.shutdowns), logs, j.out / "pod-logs", judgement, written
    )
    return LabResult(
        j.platform,
        j.options.scenario,
        j.out,
        analyses[-1],
        tuple(results),
        tuple(found),
        tuple(written),
        load=j.load,
        tolerance=j.options.tolerance,
    )


def gathered(j: Judging) -> LabResult:
    """The truth against what the gather read, and only that: every shutdown seen by some
    prober, every window's T0 and reactions inside their bounds, what each container kept."""
    written: list[Path] = []
    sampled = sampled_by_any(j.pods, j.out / "logs")
    judgement = PodLogJudgement(j.options.platform, j.options.tolerance, j.lbs, sampled)
    folder = j.out / "gathered"
    logs = sorted((folder / "pods").glob("*.log"))
    if not logs:
        raise LabError(f"{folder}: the gather found no pod log")
    analyses, results, found = judge_pod_logs(
        list(j.shutdowns), logs, folder / "analysis", judgement, written
    )
    fates = survival(j.pods, j.out / "logs", analyses)
    best = max(analyses, key=lambda a: len(a.replay.windows))
    return LabResult(
        j.platform,
        j.options.scenario,
        j.out,
        best,
        tuple(results),
        (*found, *survival_problems(fates)),
        tuple(written),
        findings=(*unsampled_findings(j.shutdowns, sampled, analyses), *findings(results)),
        load=j.load,
        tolerance=j.options.tolerance,
        fates=tuple(fates),
    )


def watch_streams(j: Judging, r: LabResult) -> LabResult:
    """Every watch the daemon established, found in its server's truth and judged there."""
    watches = check_run(j.truths, r.analysis, r.offset, j.options.tolerance,
                        joins=joins(j.cluster), cuts=cuts(j.cluster, j.lbs))  # fmt: skip
    return dataclasses.replace(r.adding(watches.problems, watches.findings), watches=watches)


def watch_stalls(j: Judging, r: LabResult) -> LabResult:
    """Each watch-list stall the daemon measured against its server's record of the watch."""
    stalls = check_stalls(j.truths, r.analysis, r.offset, j.options.tolerance,
                          joins=joins(j.cluster), cuts=cuts(j.cluster, j.lbs))  # fmt: skip
    return r.adding(stalls.problems, stalls.findings)


def informers(j: Judging, r: LabResult) -> LabResult:
    """Upstream's: the daemon's watch streams beside client-go's informers."""
    replay = r.analysis.replay
    sides = judge_informers(j.informers, j.out / "logs", replay.of_kind(WATCH), r.offset,
                            replay.end_t)  # fmt: skip
    return dataclasses.replace(r.adding(findings=differences(sides)), informers=tuple(sides))


def disrupted(j: Judging, r: LabResult) -> LabResult:
    """A crash cuts requests: no disruption interval at all means the daemon missed it."""
    if r.analysis.replay.intervals:
        return r
    return r.adding(["a crash should disrupt requests, and no disruption interval was seen"])


def node_losses(j: Judging, r: LabResult) -> LabResult:
    """What each stream saw while a node was gone, against when each LB marked it down."""
    log, replay, offset = r.analysis.log, r.analysis.replay, r.offset
    seen = watched(replay, r.analysis.summary)
    losses = [
        nodeloss.judge(
            outage, log.samples, replay.intervals, lbs=j.lbs, offset=offset, watched=seen
        )
        for outage in j.cluster.outages
        if outage.back is not None
    ]
    found = [
        p
        for loss in losses
        for p in nodeloss.problems(loss, log.windows, j.lbs, j.options.tolerance)
    ]
    return dataclasses.replace(r.adding(found), losses=tuple(losses))


def answered(j: Judging, r: LabResult) -> LabResult:
    """No sample recorded as failed that a server had answered."""
    offset = r.offset
    resetting = {kind for kind, lb in j.cluster.lbs.items() if lb.profile.reset_on_down}
    crashes = [wall - offset for _, wall in j.cluster.crashes]
    gone = [(o.lost - offset, (o.back or o.lost) - offset) for o in j.cluster.outages
            if o.back is not None]  # fmt: skip
    check = check_answered(r.analysis.log.samples, j.out / "cluster", resetting, crashes, gone)
    found = [f"answered by a server, recorded as failed: {a}" for a in check.answered_failed]
    return dataclasses.replace(r.adding(found), answered=check)


def restarts(j: Judging, r: LabResult) -> LabResult:
    """Each restart's T1, its LBs' add-back and its early answers against the truth, and the
    JUnit verdicts that speak of them."""
    replay = r.analysis.replay
    instances = all_instances(j.truths)
    check = check_restarts(
        instances,
        j.lbs,
        replay.instances,
        r.analysis.log.samples,
        offset=r.offset,
        end_t=replay.end_t,
        tolerance=j.options.tolerance,
    )
    found = [*check.problems, *junit_problems(check, r.analysis.verdicts)]
    return dataclasses.replace(r.adding(found), restarts=check, instances=tuple(instances))


def slow_but_up(j: Judging, r: LabResult) -> LabResult:
    """delayed-lb: the delayed LB's streams, and only they, slow but up."""
    relay = j.cluster.delayed
    if relay is None:
        raise LabError("slow_but_up: the scenario stood no relay in front of an LB")
    section = cast(LatencySection | None, r.analysis.summary.get("latency"))
    judged = judge_slowness(section, relay.lb, relay.delay)
    return r.adding(judged.problems, judged.findings)


# What every scenario whose daemon writes one event log is held to.
MEASURED: tuple[Check, ...] = (watch_streams, informers, answered, restarts)
