"""Earlier runs' event logs, moved aside at start: which of them stay, and which go.

An earlier run's files move into `PATH.previous-<stamp>-<run>/`, and a marker file in it
(MARKER) records that the prober made it, whose run it holds, when that run started and how
many bytes it took. Only a directory with a readable marker is ever pruned: a directory of
the same name made by anyone else (a user's copy, an older prober's, a test's) is not the
prober's to delete. Pruning keeps within a count and a byte budget (`event_log_keep_runs`,
`event_log_keep_size`), oldest first by the recorded start time, never by name: names carry
the wall clock at the move, and a clock stepped back made the run just moved aside sort
first, so it was deleted at once (issue 33). Two directories are never pruned: the run just
moved aside, and the newest earlier run by start time.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from prober.common.segments import SegmentLines
from prober.core.eventlog import decode
from prober.core.models import RunRecord, parse_rfc3339, rfc3339

log = structlog.get_logger("prober.eventlog")

MARKER = ".prober-previous-run"  # its presence says the prober made the directory
MARKER_VERSION = 1
MIB = 1024 * 1024
KEEP_RUNS = 5
KEEP_SIZE = 512 * MIB  # a 4-hour run writes 16 MB: hundreds of hours of earlier runs


@dataclass(frozen=True, slots=True)
class Retention:
    """At most `runs` directories of earlier runs, of at most `size` bytes together."""

    runs: int = KEEP_RUNS
    size: int = KEEP_SIZE


@dataclass(frozen=True, slots=True)
class Aside:
    """One directory of an earlier run, as its marker recorded it."""

    path: Path
    run_id: str
    started: float  # epoch seconds: the earlier run's start, from its run record
    size: int  # bytes of its files
    source: str = "run record"  # where `started` came from: "run record" or "file time"

    def order(self) -> tuple[float, str]:
        """Oldest first; equal start times in name order, so that a plan is the same twice."""
        return (self.started, self.path.name)


def aside_name(path: Path, run_id: str, now: float) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    # Unique per run: three runs started in one second shared one directory, and the second
    # overwrote the first one's files.
    return path.with_name(f"{path.name}.previous-{stamp}-{run_id[:8]}")


def describe(aside: Path, files: Sequence[Path], now: float) -> Aside:
    """The directory an earlier run's `files` (in reading order, oldest first) just moved
    into, as its marker will record it."""
    run_id, started, source = _earlier_run(files, now)
    size = sum(p.stat().st_size for p in files if p.is_file())
    return Aside(aside, run_id, started, size, source)


def mark(aside: Aside, now: float) -> bool:
    """Write the marker, atomically (`.part`, then renamed). False, said in one error line,
    if it cannot be written (a full disk the pruning did not relieve): the directory is then
    kept, as anything unmarked is."""
    body = {
        "v": MARKER_VERSION,
        "run_id": aside.run_id,
        "started": rfc3339(aside.started),
        "started_from": aside.source,
        "moved": rfc3339(now),
        "bytes": aside.size,
    }
    part = aside.path / (MARKER + ".part")
    try:
        part.write_text(json.dumps(body) + "\n", encoding="utf-8")
        os.replace(part, aside.path / MARKER)
    except OSError as exc:
        with contextlib.suppress(OSError):
            part.unlink()
        log.error(
            "event_log_previous_run_unmarked",
            path=str(aside.path),
            error=exc.strerror or str(exc),
            note="without its marker the directory is never pruned; delete it by hand",
        )
        return False
    return True


def _earlier_run(files: Sequence[Path], now: float) -> tuple[str, float, str]:
    """The earlier run's id and start time from the run record its oldest file begins with;
    files whose first line is no run record (torn, foreign) give their oldest file time."""
    for path in files:
        try:
            first = next(iter(SegmentLines(path)), b"")
            record = decode(first)
            if isinstance(record, RunRecord):
                return record.run_id, parse_rfc3339(record.ts), "run record"
        except (OSError, ValueError, zlib.error):
            continue
    times = [p.stat().st_mtime for p in files if p.is_file()]
    return "", min(times, default=now), "file time"


def own_asides(path: Path) -> tuple[list[Aside], list[Path]]:
    """The directories of earlier runs beside PATH that the prober made, and those whose
    marker cannot be read (kept: nothing is deleted on a guess). Anything else is not
    looked at again."""
    own: list[Aside] = []
    unreadable: list[Path] = []
    for candidate in sorted(path.parent.glob(f"{path.name}.previous-*")):
        marker = candidate / MARKER
        if candidate.is_symlink() or not candidate.is_dir() or marker.is_symlink():
            continue
        if not marker.is_file():
            continue  # not the prober's: never touched
        aside = _read_marker(candidate, marker)
        if aside is None:
            unreadable.append(candidate)
        else:
            own.append(aside)
    return own, unreadable


def _read_marker(directory: Path, marker: Path) -> Aside | None:
    try:
        body = json.loads(marker.read_text(encoding="utf-8"))
        return Aside(
            path=directory,
            run_id=str(body["run_id"]),
            started=parse_rfc3339(body["started"]),
            size=int(body["bytes"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def plan(asides: Sequence[Aside], moved: Path | None, keep: Retention) -> list[tuple[Aside, str]]:
    """Which directories go, oldest first, each with why. Pure: the tests reason with it."""
    ordered = sorted(asides, key=Aside.order)
    protected = {a.path for a in ordered[-1:]} | ({moved} if moved is not None else set())
    count, size = len(ordered), sum(a.size for a in ordered)
    going: list[tuple[Aside, str]] = []
    for aside in ordered:
        if count <= keep.runs and size <= keep.size:
            break
        if aside.path in protected:
            continue
        why = (
            f"{count} earlier runs, keep {keep.runs}"
            if count > keep.runs
            else f"earlier runs take {size} bytes, keep {keep.size}"
        )
        going.append((aside, why))
        count, size = count - 1, size - aside.size
    return going


def prune(path: Path, moved: Aside | None, keep: Retention) -> list[Path]:
    """Prune the prober's own directories of earlier runs to `keep`; returns those removed.
    `moved`: the run just moved aside, not marked yet (marked after the pruning, which may
    be what frees the room for its marker). Each removal is one warning line: what, why."""
    own, unreadable = own_asides(path)
    if moved is not None:
        own = [a for a in own if a.path != moved.path] + [moved]
    for directory in unreadable:
        log.warning("event_log_previous_run_marker_unreadable", path=str(directory), kept=True)
    removed: list[Path] = []
    for aside, why in plan(own, moved.path if moved else None, keep):
        problem = _remove(aside.path)
        if problem is not None:
            log.error("event_log_previous_run_prune_failed", path=str(aside.path), error=problem)
            continue
        removed.append(aside.path)
        log.warning(
            "event_log_previous_run_pruned",
            path=str(aside.path),
            run_id=aside.run_id,
            started=rfc3339(aside.started),
            bytes=aside.size,
            reason=why,
        )
    kept = [a for a in own if a.path not in removed]
    if sum(a.size for a in kept) > keep.size:
        log.warning(
            "event_log_previous_runs_over_budget",
            kept=[str(a.path) for a in kept],
            bytes=sum(a.size for a in kept),
            keep=keep.size,
            note="the newest earlier run and the run just moved aside are never pruned",
        )
    return removed


def _remove(directory: Path) -> str | None:
    """Delete the files first and the marker last: a removal cut short by an error leaves a
    directory that is still marked as the prober's, to be pruned at the next start."""
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name == MARKER)
        inside = [e for e in entries if e.is_dir() and not e.is_symlink()]
        if inside:
            return f"{inside[0]}: a directory inside, which the prober never makes; left whole"
        for entry in entries:
            entry.unlink()
        directory.rmdir()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
