"""The lab's etcd: Debian's `etcd-server` (or upstream's, `lab.infra.upstream`), one
member, its data under the run's out dir.

The apiservers keep their objects in it, as kube-apiserver does. On the kernel path it runs in
the router's namespace, on an address of the lab's range that every master reaches through its
link (a master that vanishes loses etcd too, as a real one would); on HAProxy's path on
loopback. It is a child of the lab's `ProcessGroup`: stopped with the run, and killed with a
lab that is itself killed (the parent-death signal).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from prober.lab.infra.haproxy import free_port
from prober.lab.infra.kernel.netns import Namespace
from prober.lab.infra.processes import ManagedProcess, ProcessError, ProcessGroup

READY_TIMEOUT = 30.0
CLIENT_PORT, PEER_PORT = 2379, 2380  # etcd's own ports, inside the router's namespace


def _ready(line: str) -> bool:
    """etcd's zap logger says so once its client listener serves (3.4 and 3.7 alike)."""
    try:
        return str(json.loads(line).get("msg", "")).startswith("serving client traffic")
    except (ValueError, AttributeError):
        return False


@dataclass(slots=True)
class LabEtcd:
    data_dir: Path
    address: str = "127.0.0.1"
    namespace: Namespace | None = None  # where it runs; None: the lab's own namespace
    process: ManagedProcess | None = None
    client_port: int = 0
    binary: Path | None = None  # None: Debian's; upstream's 3.7 for upstream's apiservers

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.client_port}"

    async def start(self, group: ProcessGroup) -> None:
        binary = str(self.binary) if self.binary is not None else shutil.which("etcd")
        if binary is None:
            raise ProcessError("etcd: not installed (Debian package etcd-server)")
        if self.namespace is None:
            self.client_port, peer_port = free_port(), free_port()
        else:
            self.client_port, peer_port = CLIENT_PORT, PEER_PORT
        client = f"http://{self.address}:{self.client_port}"
        peer = f"http://{self.address}:{peer_port}"
        argv = [
            binary,
            "--name", "lab",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"lab={peer}",
            "--logger", "zap",
            "--log-outputs", "stdout",
        ]  # fmt: skip
        if self.namespace is not None:
            argv = self.namespace.enter(argv)
        self.process = await group.start("etcd", argv)
        await self.process.wait_for_line(_ready, READY_TIMEOUT)
