"""The event-log file: schema v1 JSON Lines, flushed per record, bounded by rotation.

When PATH grows past `max_bytes` it is closed and renamed `PATH.000001` (numbers rise with
time), a new PATH is started with the `run` record again, and a background thread gzips the
segment to `PATH.000001.gz` (written as `.gz.part`, renamed when complete, then the plain
segment is removed). Readers read the segments in number order, then PATH; a plain
`PATH.NNNNNN` only exists if the daemon died while compressing it, and is read the same way.

Files of an earlier run found at start are moved aside into `PATH.previous-<stamp>/` so the
segments of this run never mix with another run's.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import structlog

from prober.core.eventlog import encode
from prober.core.models import Interval, Record, RunRecord, Sample, Summary, Window

log = structlog.get_logger("prober.eventlog")


def segment_paths(path: str | Path) -> list[Path]:
    """This log's rotated segments, oldest first (compressed or not), without PATH itself."""
    base = Path(path)
    pattern = re.compile(re.escape(base.name) + r"\.(\d{6})(\.gz)?$")
    found: dict[int, Path] = {}
    if base.parent.is_dir():
        for entry in base.parent.iterdir():
            match = pattern.match(entry.name)
            if match:
                number = int(match[1])
                if number not in found or match[2]:  # prefer the finished .gz
                    found[number] = entry
    return [found[n] for n in sorted(found)]


class EventLogWriter:
    def __init__(self, path: str, max_bytes: int, header: RunRecord) -> None:
        self.path = Path(path)
        self._max = max_bytes
        self._header = header
        self._file: BinaryIO | None = None
        self._size = 0
        self._segments = 0
        self._compressor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eventlog-gzip")
        self._pending: list[Future[None]] = []
        self.records = 0
        self.dropped = 0

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._move_previous_run()
        self._start_file()

    def handle(self, item: object) -> None:
        """The pipeline's sink interface: kept samples and every interval, window, summary."""
        if isinstance(item, Sample | Interval | Window | Summary):
            self.write(item)

    def write(self, record: Record) -> None:
        if self._file is None:
            return
        data = (encode(record) + "\n").encode()
        try:
            self._file.write(data)
            self._file.flush()
        except OSError as exc:
            self.dropped += 1
            if self.dropped == 1:  # once, not once per record
                log.error("event_log_write_failed", path=str(self.path), error=str(exc))
            return
        self.records += 1
        self._size += len(data)
        if self._size > self._max:
            self._rotate()

    def close(self) -> list[Path]:
        """Flush and close; wait for compression to finish. Returns every file written."""
        if self._file is not None:
            self._file.close()
            self._file = None
        for future in self._pending:
            future.result()
        self._compressor.shutdown(wait=True)
        return [*segment_paths(self.path), self.path]

    def _start_file(self) -> None:
        self._file = open(self.path, "wb")  # noqa: SIM115 - lives as long as the writer
        self._size = 0
        self.write(self._header)

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        self._segments += 1
        plain = self.path.with_name(f"{self.path.name}.{self._segments:06d}")
        os.replace(self.path, plain)
        self._start_file()
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._compressor.submit(_compress, plain))
        log.info("event_log_rotated", segment=str(plain) + ".gz")

    def _move_previous_run(self) -> None:
        old = [*segment_paths(self.path)]
        if self.path.exists():
            old.append(self.path)
        if not old:
            return
        aside = self.path.with_name(
            f"{self.path.name}.previous-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        )
        aside.mkdir(exist_ok=True)
        for item in old:
            os.replace(item, aside / item.name)
        log.warning("event_log_previous_run_moved", to=str(aside), files=len(old))


def _compress(plain: Path) -> None:
    final = plain.with_name(plain.name + ".gz")
    part = plain.with_name(plain.name + ".gz.part")
    with open(plain, "rb") as source, gzip.open(part, "wb", compresslevel=6) as target:
        shutil.copyfileobj(source, target, 1 << 20)
    os.replace(part, final)
    os.unlink(plain)


def read_lines(path: str | Path) -> Iterator[bytes]:
    """Every line of an event log in order: its segments by number, then PATH itself."""
    for segment in [*segment_paths(path), Path(path)]:
        if not segment.exists():
            continue
        opener = gzip.open if segment.suffix == ".gz" else open
        with opener(segment, "rb") as stream:
            yield from stream
