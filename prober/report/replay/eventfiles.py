"""Which files make up an event log, and their lines, plain or gzip, for the reports.

An event log is the daemon's rotated segments PATH.000001.gz, ... in number order followed by
PATH itself; either part may be missing. Finding and reading them is
`prober.common.segments`, shared with the daemon and the audit commands; this module turns
what goes wrong into the report's one-line `BadInput`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

from prober.common.segments import NoSuchLog, NotARegularFile, SegmentLines, log_files, logs_in
from prober.report.schema.errors import BadInput


def event_logs(arg: Path) -> list[list[Path]]:
    """The event logs an argument names, each as its files in reading order.

    A directory means every `*.jsonl` in it (with its segments), sorted by name."""
    if arg.is_dir():
        logs = logs_in(arg, "*.jsonl")
        if not logs:
            raise BadInput(f"{arg}: directory holds no *.jsonl event log")
        return [_files(log) for log in logs]
    return [_files(arg)]


def _files(path: Path) -> list[Path]:
    try:
        return log_files(path)
    except NotARegularFile:
        raise BadInput(f"{path}: not a regular file") from None
    except NoSuchLog:
        raise BadInput(f"{path}: no such file") from None


class LineSource:
    """The lines of one file, decompressed if it is gzip (told by its magic, not its name).

    A gzip stream cut short yields what it holds and sets `truncated` (see `SegmentLines`);
    damaged data and read errors are `BadInput`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines = SegmentLines(path)

    @property
    def truncated(self) -> bool:
        return self._lines.truncated

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._lines
        except zlib.error as exc:
            raise BadInput(f"{self.path}: damaged gzip data: {exc}") from None
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot read: {exc.strerror or exc}") from None
