"""The event-log file: schema v1 JSON Lines, flushed per record, bounded by rotation.

When PATH grows past `max_bytes` it is renamed `PATH.000001` (numbers rise with time) and
closed, a new PATH is started with the `run` record again, and a background thread gzips the
segment to `PATH.000001.gz` (written as `.gz.part`, renamed when complete, then the plain
segment is removed). Readers read the segments in number order, then PATH; a plain
`PATH.NNNNNN` only exists if the daemon died while compressing it or the disk had no room for
the gzip, and is read the same way. The names and the reading are `prober.common.segments`,
which every reader shares.

A disk that fills up or a file that cannot be written must not cost the run its metrics or
tear the log: each record is written whole or not at all (a partial write is cut off again),
what could not be written is counted by kind (`prober_event_log_dropped_total`), the first
failure is logged as an error and the first success after it as `event_log_write_resumed`.
A rotation that cannot rename keeps writing to PATH and is retried; a new file that cannot be
opened is retried every RETRY_SECONDS, each file starting with the `run` record.

Files of an earlier run found at start are moved aside into `PATH.previous-<stamp>-<run>/`
so the segments of this run never mix with another run's; only regular files are moved, and a
PATH that is something else (a symlink, a FIFO, a directory) is refused. Which of those
directories stay is `prober.daemon.retention`'s; KEEP_SEGMENTS segments of this run are kept.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from io import FileIO
from pathlib import Path

import structlog

from prober.common.clock import Clock, SystemClock
from prober.common.segments import segment_path, segment_paths
from prober.core.eventlog import EventLogError, encode
from prober.core.models import LogRecord, RunRecord, Sample
from prober.daemon import retention
from prober.daemon.pipeline import Event, Observed, logged
from prober.daemon.retention import Retention

# `read_lines` and `segment_paths` are the reading side of this file format; they live in
# `prober.common.segments`, shared with the reports and the audit commands.

log = structlog.get_logger("prober.eventlog")

RETRY_SECONDS = 1.0  # a missing file or a failed rotation is tried again this often
# Retention: 64 segments of 32 MiB are hundreds of hours at the defaults (a 4-hour run writes
# 16 MB); what a loop of restarts or an endless outage would write past that is dropped.
KEEP_SEGMENTS = 64


class EventLogWriter:
    def __init__(
        self,
        path: str,
        max_bytes: int,
        header: RunRecord,
        *,
        on_dropped: Callable[[str], None] | None = None,
        keep: Retention | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.path = Path(path)
        self._clock = clock or SystemClock()  # when to try a failed write again
        self._keep = keep or Retention()
        self._max = max_bytes
        self._header = header
        self._on_dropped = on_dropped or (lambda _kind: None)
        self._file: FileIO | None = None
        self._size = 0  # bytes in the file, a torn line included
        self._torn = False  # a failed write left part of a line that could not be cut off
        self._closed = False
        self._segments = 0
        self._pruned = 0  # segments up to this number were removed (retention)
        self._compressor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eventlog-gzip")
        self._pending: list[tuple[Path, Future[str | None]]] = []  # segments being gzipped
        self._failure: str | None = None  # why records are being dropped, while they are
        self._dropped_since = 0
        self._rotation_failure: str | None = None
        self._retry_at = 0.0  # monotonic: no new file or rotation is tried before then
        self.records = 0
        self.dropped: Counter[str] = Counter()  # records not written, by kind

    def open(self) -> None:
        """Start the log; raises OSError if it cannot (the daemon then refuses to start)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"cannot create {self.path.parent}: {exc.strerror}") from None
        self._move_previous_run()
        problem = self._start_file()
        if problem is not None:
            raise OSError(problem)

    # The pipeline's sink interface: kept samples and every event that is a record (interval,
    # window, summary, pace change, and any other kind of stream's records); the samples the
    # compactor drops and the live-only events are not logged.
    def observe(self, observed: Observed) -> None:
        pass

    def keep(self, sample: Sample) -> None:
        self.write(sample)

    def event(self, event: Event) -> None:
        record = logged(event)
        if record is not None:
            self.write(record)

    def write(self, record: LogRecord) -> None:
        """Append one record as one whole line, or count it as dropped and say why, once."""
        if self._closed:
            return
        try:
            data = (encode(record) + "\n").encode()
        except (EventLogError, UnicodeError) as exc:
            self._drop(record, f"cannot encode: {exc}")
            return
        problem = self._failure or "no file"
        if self._file is None and self._clock.monotonic() >= self._retry_at:
            problem = self._start_file() or problem
        if self._file is None:
            self._drop(record, problem)
            return
        failed = self._append(data)
        if failed is not None:
            self._drop(record, failed)
            return
        self.records += 1
        if self._failure is not None:
            log.warning(
                "event_log_write_resumed",
                path=str(self.path),
                dropped=self._dropped_since,
                error=self._failure,
            )
            self._failure, self._dropped_since = None, 0
        if self._size > self._max and self._clock.monotonic() >= self._retry_at:
            self._rotate()

    def close(self) -> list[Path]:
        """Close; wait for compression to finish. Returns every file written."""
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None
        self._compressor.shutdown(wait=True)
        self._collect()
        self._prune_segments()  # those a running compression held back
        return [*segment_paths(self.path), self.path]

    def _append(self, data: bytes) -> str | None:
        """Write `data` whole. On failure, cut off the part that reached the file (a torn
        line would end the reader's strict reading) and return the problem."""
        assert self._file is not None
        if self._torn:
            data = b"\n" + data  # end the torn line: the reader skips it as one bad line
        done = 0
        try:
            while done < len(data):
                done += self._file.write(data[done:]) or 0
        except OSError as exc:
            if done and not self._cut():
                self._size += done
                self._torn = True
            return exc.strerror or str(exc)
        self._size += len(data)
        self._torn = False
        return None

    def _cut(self) -> bool:
        assert self._file is not None
        try:
            os.ftruncate(self._file.fileno(), self._size)
            self._file.seek(self._size)
        except OSError:
            return False
        return True

    def _drop(self, record: LogRecord, problem: str) -> None:
        self.dropped[record.KIND] += 1
        self._dropped_since += 1
        self._on_dropped(record.KIND)
        if self._failure is None:  # loud once; `event_log_write_resumed` ends the episode
            self._failure = problem
            log.error(
                "event_log_write_failed",
                path=str(self.path),
                error=problem,
                kind=record.KIND,
                note="records are counted in prober_event_log_dropped_total until a write "
                "succeeds again",
            )

    def _start_file(self) -> str | None:
        """Open PATH and write the run record first, so every file can be read alone.
        Returns the problem when that fails; the next try waits RETRY_SECONDS."""
        try:
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - the writer's
        except OSError as exc:
            self._retry_at = self._clock.monotonic() + RETRY_SECONDS
            return f"cannot open: {exc.strerror or exc}"
        self._size, self._torn = os.fstat(self._file.fileno()).st_size, False
        problem = self._append((encode(self._header) + "\n").encode())
        if problem is not None:
            self._file.close()
            self._file = None
            self._retry_at = self._clock.monotonic() + RETRY_SECONDS
        return problem

    def _rotate(self) -> None:
        assert self._file is not None
        plain = segment_path(self.path, self._segments + 1)
        try:
            os.replace(self.path, plain)  # the open file follows it
        except OSError as exc:
            self._retry_at = self._clock.monotonic() + RETRY_SECONDS
            if self._rotation_failure is None:
                self._rotation_failure = exc.strerror or str(exc)
                log.error(
                    "event_log_rotate_failed",
                    path=str(self.path),
                    error=self._rotation_failure,
                    note="writing on past the size limit; rotation is retried",
                )
            return
        if self._rotation_failure is not None:
            log.warning("event_log_rotate_resumed", path=str(self.path))
            self._rotation_failure = None
        self._segments += 1
        self._file.close()
        self._file = None
        self._collect()
        self._prune_segments()
        self._pending.append((plain, self._compressor.submit(_compress, plain)))
        log.info("event_log_rotated", segment=str(plain) + ".gz")
        self._start_file()  # if it fails, records are dropped and counted until it works

    def _collect(self) -> None:
        """Say which finished compressions failed; their segments stay plain and readable."""
        for plain, future in [p for p in self._pending if p[1].done()]:
            self._pending.remove((plain, future))
            problem = future.result()
            if problem is not None:
                log.error(
                    "event_log_compress_failed",
                    segment=str(plain),
                    error=problem,
                    note="the segment stays uncompressed; readers read it as it is",
                )

    def _move_previous_run(self) -> None:
        """An earlier run's files, regular files only, into a directory of this run's own.

        What is at PATH that is no regular file (a symlink to /proc/self/fd/1, a FIFO, a
        directory) is not ours to move: the daemon refuses to start, in one line."""
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise OSError(f"{self.path}: not a regular file; the event log needs one, or none")
        old = [p for p in segment_paths(self.path) if p.is_file() and not p.is_symlink()]
        if self.path.exists():
            old.append(self.path)
        if not old:  # still pruned: a lowered `event_log_keep_*` applies at the next start
            retention.prune(self.path, None, self._keep)
            return
        now = self._clock.wall()
        aside = retention.aside_name(self.path, self._header.run_id, now)
        aside.mkdir()
        for item in old:
            os.replace(item, aside / item.name)
        log.warning("event_log_previous_run_moved", to=str(aside), files=len(old))
        moved = retention.describe(aside, [aside / item.name for item in old], now)
        # Pruned before it is marked: on a full disk the pruning may be what makes room.
        retention.prune(self.path, moved, self._keep)
        retention.mark(moved, now)

    def _prune_segments(self) -> None:
        """Past KEEP_SEGMENTS rotated segments, the oldest goes (a disk is not endless)."""
        compressing = {plain for plain, _ in self._pending}
        for number in range(self._pruned + 1, self._segments - KEEP_SEGMENTS + 1):
            plain = segment_path(self.path, number)
            if plain in compressing:
                return  # its gzip thread still reads it: at a later rotation
            for path in (plain, plain.with_name(plain.name + ".gz")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            self._pruned = number
            if number == 1:
                log.warning("event_log_segments_pruned", keep=KEEP_SEGMENTS, oldest=str(plain))


def _compress(plain: Path) -> str | None:
    """Gzip a segment; on failure (a full disk) leave it plain and return the problem."""
    final = plain.with_name(plain.name + ".gz")
    part = plain.with_name(plain.name + ".gz.part")
    try:
        with open(plain, "rb") as source, gzip.open(part, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target, 1 << 20)
        os.replace(part, final)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(part)  # give back the space it took
        return exc.strerror or str(exc)
    os.unlink(plain)
    return None
