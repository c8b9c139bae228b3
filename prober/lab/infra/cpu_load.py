"""How busy the daemon and the machine were during a lab run, read from /proc, so that a run
on a starved machine says so beside its wide bounds instead of leaving them unexplained.

`CpuMeter.start()` before the scenario and `stop()` after it: the daemon's CPU time over that
span as a share of one core, and the whole machine's busy share over all its CPUs (from the
`cpu` line of /proc/stat: everything but idle and iowait). On a system without /proc the
figures are None and the report says it cannot tell.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True, slots=True)
class Load:
    seconds: float  # wall time measured over
    daemon_core_share: float | None  # the daemon's CPU seconds per second (1.0: one core)
    machine_busy: float | None  # share of all CPUs busy, 0..1
    cpus: int

    def describe(self) -> str:
        if self.machine_busy is None:
            return f"load: not measurable here (no /proc), over {self.seconds:.0f} s"
        if self.daemon_core_share is None:  # several daemons, one after another
            return (
                f"load over {self.seconds:.0f} s: the machine's {self.cpus} CPUs were "
                f"{self.machine_busy:.0%} busy"
            )
        return (
            f"load over {self.seconds:.0f} s: the daemon used {self.daemon_core_share:.0%} of "
            f"a core; the machine's {self.cpus} CPUs were {self.machine_busy:.0%} busy"
        )


def process_cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def machine_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs since boot."""
    try:
        line = Path("/proc/stat").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    values = [int(v) for v in line.split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values) - idle, sum(values)


class CpuMeter:
    def __init__(self, pid: int | None) -> None:
        self._pid = pid
        self._started = 0.0
        self._daemon: float | None = None
        self._machine: tuple[int, int] | None = None

    def start(self) -> None:
        self._started = time.monotonic()
        self._daemon = process_cpu_seconds(self._pid) if self._pid else None
        self._machine = machine_ticks()

    def stop(self) -> Load:
        seconds = max(time.monotonic() - self._started, 1e-9)
        share = None
        now = process_cpu_seconds(self._pid) if self._pid else None
        if now is not None and self._daemon is not None:
            share = (now - self._daemon) / seconds
        busy = None
        ticks = machine_ticks()
        if ticks is not None and self._machine is not None:
            total = ticks[1] - self._machine[1]
            busy = (ticks[0] - self._machine[0]) / total if total else None
        return Load(seconds, share, busy, os.cpu_count() or 1)
