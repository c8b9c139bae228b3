"""A prober on a master (`prober lab --prober-on master-0`): its network readied, the daemon on it
started and sampling; `judges.onnode` holds what it measured to the truth."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from prober.common.errors import UserError
from prober.core.budgets import Platform
from prober.core.models import LB
from prober.lab.infra.cluster import Apiserver, LabCluster
from prober.lab.infra.daemons import daemon_config, start_daemon, wait_ready
from prober.lab.infra.options import LabOptions
from prober.lab.infra.processes import ManagedProcess, ProcessGroup

NODE_DAEMON = "node-run"  # not `prober-run*`: no pod log a gather would collect

PROBED = (LB.INTERNAL, LB.SERVICE_NETWORK, LB.LOCALHOST)


@dataclass(frozen=True, slots=True)
class NodeRun:
    """The daemon on a master, while it runs."""

    server: Apiserver  # the master it runs on, and its apiserver
    out: Path  # its event log, configuration and reports
    process: ManagedProcess

    @property
    def event_log(self) -> Path:
        return self.out / "events.jsonl"


def hairpins(platform: Platform) -> tuple[LB, ...]:
    """The platform's LBs that hairpin from a master (`core.budgets`)."""
    return tuple(p.lb for p in platform.lbs if p.hairpin)


class ProberOnError(UserError, ValueError):
    """A master-side prober the lab cannot run as asked."""


def check_prober_on(
    hostname: str, servers: int, lb_hairpins: Sequence[LB], *, kernel: bool
) -> None:
    """Refuse, in one line, a master-side prober the lab cannot reproduce."""
    if not kernel:
        raise ProberOnError("--prober-on: a prober runs on a master only on the kernel path")
    known = [f"master-{i}" for i in range(servers)]
    if hostname not in known:
        raise ProberOnError(f"--prober-on: {hostname!r} is not one of {', '.join(known)}")
    if not lb_hairpins:
        raise ProberOnError(
            "--prober-on: no LB of this platform hairpins to a master's own apiserver "
            "(core.budgets; gcp's internal LB does): a master's flows through it would meet "
            "the kernel's drop of its own source address, which the lab does not judge"
        )


async def start_node_prober(
    cluster: LabCluster, options: LabOptions, group: ProcessGroup, out: Path, hostname: str
) -> NodeRun:
    """The master's network readied, the daemon on it started and sampling."""
    server = next(s for s in cluster.apiservers if s.hostname == hostname)
    node = await cluster.host_prober(server)
    run_out = out / hostname
    run_out.mkdir(parents=True, exist_ok=True)
    config = daemon_config(cluster, options, run_out / "events.jsonl", lbs=PROBED, on=server,
                           heartbeat=f"prober-on-{server.hostname}")  # fmt: skip
    config["watches"] = False  # requests only: the main daemon's watch streams are judged
    path = run_out / "prober.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    process, _ = await start_daemon(group, f"{NODE_DAEMON}-{hostname}", path, enter=node.enter)
    await wait_ready(process)
    return NodeRun(server, run_out, process)
