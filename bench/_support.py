"""What the benchmarks share: reading a child's JSON log lines, a metric's total from a
/metrics page, a process's CPU time. Imported by the scripts beside it (`import _support`);
not a benchmark itself."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import IO, Any

TICK = os.sysconf("SC_CLK_TCK")


def json_line(stream: IO[Any], event: str) -> dict[str, Any]:
    """The next JSON log line of `stream` whose `event` is `event`."""
    for raw in stream:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("event") == event:
            return line
    raise RuntimeError(f"no {event!r} line")


def metric_total(text: str, name: str = "prober_requests_total") -> float:
    """The sum of a metric's series on a /metrics page."""
    return sum(float(m[1]) for m in re.finditer(rf"^{name}\{{.*\}} (\S+)$", text, re.M))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK
