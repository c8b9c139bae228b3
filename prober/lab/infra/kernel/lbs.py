"""The kernel path's LBs as the lab drives them: the same face as `lab.infra.haproxy.HaproxyLB`.

`KernelLB` is a cloud LB: a VIP on the router DNATed by flow hash, steered by its own health
checker process (`kernel.checker`), whose JSON lines are its state changes. `KernelService` is
the service network: kube-proxy's DNAT of the ClusterIP in the client's namespace, whose
endpoints the lab changes itself, as the endpoint reconciler and the proxy's sync would.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from prober.core.models import LB
from prober.lab.infra.kernel.checker import Target
from prober.lab.infra.kernel.netns import Namespace, can_make_namespaces
from prober.lab.infra.kernel.nftables import Dispatch
from prober.lab.infra.kernel.topology import API_PORT, CLUSTER_IP, SERVICE_PORT, VIPS, LabNetwork
from prober.lab.infra.lbstate import ServerEvent, StateChanges
from prober.lab.infra.platforms import LBProfile
from prober.lab.infra.processes import ProcessError, ProcessGroup, announces

START_TIMEOUT = 20.0
CHECKER_NICE = -10  # root: the kernel path needs it anyway
TOOLS = ("nsenter", "ip", "nft", "conntrack")
_SEEDS = {LB.EXTERNAL: 0x5EED0001, LB.INTERNAL: 0x5EED0002, LB.SERVICE_NETWORK: 0x5EED0003}


def kernel_unavailable() -> str | None:
    """Why the kernel path cannot run here (None: it can), in one line."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian: apt-get install nftables conntrack)"
    problem = can_make_namespaces()
    if problem is not None:
        return f"cannot make a network namespace ({problem}); it needs root"
    return None


@dataclass(frozen=True, slots=True)
class KernelLB:
    """One health-checked pass-through LB."""

    profile: LBProfile
    targets: Sequence[Target]
    router: Namespace
    workdir: Path
    changes: StateChanges

    @classmethod
    def make(
        cls, profile: LBProfile, targets: Sequence[Target], router: Namespace, workdir: Path
    ) -> KernelLB:
        return cls(profile, targets, router, workdir, StateChanges(str(profile.lb)))

    @property
    def name(self) -> str:
        return str(self.profile.lb)

    @property
    def address(self) -> tuple[str, int]:
        return VIPS[self.profile.lb], API_PORT

    @property
    def events(self) -> list[ServerEvent]:
        return self.changes.events

    def config(self) -> dict[str, object]:
        check = self.profile.check
        if check is None:
            raise ValueError(f"{self.name}: a kernel LB needs a health check")
        dispatch = Dispatch(
            table=self.name.replace("-", "_"),
            hook="prerouting",
            vip=VIPS[self.profile.lb],
            port=API_PORT,
            target_port=API_PORT,
            seed=_SEEDS[self.profile.lb],
        )
        return {
            "name": self.name,
            "dispatch": asdict(dispatch),
            "targets": [asdict(t) for t in self.targets],
            "interval": check.interval,
            "timeout": check.timeout,  # floored by `platforms.as_built`
            "fall": check.fall,
            "rise": check.rise,
            "tls": check.tls,
            "fastinter": check.fastinter,
            "reset_on_down": self.profile.reset_on_down,
        }

    async def start(self, group: ProcessGroup) -> None:
        path = self.workdir / f"checker-{self.name}.json"
        path.write_text(json.dumps(self.config(), indent=2) + "\n")
        checker = [sys.executable, "-m", "prober.lab.infra.kernel.checker", str(path)]
        # A cloud LB's control plane does not share the nodes' CPUs: above the cluster's
        # processes, its checks (0.1 s timeouts at a time scale of 0.05) do not time out
        # for want of a core. nice execs, as nsenter does: the pid stays the checker's.
        argv = self.router.enter(["nice", "-n", str(CHECKER_NICE), *checker])
        proc = await group.start(f"checker-{self.name}", argv, on_line=self._on_line)
        await proc.wait_for_line(announces("ready"), START_TIMEOUT)

    def _on_line(self, line: str) -> None:
        try:
            record = json.loads(line)
            if record.get("event") != "state":
                return
            event = ServerEvent(
                float(record["wall"]), str(record["server"]), bool(record["up"]),
                str(record["reason"]), float(record.get("lag", 0.0)),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # not a state line; the log file keeps it
        self.changes.add(event)

    async def wait_for(
        self, server: str, up: bool, timeout: float, since: float = 0.0
    ) -> ServerEvent:
        return await self.changes.wait_for(server, up, timeout, since)

    async def server_up(self) -> dict[str, bool]:
        return self.changes.current([t.name for t in self.targets])

    async def set_serving(self, server: str, serving: bool) -> None:
        raise ProcessError(f"{self.name}: health-checked; its checker alone changes its set")


@dataclass(frozen=True, slots=True)
class KernelService:
    """The service network: the ClusterIP DNATed on the client's own node, and on each
    master a prober runs on (`also_on`), as kube-proxy does on every node."""

    profile: LBProfile
    targets: Sequence[Target]
    client: Namespace
    changes: StateChanges
    serving: dict[str, bool]
    nodes: list[Namespace]  # the other nodes whose proxies program it

    @classmethod
    def make(
        cls, profile: LBProfile, targets: Sequence[Target], client: Namespace
    ) -> KernelService:
        serving = {t.name: True for t in targets}
        return cls(profile, targets, client, StateChanges(str(profile.lb)), serving, [])

    async def also_on(self, node: Namespace) -> None:
        """Program the ClusterIP on this node too, from now on."""
        self.nodes.append(node)
        await self._apply()

    @property
    def address(self) -> tuple[str, int]:
        return CLUSTER_IP, SERVICE_PORT

    @property
    def events(self) -> list[ServerEvent]:
        return self.changes.events

    @property
    def dispatch(self) -> Dispatch:
        return Dispatch(
            table="service_network",
            hook="output",
            vip=CLUSTER_IP,
            port=SERVICE_PORT,
            target_port=API_PORT,
            seed=_SEEDS[LB.SERVICE_NETWORK],
        )

    async def start(self, group: ProcessGroup) -> None:
        await self._apply()

    async def _apply(self) -> None:
        endpoints = [t.address for t in self.targets if self.serving[t.name]]
        script = self.dispatch.script(endpoints)
        for node in (self.client, *self.nodes):
            await node.run("nft", "-f", "-", stdin=script)

    async def set_serving(self, server: str, serving: bool) -> None:
        """The endpoint in or out; conntrack keeps the flows it already carries."""
        self.serving[server] = serving
        await self._apply()
        reason = "endpoint added" if serving else "endpoint removed"
        self.changes.add(ServerEvent(time.time(), server, serving, reason))

    async def wait_for(
        self, server: str, up: bool, timeout: float, since: float = 0.0
    ) -> ServerEvent:
        return await self.changes.wait_for(server, up, timeout, since)

    async def server_up(self) -> dict[str, bool]:
        return dict(self.serving)


def kernel_lb(
    profile: LBProfile, network: LabNetwork, targets: Sequence[Target], workdir: Path
) -> KernelLB | KernelService:
    """The kernel path's stand-in for one of the platform's LBs."""
    if network.router is None or network.client is None:
        raise ProcessError("the lab network is not up")
    if profile.lb is LB.SERVICE_NETWORK:
        return KernelService.make(profile, targets, network.client)
    return KernelLB.make(profile, targets, network.router, workdir)
