"""Event records out of pod logs: what CI's gather steps collect (`oc logs`, with or without
`--timestamps`, gather-extra's pod logs, the kubelet's CRI files under /var/log/pods) from a
daemon run with `event_log_stdout` (`daemon/echo.py`).

A pod log holds the daemon's structured log lines too: every line that is not an event record
is passed over (counted, not a problem). A timestamp prefix (`oc logs --timestamps`) and the
CRI's `<time> stdout F ` prefix are cut off first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from prober.report.schema.errors import BadInput

# `<RFC 3339 time> ` (oc logs --timestamps) and `<time> stdout|stderr F|P ` (CRI log files).
_PREFIX = re.compile(rb"^\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d) (?:(?:stdout|stderr) [FP] )?")
_RECORD = re.compile(rb'^\{"v":\s*\d+,\s*"kind":')  # how `core.eventlog.encode` begins a line


def pod_log_files(arg: Path) -> list[Path]:
    """A file, or every `*.log` under a directory (gather-extra's layout), sorted."""
    if arg.is_dir():
        found = sorted(p for p in arg.rglob("*.log") if p.is_file())
        if not found:
            raise BadInput(f"{arg}: directory holds no *.log pod log")
        return found
    if not arg.is_file():
        raise BadInput(f"{arg}: no such file")
    return [arg]


class RecordLines:
    """The event-record lines of a pod log's lines, prefixes cut; `passed` counts the rest."""

    def __init__(self, lines: Iterable[bytes]) -> None:
        self._lines = lines
        self.passed = 0

    def __iter__(self) -> Iterator[bytes]:
        for line in self._lines:
            bare = _PREFIX.sub(b"", line, count=1)
            if _RECORD.match(bare):
                yield bare
            else:
                self.passed += 1
