"""The `delayed-lb` scenario's relay in front of one LB (`lab.infra.delayrelay`), as the lab
runs and switches it: started where the prober runs, its address what `LabCluster.url` gives
for that LB, switched on and off by signal, and its own record of when it was on."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from prober.core.models import LB
from prober.lab.infra.processes import ManagedProcess, ProcessGroup

READY_TIMEOUT = 30.0  # seconds for the relay to listen: a Python start on a busy machine


@dataclass(slots=True)
class DelayedLB:
    lb: LB
    delay: float  # seconds each chunk waits, each way, while on
    process: ManagedProcess
    port: int
    spans: list[tuple[float, float | None]] = field(default_factory=list)  # (on, off) wall

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def on(self, wall: float) -> None:
        self.process.send_signal(signal.SIGUSR1)
        self.spans.append((wall, None))

    def off(self, wall: float) -> None:
        self.process.send_signal(signal.SIGUSR2)
        if self.spans and self.spans[-1][1] is None:
            self.spans[-1] = (self.spans[-1][0], wall)


async def start_delayed(
    group: ProcessGroup,
    lb: LB,
    upstream: tuple[str, int],
    delay: float,
    enter: Callable[[list[str]], list[str]],
) -> DelayedLB:
    """A relay to `upstream`, run where `enter` runs it (the client's namespace, or here)."""
    host, port = upstream
    argv = [sys.executable, "-m", "prober.lab.infra.delayrelay",
            "--upstream", f"{host}:{port}", "--delay", f"{delay:g}"]  # fmt: skip
    process = await group.start(f"delay-{lb}", enter(argv))
    line = await process.wait_for_line(lambda text: '"listening"' in text, READY_TIMEOUT)
    return DelayedLB(lb, delay, process, int(json.loads(line)["port"]))
