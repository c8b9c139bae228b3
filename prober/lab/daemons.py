"""`prober run` as the lab starts it: a child process with its configuration, ready once it
listens and every stream has sampled; and where each daemon's stdout (its pod log) lands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from prober.lab.processes import ManagedProcess, ProcessGroup, Tee

READY_TIMEOUT = 60.0
DAEMON = "prober-run"
Enter = Callable[[list[str]], list[str]]  # argv to argv run where the prober runs


async def start_daemon(
    group: ProcessGroup,
    name: str,
    config_path: Path,
    tee: Tee | None = None,
    *,
    nice: int = 0,
    enter: Enter | None = None,
) -> tuple[ManagedProcess, int]:
    """`prober run` with this configuration, once it listens: the process and its port.
    `nice`: below the cluster's processes, as a pod with a small CPU request is; `enter`:
    into the client's namespace (the kernel path), where its port is."""
    argv = [sys.executable, "-m", "prober", "run", "--config", str(config_path)]
    if nice:
        argv = ["nice", "-n", str(nice), *argv]  # nice execs: the pid stays the daemon's
    if enter is not None:
        argv = enter(argv)  # nsenter execs too
    daemon = await group.start(name, argv, tee=tee)
    line = await daemon.wait_for_line(lambda line: '"listening"' in line, READY_TIMEOUT)
    return daemon, int(json.loads(line)["port"])


async def wait_ready(daemon: ManagedProcess) -> None:
    """Until every stream of the daemon has sampled (its `ready` log line)."""
    await daemon.wait_for_line(lambda line: '"ready"' in line, READY_TIMEOUT)


def daemon_logs(log_dir: Path) -> list[Path]:
    """Every daemon's stdout, in the order they ran: the pod logs a gather step collects."""
    found = sorted(log_dir.glob(f"{DAEMON}*.stdout.log"))
    return sorted(found, key=lambda p: (len(p.name), p.name))  # prober-run before prober-run-2
