"""`prober lab --scenario upgrade`: the probers through what an upgrade does to a cluster.

An upgrade rolls every kube-apiserver (the operator's new revision), then the machine-config
operator drains each node and reboots it, which takes its apiserver down once more. The lab
runs its probers as pods on the masters' "nodes" and plays both phases:
- a drain deletes a Deployment's pod with its log and starts a replacement on another node;
  it leaves a DaemonSet's pod alone;
- a reboot stops every container on the node (SIGTERM, as the kubelet does) while its
  apiserver shuts down, then starts them again: the pod is the same, one previous log is kept;
- every container's stdout and stderr go through the node's kubelet (`lab.infra.kubelet`), which
  rotates them at the size asked for.

The pods are the design of `deploy/` (DaemonSets, `event_log_stdout: compact`) beside one
pod of the design before it (a Deployment echoing every record), so each run shows what each
keeps. At the end `gather` copies what a gather step could read, `oc logs` and `oc logs
--previous` of the pods that still exist, into `gathered/pods/`; the judgement reads that
alone (`lab.run`), and `survival` holds it against what each container wrote.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from prober.core.models import LB
from prober.lab.infra.cluster import Apiserver, LabCluster
from prober.lab.infra.cpu_load import CpuMeter, Load
from prober.lab.infra.daemons import start_daemon, wait_ready
from prober.lab.infra.kubelet import PodLogs
from prober.lab.infra.processes import ManagedProcess, ProcessError, ProcessGroup

Workload = Literal["DaemonSet", "Deployment"]
NAMESPACE = "prober"
STOP_TIMEOUT = 30.0  # the daemon drains in `drain_timeout` (5 s); a loaded machine is slower
# Three daemons share the machine with the cluster: unless told otherwise they sample with one
# worker each (a 0.1 s gap in windows) and a quiet rate not scaled below QUIET_FLOOR. At the
# default two workers and a scaled quiet rate, the apiservers' TLS handshakes missed the LBs'
# scaled health checks (0.1 s at scale 0.05) and the LBs marked healthy servers down.
QUIET_FLOOR = 0.25
UPGRADE_WORKERS = 1
# Nor do they burst (`core.burst`): three daemons' bursts of ~40 fresh connections each, as
# the LBs switch together, made the same false markdowns beside two CPU burners (10 windows
# with failed requests). This scenario is about what survives an upgrade, not how tight a
# bound is.
UPGRADE_BURSTS = {"burst_parallel": 0}
# And they run niced: in a cluster a prober pod requests a fraction of a core beside an
# apiserver that requests several, and the kernel's CPU shares follow the requests.
NICE = 10


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One prober pod the upgrade runs: the workload it belongs to, the master it is
    scheduled on, the LBs it probes and how much of its event log goes to stdout."""

    name: str
    workload: Workload
    node: str
    lbs: tuple[LB, ...]
    stdout: str  # event_log_stdout


# The lab's localhost target is master-0's apiserver: the pod probing it lives there.
PODS = (
    PodSpec("prober-master-0", "DaemonSet", "master-0", (LB.EXTERNAL, LB.LOCALHOST), "compact"),
    PodSpec(
        "prober-master-1", "DaemonSet", "master-1", (LB.INTERNAL, LB.SERVICE_NETWORK), "compact"
    ),
    PodSpec("prober-deployment", "Deployment", "master-2", (LB.EXTERNAL,), "all"),
)


@dataclass(slots=True)
class Pod:
    spec: PodSpec
    name: str
    node: str
    logs: PodLogs
    process: ManagedProcess | None = None
    containers: list[str] = field(default_factory=list)  # process names, oldest first
    deleted: bool = False

    @property
    def workload(self) -> Workload:
        return self.spec.workload


ConfigFor = Callable[[tuple[LB, ...], str, Path, str], dict[str, object]]


class UpgradeLab:
    def __init__(
        self,
        cluster: LabCluster,
        group: ProcessGroup,
        out: Path,
        config_for: ConfigFor,
        *,
        log_max_size: int,
        say: Callable[[str], None],
        pods: list[Pod] | None = None,
    ) -> None:
        self.cluster, self.group, self.out = cluster, group, out
        self._config_for = config_for
        self._max_size = log_max_size
        self.say = say
        self.pods: list[Pod] = [] if pods is None else pods  # every pod that ran, deleted too

    def _new_pod(self, spec: PodSpec, name: str, node: str) -> Pod:
        uid = str(uuid.uuid4())
        logs = PodLogs(self.out / "nodes" / node / "pods", NAMESPACE, name, uid)
        logs.max_size = self._max_size
        pod = Pod(spec, name, node, logs)
        self.pods.append(pod)
        return pod

    async def start(self) -> None:
        present = {*self.cluster.lbs, LB.LOCALHOST}
        for spec in PODS:
            if any(lb in present for lb in spec.lbs):
                await self._start_container(self._new_pod(spec, spec.name, spec.node))

    async def _start_container(self, pod: Pod) -> None:
        container = pod.logs.start_container()
        process_name = f"{pod.name}-{container.restart}"
        lbs = tuple(lb for lb in pod.spec.lbs if lb in {*self.cluster.lbs, LB.LOCALHOST})
        event_log = self.out / f"{process_name}.jsonl"
        config = self._config_for(lbs, pod.spec.stdout, event_log, pod.name)
        path = self.out / f"{process_name}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))

        def tee(stream: str, line: bytes) -> None:
            container.write(stream, line, time.time())

        pod.process, _ = await start_daemon(
            self.group, process_name, path, tee, nice=NICE, enter=self.cluster.enter_client
        )
        pod.containers.append(process_name)
        await wait_ready(pod.process)

    async def _stop_container(self, pod: Pod) -> None:
        if pod.process is None:
            return
        pod.process.send_signal(signal.SIGTERM)
        code = await pod.process.wait(STOP_TIMEOUT)
        if code != 0:
            raise ProcessError(f"{pod.name}: prober run exited with {code} on SIGTERM")
        pod.process = None

    def on(self, node: str) -> list[Pod]:
        return [p for p in self.pods if p.node == node and not p.deleted]

    async def drain(self, node: str) -> None:
        """Evict what a drain evicts: Deployment pods (deleted, replaced elsewhere)."""
        for pod in self.on(node):
            if pod.workload != "Deployment":
                self.say(f"drain {node}: {pod.name} ({pod.workload}) stays")
                continue
            await self._stop_container(pod)
            pod.logs.delete()
            pod.deleted = True
            elsewhere = self._other_node(node)
            replacement = self._new_pod(pod.spec, f"{pod.spec.name}-{len(self.pods)}", elsewhere)
            self.say(
                f"drain {node}: {pod.name} evicted and deleted, {replacement.name} on {elsewhere}"
            )
            await self._start_container(replacement)

    def _other_node(self, node: str) -> str:
        nodes = [s.hostname for s in self.cluster.apiservers]
        return nodes[(nodes.index(node) + 1) % len(nodes)]

    async def reboot(self, server: Apiserver) -> None:
        """The node goes down with its apiserver and every container on it, and comes back."""
        node = server.hostname
        delay = self.cluster.platform.shutdown_delay
        self.say(f"reboot {node}: its apiserver shuts down (delay {delay:.1f} s), its pods stop")
        await self.cluster.shutdown(server)
        for pod in self.on(node):
            await self._stop_container(pod)
        await self.cluster.wait_exit(server, self.cluster.platform.graceful_termination + 30)
        await self.cluster.restart(server)
        for pod in self.on(node):
            self.say(f"reboot {node}: {pod.name}'s container restarts")
            await self._start_container(pod)

    async def roll(self, server: Apiserver) -> None:
        """The kube-apiserver operator's new revision: one apiserver terminates and returns."""
        self.say(f"{server.hostname}: new revision, SIGTERM")
        await self.cluster.shutdown(server)
        await self.cluster.wait_exit(server, self.cluster.platform.graceful_termination + 30)
        await self.cluster.restart(server)

    async def stop(self) -> None:
        for pod in self.pods:
            if not pod.deleted:
                await self._stop_container(pod)

    def gather(self, into: Path) -> list[Path]:
        """What a gather step reads: `oc logs`, and `--previous` after a restart, of every pod
        that still exists, as `<pod>_<container>[.previous].log` (prober-gather's names)."""
        into.mkdir(parents=True, exist_ok=True)
        written = []
        for pod in self.pods:
            if pod.deleted:
                continue
            container = pod.logs.container
            for suffix, data in (
                ("", pod.logs.read_current()),
                (".previous", pod.logs.read_previous()),
            ):
                if data is not None:
                    path = into / f"{pod.name}_{container}{suffix}.log"
                    path.write_bytes(data)
                    written.append(path)
        return written

    def describe(self) -> list[dict[str, object]]:
        """Every pod that ran, for `gathered/pods.json`: what a gather's `oc get pods` and a
        reader of the artifacts would know of them (deleted ones were gone by then)."""
        return [
            {
                "pod": pod.name,
                "workload": pod.workload,
                "node": pod.node,
                "containers": pod.containers,
                "deleted": pod.deleted,
            }
            for pod in self.pods
        ]


async def run_upgrade(lab: UpgradeLab, rollouts: int | None, warm_up: float) -> Load:
    """Start the pods, play the upgrade, stop them and gather; how busy the machine was."""
    lab.say(f"starting prober pods: {', '.join(p.name for p in PODS)}")
    await lab.start()
    meter = CpuMeter(None)  # several daemons, one after another: the machine's share only
    meter.start()
    await asyncio.sleep(warm_up + 1.0)  # samples before the first shutdown bound T0
    await play_upgrade(lab, rollouts)
    await lab.cluster.settle()
    await asyncio.sleep(2.0)  # the restarted server's first answers close its window
    load = meter.stop()
    await lab.stop()
    gathered = lab.out / "gathered"
    found = lab.gather(gathered / "pods")
    lab.say(f"gathered {len(found)} pod logs, as oc logs (and --previous) read them")
    (gathered / "pods.json").write_text(json.dumps(lab.describe(), indent=2) + "\n")
    return load


async def play_upgrade(lab: UpgradeLab, rollouts: int | None) -> None:
    """Phase 1: the operator rolls `rollouts` apiservers (all); phase 2: each node is drained
    and rebooted in turn."""
    for server in lab.cluster.apiservers[:rollouts]:
        await lab.roll(server)
    for server in lab.cluster.apiservers:
        await lab.drain(server.hostname)
        await lab.reboot(server)
