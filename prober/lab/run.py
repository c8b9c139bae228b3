"""One lab run: stand up the cluster, start the daemon, play the scenario, judge the result.

The daemon is the real `prober run`, as a subprocess with a generated configuration; what it
measured is read back from its event log and held against the truth (`prober.lab.compare`).
Everything the run produced lands in its output directory, which it lists at the end.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from prober.common.errors import UserError
from prober.core.models import LB, StreamCounters
from prober.core.watch import WATCH
from prober.lab import nodeloss
from prober.lab.answered import AnsweredCheck, check_answered
from prober.lab.backends import ApiserverBackend, backend
from prober.lab.cluster import LabCluster
from prober.lab.compare import (
    TOLERANCE,
    ShutdownResult,
    compare,
    findings,
    problems,
    wall_offset,
)
from prober.lab.cpu_load import CpuMeter, Load
from prober.lab.daemons import (
    DAEMON,
    daemon_config,
    daemon_logs,
    snapshot_metrics,
    start_daemon,
    wait_ready,
)
from prober.lab.datapath import choose
from prober.lab.eviction import EVICT_AT, PodLogJudgement, evict, judge_pod_logs, write_reports
from prober.lab.informers import Informer, Side, differences, judge_informers, start_informers
from prober.lab.instances import InstanceTruth, all_instances
from prober.lab.lossblind import watched
from prober.lab.nodeloss import NodeLoss
from prober.lab.onnode import NodeResult, NodeRun, check_prober_on, judge_node, start_node_prober
from prober.lab.onnode import hairpins as hairpins_of
from prober.lab.options import LabOptions
from prober.lab.platforms import PLATFORMS, Platform, as_built, slow_lb
from prober.lab.policies import compare_control, control_event_log, start_control
from prober.lab.processes import ProcessError, ProcessGroup
from prober.lab.restartcheck import RestartCheck, check_restarts, junit_problems
from prober.lab.scenarios import EARLY_FOR, SCENARIOS, early_flags, play, wind_down
from prober.lab.survival import ContainerFate, sampled_by_any, survival, unsampled_findings
from prober.lab.survival import problems as survival_problems
from prober.lab.truth import LbTruth, ShutdownTruth, lab_truth
from prober.lab.upgrade import (
    QUIET_FLOOR,
    UPGRADE_BURSTS,
    UPGRADE_WORKERS,
    Pod,
    UpgradeLab,
    run_upgrade,
)
from prober.lab.watchcheck import WatchCheck, check_run
from prober.lab.watchcuts import cuts, joins
from prober.report.analyze import analyze_runs
from prober.report.verdicts.analysis import RunAnalysis

TARGET_DELAY = 25.0  # seconds of shutdown delay a default (scaled) run aims for
WARM_UP = 3.0  # samples before the first shutdown bound T0 from below


@dataclass(frozen=True, slots=True)
class LabResult:
    platform: Platform
    scenario: str
    out: Path
    analysis: RunAnalysis
    results: tuple[ShutdownResult, ...]
    problems: tuple[str, ...]
    written: tuple[Path, ...]
    findings: tuple[str, ...] = ()
    load: Load | None = None  # how busy the daemon and the machine were
    streams: tuple[StreamCounters, ...] = ()  # per stream at the end: the gaps achieved
    tolerance: float = TOLERANCE
    answered: AnsweredCheck | None = None  # failed samples the servers had answered
    fates: tuple[ContainerFate, ...] = ()  # upgrade: what each container kept, by the gather
    comparison: tuple[str, ...] = ()  # --control: both policies side by side, as printed
    losses: tuple[NodeLoss, ...] = ()  # node-loss: what each stream saw while a node was gone
    watches: WatchCheck | None = None  # the watch streams against the truth
    node: NodeResult | None = None  # --prober-on: the daemon on a master, against the truth
    instances: tuple[InstanceTruth, ...] = ()  # every apiserver process (`lab.instances`)
    lb_truth: tuple[LbTruth, ...] = ()  # each LB's state changes
    restarts: RestartCheck | None = None  # T1, add-back and early against the truth
    informers: tuple[Side, ...] = ()  # upstream's: the daemon's watches beside client-go's


def default_scale(platform: Platform) -> float:
    return min(1.0, TARGET_DELAY / platform.shutdown_delay) if platform.shutdown_delay else 1.0


def profile_for(options: LabOptions) -> Platform:
    base = PLATFORMS[options.platform]
    if options.watch_grace is not None:
        base = dataclasses.replace(base, watch_grace=options.watch_grace)
    scale = options.time_scale if options.time_scale is not None else default_scale(base)
    platform = as_built(base.scaled(scale))
    if options.scenario != "slow-lb":
        return platform
    return slow_lb(platform, options.slow_lb, options.slow_interval)


def slow_text(platform: Platform, kind: LB) -> str:
    """Which LB `slow-lb` made slow, and by how much: the line a reader of its FAILs needs."""
    check = platform.lb(kind).check
    assert check is not None
    return (
        f"slow-lb: {kind} checks /readyz every {check.interval:.2f} s (timeout "
        f"{check.timeout:.2f} s, {check.fall} failures to mark down): it may take "
        f"{check.worst_detection:.2f} s, past the {platform.shutdown_delay:.2f} s delay"
    )


class LabError(UserError, RuntimeError):
    """The lab cannot run as asked."""


async def run_lab(options: LabOptions, out: Path, say: object = print) -> LabResult:
    # Absolute from here on: the lab writes its paths into files other processes read from
    # other folders (a kubeconfig's CA resolves against the kubeconfig's own folder).
    out = out.absolute()
    platform = profile_for(options)
    if options.evict and options.scenario == "upgrade":
        raise LabError("--evict: the upgrade scenario drains and reboots its own probers")
    if options.control and (options.evict or options.scenario == "upgrade"):
        raise LabError("--control: one daemon beside another, not with --evict or upgrade")
    if out.exists() and any(out.iterdir()):
        raise LabError(f"{out}: output directory is not empty; each run needs its own")
    kernel, note = choose(options.platform, options.lb)
    if options.scenario == "node-loss" and not kernel:
        raise LabError("--scenario node-loss: a node can vanish only on the kernel path")
    if options.prober_on is not None:
        check_prober_on(options, hairpins_of(platform), kernel=kernel)
    restart_flags = _restart_flags(options, platform)
    apiservers = _backend(options)
    out.mkdir(parents=True, exist_ok=True)
    if note is not None:
        _say(say, note)
    if options.scenario == "slow-lb":
        _say(say, slow_text(platform, options.slow_lb))
    event_log = out / "events.jsonl"
    async with ProcessGroup(out / "logs") as group:
        cluster = LabCluster(
            platform,
            out / "cluster",
            group,
            options.servers,
            options.goaway_chance,
            kernel=kernel,
            restart_flags=restart_flags,
            backend=apiservers,
        )
        pods: list[Pod] = []
        nodes: list[NodeRun] = []
        informers: list[Informer] = []
        try:
            load = await _measure(_Run(options, cluster, group, out, say, pods, nodes, informers))
        finally:
            cluster.close()
    result = _judge(options, platform, cluster, out, event_log=event_log, load=load, pods=pods,
                    informers=informers)  # fmt: skip
    for node in nodes:  # --prober-on
        judged = judge_node(node, cluster, tolerance=options.tolerance)
        result = dataclasses.replace(
            result,
            node=judged,
            problems=(*result.problems, *judged.problems),
            findings=(*result.findings, *judged.findings),
            written=(*result.written, *judged.written),
        )
    return result


# What upstream's apiserver cannot play: the fake's knobs (a readiness that lies, a hang),
# and the upgrade's kubelet, which runs the fake's probers as pods on fake nodes.
FAKE_ONLY = ("early-ready", "upgrade")


def _backend(options: LabOptions) -> ApiserverBackend:
    if options.apiserver == "upstream":
        if options.scenario in FAKE_ONLY:
            raise LabError(
                f"--scenario {options.scenario}: needs the fake apiserver's knobs; upstream's "
                f"plays {', '.join(s for s in SCENARIOS if s not in FAKE_ONLY)}"
            )
        if options.evict or options.prober_on is not None:
            raise LabError("--evict, --prober-on: with the fake apiserver only, for now")
    return backend(options.apiserver)


def _restart_flags(options: LabOptions, platform: Platform) -> tuple[str, ...]:
    """early-ready: each restarted apiserver says ready before it can serve."""
    if options.scenario != "early-ready":
        if options.early_for is not None or options.early_answer is not None:
            raise LabError("--early-for/--early-answer: only with --scenario early-ready")
        return ()
    seconds = EARLY_FOR if options.early_for is None else options.early_for
    return early_flags(seconds * platform.time_scale, options.early_answer or "500")


@dataclass(frozen=True, slots=True)
class _Run:
    """What one lab run's measuring phase works with."""

    options: LabOptions
    cluster: LabCluster
    group: ProcessGroup
    out: Path
    say: object
    pods: list[Pod]  # the upgrade's prober pods, filled as they start
    nodes: list[NodeRun]  # --prober-on: the daemon on a master, once it started
    informers: list[Informer]  # upstream's: client-go's informers beside the daemon


async def _measure(run: _Run) -> Load:
    """Stand the cluster up, run the daemon through the scenario, stop the daemon."""
    options, cluster, group, out, say = run.options, run.cluster, run.group, run.out, run.say
    platform = cluster.platform
    kind = "kernel (nftables DNAT)" if cluster.kernel else "HAProxy"
    _say(say, f"starting {options.servers} apiservers and {len(platform.lbs)} {kind} LBs")
    await cluster.start()
    if options.scenario == "upgrade":
        return await _measure_upgrade(run)
    config_path = out / "prober.yaml"
    config = daemon_config(cluster, options, out / "events.jsonl")
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    daemon, port = await start_daemon(group, DAEMON, config_path, enter=cluster.enter_client)
    # For whoever watches the run from outside (a Prometheus scraping the daemon, say).
    (out / "daemon.json").write_text(json.dumps({"metrics_port": port, "pid": daemon.pid}))
    await wait_ready(daemon)
    control = None
    if options.control:
        control_config = daemon_config(
            cluster, options, control_event_log(out), heartbeat="prober-control"
        )
        control = await start_control(
            control_config, group, control_event_log(out), enter=cluster.enter_client
        )
    if options.prober_on is not None:
        run.nodes.append(await start_node_prober(cluster, options, group, out, options.prober_on))
    binary = cluster.backend.informer
    if binary is not None:
        _say(say, "starting client-go's informers beside it, per LB, protocol and sync mode")
        run.informers.extend(await start_informers(cluster, group, binary, ("default", DAEMON)))
    meter = CpuMeter(daemon.pid)
    meter.start()
    await asyncio.sleep(WARM_UP * platform.time_scale + 1.0)

    async def eviction() -> None:
        nonlocal daemon, port
        await asyncio.sleep(EVICT_AT * platform.shutdown_delay)
        _say(say, "the daemon: SIGKILL (evicted), and a new one in its place")
        daemon, port = await evict(group, daemon, config, out, enter=cluster.enter_client)

    after_first = eviction if options.evict else None
    await play(cluster, options.scenario, options.shutdowns, lambda t: _say(say, t), after_first)
    await cluster.settle()
    await wind_down(cluster)
    load = meter.stop()
    snapshot_metrics(cluster, port, out / "metrics.prom")
    for each in (daemon, control, *(node.process for node in run.nodes)):
        if each is not None:
            each.send_signal(signal.SIGTERM)
            code = await each.wait(30)
            if code != 0:
                raise ProcessError(f"prober run exited with {code}; see {each.stderr_path}")
    return load


async def _measure_upgrade(run: _Run) -> Load:
    options, cluster = run.options, run.cluster

    def config_for(
        lbs: tuple[LB, ...], stdout: str, event_log: Path, name: str
    ) -> dict[str, object]:
        # Three daemons share the machine: see `upgrade.QUIET_FLOOR`.
        config = daemon_config(
            cluster,
            options,
            event_log,
            lbs=lbs,
            stdout=stdout,
            quiet_floor=QUIET_FLOOR,
            default_workers=UPGRADE_WORKERS,
            heartbeat=name,
        )
        return config | UPGRADE_BURSTS

    lab = UpgradeLab(
        cluster,
        run.group,
        run.out,
        config_for,
        log_max_size=options.log_max_size,
        say=lambda text: _say(run.say, text),
        pods=run.pods,
    )
    return await run_upgrade(lab, options.shutdowns, warm_up=WARM_UP * cluster.platform.time_scale)


def _say(say: object, text: str) -> None:
    if callable(say):
        say(text)


def _judge(
    options: LabOptions,
    platform: Platform,
    cluster: LabCluster,
    out: Path,
    *,
    event_log: Path,
    load: Load,
    pods: Sequence[Pod],
    informers: Sequence[Informer] = (),
) -> LabResult:
    shutdowns, lbs = lab_truth(cluster.apiservers, cluster.lbs)
    if options.evict:
        return _judge_evicted(options, platform, out, shutdowns, load)
    if options.scenario == "upgrade":
        return _judge_gathered(options, platform, out, shutdowns, lbs=lbs, load=load, pods=pods)
    (analysis, *_), stats = analyze_runs([event_log], platform=options.platform)
    written = write_reports(analysis, stats, out)
    offset = wall_offset(analysis.log)
    # Tearing the lab down may start shutdowns of its own after the daemon stopped.
    during = [s for s in shutdowns if offset <= s.t0 < offset + analysis.replay.end_t]
    shutdowns = sorted(during, key=lambda s: s.t0)
    windows = [w for w in analysis.log.windows if not w.same_node]  # the LBs' (`core.trackers`)
    results = compare(shutdowns, windows, lbs, offset)
    found = problems(results, options.tolerance, expect_failures=options.scenario == "slow-lb")
    truths = [server.truth_path for server in cluster.apiservers]
    watches = check_run(truths, analysis, offset, options.tolerance, joins=joins(cluster),
                        cuts=cuts(cluster, lbs))  # fmt: skip
    found += watches.problems
    watchers = judge_informers(informers, out / "logs", analysis.replay.of_kind(WATCH), offset,
                               analysis.replay.end_t)  # fmt: skip
    if options.scenario == "crash" and not analysis.replay.intervals:
        found.append("a crash should disrupt requests, and no disruption interval was seen")
    log, replay = analysis.log, analysis.replay
    over = [o for o in cluster.outages if o.back is not None]
    seen = watched(replay, analysis.summary)
    losses = [
        nodeloss.judge(outage, log.samples, replay.intervals, lbs=lbs, offset=offset, watched=seen)
        for outage in over
    ]
    for loss in losses:
        found += nodeloss.problems(loss, analysis.log.windows, lbs, options.tolerance)
    resetting = {kind for kind, lb in cluster.lbs.items() if lb.profile.reset_on_down}
    crashes = [wall - offset for _, wall in cluster.crashes]
    gone = [(o.lost - offset, (o.back or o.lost) - offset) for o in over]
    answered = check_answered(analysis.log.samples, out / "cluster", resetting, crashes, gone)
    found += [f"answered by a server, recorded as failed: {a}" for a in answered.answered_failed]
    instances = all_instances(truths)
    restarts = check_restarts(
        instances,
        lbs,
        replay.instances,
        log.samples,
        offset=offset,
        end_t=replay.end_t,
        tolerance=options.tolerance,
    )
    found += [*restarts.problems, *junit_problems(restarts, analysis.verdicts)]
    last = analysis.log.last_summary
    comparison: tuple[str, ...] = ()
    if options.control:
        comparison = compare_control(
            control_event_log(out),
            platform=options.platform,
            tolerance=options.tolerance,
            truth=(shutdowns, lbs),
            ours=(results, analysis.log),
        )
    return LabResult(
        platform,
        options.scenario,
        out,
        analysis,
        tuple(results),
        tuple(found),
        tuple(written),
        findings=(*findings(results), *watches.findings, *differences(watchers)),
        load=load,
        streams=last.streams if last is not None else (),
        tolerance=options.tolerance,
        answered=answered,
        comparison=comparison,
        losses=tuple(losses),
        watches=watches,
        instances=tuple(instances),
        lb_truth=tuple(lbs.values()),
        restarts=restarts,
        informers=tuple(watchers),
    )


def _judge_evicted(
    options: LabOptions, platform: Platform, out: Path, shutdowns: list[ShutdownTruth], load: Load
) -> LabResult:
    written: list[Path] = []
    judgement = PodLogJudgement(options.platform, options.tolerance)
    logs = daemon_logs(out / "logs")
    analyses, results, found = judge_pod_logs(shutdowns, logs, out / "pod-logs", judgement, written)
    return LabResult(
        platform,
        options.scenario,
        out,
        analyses[-1],
        tuple(results),
        tuple(found),
        tuple(written),
        load=load,
        tolerance=options.tolerance,
    )


def _judge_gathered(
    options: LabOptions,
    platform: Platform,
    out: Path,
    shutdowns: list[ShutdownTruth],
    *,
    lbs: Mapping[LB, LbTruth],
    load: Load,
    pods: Sequence[Pod],
) -> LabResult:
    """The truth against what the gather read, and only that: every shutdown seen by some
    prober, every window's T0 and reactions inside their bounds."""
    written: list[Path] = []
    sampled = sampled_by_any(pods, out / "logs")
    judgement = PodLogJudgement(options.platform, options.tolerance, lbs, sampled)
    gathered = out / "gathered"
    logs = sorted((gathered / "pods").glob("*.log"))
    if not logs:
        raise LabError(f"{gathered}: the gather found no pod log")
    analyses, results, found = judge_pod_logs(
        shutdowns, logs, gathered / "analysis", judgement, written
    )
    fates = survival(pods, out / "logs", analyses)
    found += survival_problems(fates)
    unsampled = unsampled_findings(shutdowns, sampled, analyses)
    best = max(analyses, key=lambda a: len(a.replay.windows))
    return LabResult(
        platform,
        options.scenario,
        out,
        best,
        tuple(results),
        tuple(found),
        tuple(written),
        findings=(*unsampled, *findings(results)),
        load=load,
        tolerance=options.tolerance,
        fates=tuple(fates),
    )
