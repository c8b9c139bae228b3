"""client-go's informers started beside the daemon, per LB, protocol and sync mode
(`judges.informers` holds their records against the daemon's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prober.core.clientgo import timer
from prober.core.models import LB, Protocol
from prober.lab.infra.processes import ProcessGroup

if TYPE_CHECKING:
    from prober.lab.infra.cluster import LabCluster


MODES = ("watch-list", "list")  # client-go's default sync, and the daemon's LIST first

READY_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Informer:
    lb: LB
    protocol: Protocol
    mode: str

    @property
    def name(self) -> str:
        return f"informer-{self.lb}-{self.protocol}-{self.mode}"


def health_env(scale: float) -> dict[str, str]:
    """client-go's HTTP/2 health check on the run's time scale, as the daemon's is
    (`core.clientgo.timer`), in the whole seconds client-go reads from its environment.
    Its TCP keepalive (30 s) it takes from no setting: the daemon's is not scaled either."""
    return {
        "HTTP2_READ_IDLE_TIMEOUT_SECONDS": str(
            max(1, round(timer("http2_read_idle_timeout", scale)))
        ),
        "HTTP2_PING_TIMEOUT_SECONDS": str(max(1, round(timer("http2_ping_timeout", scale)))),
    }


async def start_informers(
    cluster: LabCluster, group: ProcessGroup, binary: Path, heartbeat: tuple[str, str]
) -> list[Informer]:
    """One informer per LB x protocol x mode, where the prober runs, on the heartbeat Lease
    (namespace, name); each through its own kubeconfig naming its LB."""
    namespace, name = heartbeat
    health = health_env(cluster.platform.time_scale)
    started = []
    for lb in (*cluster.lbs, LB.LOCALHOST):
        kubeconfig = cluster.kubeconfig(lb)
        for protocol in (Protocol.HTTP1, Protocol.HTTP2):
            for mode in MODES:
                informer = Informer(lb, protocol, mode)
                env = dict(health)
                if protocol is Protocol.HTTP1:
                    env["DISABLE_HTTP2"] = "true"
                if mode == "list":
                    env["KUBE_FEATURE_WatchListClient"] = "false"
                argv = [str(binary), "--kubeconfig", str(kubeconfig), "--namespace", namespace,
                        "--field-selector", f"metadata.name={name}", "--http-lines=false",
                        "--handler-lines=false"]  # fmt: skip
                process = await group.start(informer.name, cluster.enter_client(argv), env=env)
                await process.wait_for_line(lambda line: '"event":"config"' in line, READY_TIMEOUT)
                started.append(informer)
    return started
