"""A lab run's measuring phase: the cluster up, the daemon (or the upgrade's probers) started,
the scenario played, everything that measured stopped; `Companion` is a daemon beside the
main one with its own judge (`--prober-on`'s, a benchmark's control)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from prober.core.models import LB
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.cpu_load import CpuMeter, Load
from prober.lab.infra.daemons import (
    DAEMON,
    daemon_config,
    snapshot_metrics,
    start_daemon,
    wait_ready,
)
from prober.lab.infra.kubelet import DEFAULT_MAX_SIZE
from prober.lab.infra.options import LabOptions
from prober.lab.infra.processes import ManagedProcess, ProcessError, ProcessGroup
from prober.lab.result import Judging, LabResult
from prober.lab.scenarios.delayed import delay_lb
from prober.lab.scenarios.eviction import EVICT_AT, evict
from prober.lab.scenarios.informers import Informer, start_informers
from prober.lab.scenarios.playbook import Say, TakeDown, play, wind_down
from prober.lab.scenarios.upgrade import (
    QUIET_FLOOR,
    UPGRADE_BURSTS,
    UPGRADE_WORKERS,
    Pod,
    UpgradeLab,
    run_upgrade,
)

WARM_UP = 3.0  # samples before the first shutdown bound T0 from below


class Companion(Protocol):
    """A daemon beside the main one: started once that one samples, stopped with it, and
    judged after the scenario's checks."""

    async def start(self, stage: Stage) -> ManagedProcess: ...

    def check(self, judging: Judging, result: LabResult) -> LabResult: ...


@dataclass(frozen=True, slots=True)
class Stage:
    """What one lab run's measuring phase works with."""

    options: LabOptions
    cluster: LabCluster
    group: ProcessGroup
    out: Path
    say: Say
    take_down: TakeDown
    companions: tuple[Companion, ...] = ()
    pods: list[Pod] = field(default_factory=list)  # the upgrade's prober pods, as they start
    informers: list[Informer] = field(default_factory=list)  # upstream's: client-go's


Measure = Callable[[Stage], Awaitable[Load]]


async def one_daemon(stage: Stage, *, evicted: bool = False) -> Load:
    """The daemon through the scenario, with its companions; `evicted`: SIGKILLed inside
    the first shutdown window and replaced, as a node drain evicts it."""
    cluster, group, out, say = stage.cluster, stage.group, stage.out, stage.say
    platform = cluster.platform
    config = daemon_config(cluster, stage.options, out / "events.jsonl")
    config_path = out / "prober.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    daemon, port = await start_daemon(group, DAEMON, config_path, enter=cluster.enter_client)
    # For whoever watches the run from outside (a Prometheus scraping the daemon, say).
    (out / "daemon.json").write_text(json.dumps({"metrics_port": port, "pid": daemon.pid}))
    await wait_ready(daemon)
    beside = [await companion.start(stage) for companion in stage.companions]
    binary = cluster.backend.informer
    if binary is not None:
        say("starting client-go's informers beside it, per LB, protocol and sync mode")
        stage.informers.extend(await start_informers(cluster, group, binary, ("default", DAEMON)))
    meter = CpuMeter(daemon.pid)
    meter.start()
    await asyncio.sleep(WARM_UP * platform.time_scale + 1.0)

    async def eviction() -> None:
        nonlocal daemon, port
        await asyncio.sleep(EVICT_AT * platform.shutdown_delay)
        say("the daemon: SIGKILL (evicted), and a new one in its place")
        daemon, port = await evict(group, daemon, config, out, enter=cluster.enter_client)

    await play(cluster, stage.take_down, stage.options.shutdowns, say,
               eviction if evicted else None)  # fmt: skip
    await cluster.settle()
    await wind_down(cluster)
    await asyncio.sleep(stage.options.hold or 0.0)  # `--hold`: the kept connections rebalance
    load = meter.stop()
    snapshot_metrics(cluster, port, out / "metrics.prom")
    for each in (daemon, *beside):
        each.send_signal(signal.SIGTERM)
        code = await each.wait(30)
        if code != 0:
            raise ProcessError(f"prober run exited with {code}; see {each.stderr_path}")
    return load


async def delayed_daemon(stage: Stage) -> Load:
    """delayed-lb: the relay stands in front of its LB first, so the daemon's URL is its."""
    await delay_lb(stage.cluster, stage.group, stage.options.delayed_lb or LB.EXTERNAL)
    return await one_daemon(stage)


async def evicted_daemon(stage: Stage) -> Load:
    return await one_daemon(stage, evicted=True)


async def upgrade_probers(stage: Stage) -> Load:
    """Three daemons as pods on the masters, drained and rebooted with them
    (`lab.scenarios.upgrade`)."""
    cluster = stage.cluster

    def config_for(
        lbs: tuple[LB, ...], stdout: str, event_log: Path, name: str
    ) -> dict[str, object]:
        # Three daemons share the machine: see `upgrade.QUIET_FLOOR`.
        config = daemon_config(cluster, stage.options, event_log, lbs=lbs, stdout=stdout,
                               quiet_floor=QUIET_FLOOR, default_workers=UPGRADE_WORKERS,
                               heartbeat=name)  # fmt: skip
        return config | UPGRADE_BURSTS

    rotate = stage.options.log_max_size or DEFAULT_MAX_SIZE
    lab = UpgradeLab(cluster, stage.group, stage.out, config_for, log_max_size=rotate,
                     say=stage.say, pods=stage.pods)  # fmt: skip
    warm_up = WARM_UP * cluster.platform.time_scale
    return await run_upgrade(lab, stage.options.shutdowns, warm_up=warm_up)
