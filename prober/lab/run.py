"""One lab run: stand up the cluster, start the daemon, play the scenario, judge the result.

The daemon is the real `prober run`, as a subprocess with a generated configuration; what it
measured is read back from its event log and held against the truth by the scenario's
checks (`prober.lab.registry`). Everything the run produced lands in its output directory,
which it lists at the end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from prober.lab.companions import NodeProber
from prober.lab.infra.backends import ApiserverBackend, backend
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.datapath import choose
from prober.lab.infra.options import LabError, LabOptions
from prober.lab.infra.platforms import PLATFORMS, Platform, as_built
from prober.lab.infra.processes import ProcessGroup
from prober.lab.infra.truth import lab_truth
from prober.lab.measure import Companion, Stage
from prober.lab.registry import SCENARIOS, Scenario, scenario_of
from prober.lab.result import Judging, LabResult
from prober.lab.scenarios.onnode import check_prober_on
from prober.lab.scenarios.onnode import hairpins as hairpins_of

__all__ = ["LabError", "LabOptions", "LabResult", "profile_for", "run_lab"]

TARGET_DELAY = 25.0  # seconds of shutdown delay a default (scaled) run aims for


def default_scale(platform: Platform) -> float:
    return min(1.0, TARGET_DELAY / platform.shutdown_delay) if platform.shutdown_delay else 1.0


def profile_for(options: LabOptions) -> Platform:
    base = PLATFORMS[options.platform]
    if options.watch_grace is not None:
        base = dataclasses.replace(base, watch_grace=options.watch_grace)
    scale = options.time_scale if options.time_scale is not None else default_scale(base)
    return SCENARIOS[options.scenario].shape(as_built(base.scaled(scale)), options)


async def run_lab(
    options: LabOptions, out: Path, say: object = print, companions: Sequence[Companion] = ()
) -> LabResult:
    """`companions`: daemons beside the main one, each judged by its own check after the
    scenario's (`--prober-on` adds its own)."""
    # Absolute from here on: the lab writes its paths into files other processes read from
    # other folders (a kubeconfig's CA resolves against the kubeconfig's own folder).
    out = out.absolute()
    scenario = scenario_of(options)
    platform = profile_for(options)
    if out.exists() and any(out.iterdir()):
        raise LabError(f"{out}: output directory is not empty; each run needs its own")
    kernel, note = choose(options.platform, options.lb)
    if scenario.kernel_only is not None and not kernel:
        raise LabError(f"--scenario {scenario.name}: {scenario.kernel_only}")
    beside = list(companions)
    if options.prober_on is not None:
        check_prober_on(options.prober_on, options.servers, hairpins_of(platform), kernel=kernel)
        beside.append(NodeProber(options.prober_on))
    apiservers = _backend(options, scenario)
    out.mkdir(parents=True, exist_ok=True)
    if note is not None:
        _say(say, note)
    if (announced := scenario.announce(platform, options)) is not None:
        _say(say, announced)
    async with ProcessGroup(out / "logs") as group:
        cluster = LabCluster(
            platform,
            out / "cluster",
            group,
            options.servers,
            options.goaway_chance,
            kernel=kernel,
            restart_flags=scenario.restart_flags(options, platform),
            start_flags=scenario.start_flags,
            backend=apiservers,
        )
        stage = Stage(options, cluster, group, out, lambda text: _say(say, text),
                      scenario.take_down, tuple(beside))  # fmt: skip
        try:
            kind = "kernel (nftables DNAT)" if cluster.kernel else "HAProxy"
            stage.say(f"starting {options.servers} apiservers and {len(platform.lbs)} {kind} LBs")
            await cluster.start()
            load = await scenario.measure(stage)
        finally:
            cluster.close()
    shutdowns, lbs = lab_truth(cluster.apiservers, cluster.lbs)
    judging = Judging(options, platform, cluster, out, load, stage.pods, stage.informers,
                      shutdowns, lbs)  # fmt: skip
    result = scenario.read(judging)
    for check in (*scenario.checks, *(c.check for c in beside)):
        result = check(judging, result)
    return result


def _backend(options: LabOptions, scenario: Scenario) -> ApiserverBackend:
    if options.apiserver == "upstream":
        if scenario.fake_only:
            plays = ", ".join(s.name for s in SCENARIOS.values() if not s.fake_only)
            raise LabError(
                f"--scenario {scenario.name}: needs the fake apiserver's knobs; upstream's "
                f"plays {plays}"
            )
        if options.prober_on is not None:
            raise LabError("--prober-on: with the fake apiserver only, for now")
    return backend(options.apiserver)


def _say(say: object, text: str) -> None:
    if callable(say):
        say(text)
