"""The event-log writer on a disk that fills up (a small tmpfs of the test's own): no torn
line, every record either on disk or counted as dropped, said once when writes start failing
and once when they succeed again, and a segment that cannot be compressed stays readable."""

from __future__ import annotations

import dataclasses
import math
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from prober.common.segments import read_lines, segment_paths
from prober.core.eventlog import EventLogReader, encode
from prober.core.models import REQUEST, RunRecord, StreamCounters, Summary
from prober.daemon import eventlog, retention
from prober.daemon.eventlog import EventLogWriter
from tests.support.mounts import fill, needs_root, small_tmpfs

HEADER = RunRecord(
    "run-1",
    "2026-11-30T00:00:00.000000Z",
    "aws",
    "0",
    {REQUEST: ("a-http1-localhost-new-connections",)},
)


def summary(i: int) -> Summary:
    counters = (StreamCounters("a-http1-localhost-new-connections", i, 0, 0, 0.0, {"success": i}),)
    return Summary(f"2026-11-30T00:00:{i % 60:02d}.000000Z", float(i), counters)


def events(logs: list[dict], name: str) -> list[dict]:
    return [entry for entry in logs if entry["event"] == name]


@needs_root
def test_a_full_disk_tears_no_line_and_counts_every_record_it_could_not_write(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        path = disk / "events.jsonl"
        dropped: list[str] = []
        writer = EventLogWriter(str(path), 1 << 20, HEADER, on_dropped=dropped.append)
        writer.open()
        written = [summary(i) for i in range(300)]
        with capture_logs() as logs:
            for record in written[:50]:
                writer.write(record)
            filler = fill(disk)
            for record in written[50:250]:
                writer.write(record)
            filler.unlink()
            for record in written[250:]:
                writer.write(record)
        writer.close()
        on_disk = list(EventLogReader(read_lines(path), strict=True))  # no torn line

    assert on_disk[0] == HEADER
    kept = on_disk[1:]
    assert kept == [r for r in written if r in kept]  # in order, none twice
    assert kept[:50] == written[:50]
    assert kept[-50:] == written[250:]
    assert len(kept) + len(dropped) == len(written)
    assert dropped == ["summary"] * len(dropped)
    assert writer.dropped == {"summary": len(dropped)}
    assert len(dropped) >= 150  # the disk had room for a few of them at most
    (failed,) = events(logs, "event_log_write_failed")
    assert failed["log_level"] == "error"
    assert "No space left on device" in failed["error"]
    (resumed,) = events(logs, "event_log_write_resumed")
    assert resumed["dropped"] == len(dropped)


@needs_root
def test_a_segment_that_cannot_be_compressed_stays_plain_and_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The compression waits until the disk is full: with room for one page left instead, a
    # loaded machine ran the gzip thread before the new file took that page, and it fitted.
    gate, compress = threading.Event(), eventlog._compress
    monkeypatch.setattr(eventlog, "_compress", lambda plain: gate.wait(30) and compress(plain))
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        path = disk / "events.jsonl"
        writer = EventLogWriter(str(path), 3000, HEADER)
        writer.open()
        written = [summary(i) for i in range(40)]
        count = 0
        size = len(encode(written[0])) + 3  # a record's line, give or take a digit
        while path.stat().st_size + size < 3000:  # fill the first page, stay below the limit
            writer.write(written[count])
            count += 1
        with capture_logs() as logs:
            writer.write(written[count])  # past the limit: rotates, the new file takes a page
            filler = fill(disk)
            gate.set()  # gzip finds no room
            writer.close()  # raised the compressor's OSError
        filler.unlink()
        segments = segment_paths(path)
        records = list(EventLogReader(read_lines(path), strict=True))
        leftovers = sorted(p.name for p in disk.iterdir() if p.name.endswith(".part"))

    assert [p.name for p in segments] == ["events.jsonl.000001"]
    assert leftovers == []
    assert [r for r in records if r != HEADER] == written[: count + 1]
    (failed,) = events(logs, "event_log_compress_failed")
    assert failed["segment"].endswith("events.jsonl.000001")


def test_a_record_that_cannot_be_encoded_is_counted_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    dropped: list[str] = []
    writer = EventLogWriter(str(path), 1 << 20, HEADER, on_dropped=dropped.append)
    writer.open()
    bad = Summary("2026-11-30T00:00:00.000000Z", math.nan, ())  # JSON has no NaN
    writer.write(bad)
    writer.write(summary(1))
    writer.close()
    assert dropped == ["summary"]
    assert list(EventLogReader(read_lines(path), strict=True)) == [HEADER, summary(1)]


def _earlier_runs(disk: Path, sizes: list[int]) -> list[Path]:
    """Directories of the prober's own earlier runs, oldest first, of these sizes."""
    made = []
    for n, size in enumerate(sizes):
        directory = disk / f"events.jsonl.previous-20260101T00000{n}Z-run{n}"
        directory.mkdir()
        (directory / "events.jsonl").write_bytes(b"x" * size)
        assert retention.mark(retention.Aside(directory, f"run{n}", 1000.0 + n, size), 2000.0)
        made.append(directory)
    return made


def _earlier_log(path: Path) -> None:
    writer = EventLogWriter(str(path), 1 << 20, EARLIER)
    writer.open()
    writer.write(summary(1))
    writer.close()


EARLIER = dataclasses.replace(HEADER, run_id="earlier-0000")


@needs_root
def test_on_a_full_disk_pruning_makes_room_and_the_earlier_run_is_kept(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "256k") as disk:
        path = disk / "events.jsonl"
        _earlier_log(path)
        old = _earlier_runs(disk, [32768, 32768, 32768])
        stranger = disk / "events.jsonl.previous-0000-not-ours"
        stranger.mkdir()
        (stranger / "events.jsonl").write_bytes(b"y" * 32768)
        fill(disk)
        with capture_logs() as logs:
            writer = EventLogWriter(
                str(path), 1 << 20, HEADER, keep=retention.Retention(2, 1 << 30)
            )
            writer.open()
            writer.close()
        (moved,) = [p for p in disk.glob("events.jsonl.previous-2026*") if p not in old]
        records = list(EventLogReader(read_lines(moved / "events.jsonl"), strict=True))
        own, _ = retention.own_asides(path)
        on_disk = list(EventLogReader(read_lines(path), strict=True))
        foreign_kept = (stranger / "events.jsonl").read_bytes() == b"y" * 32768

    assert records == [EARLIER, summary(1)]
    assert sorted(a.path for a in own) == sorted([old[2], moved])  # marked once room was made
    assert [e["path"] for e in events(logs, "event_log_previous_run_pruned")] == [
        str(old[0]),
        str(old[1]),
    ]
    assert foreign_kept
    assert on_disk == [HEADER]


@needs_root
def test_on_a_disk_with_no_room_at_all_the_earlier_run_is_moved_and_kept_unmarked(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", "64k") as disk:
        path = disk / "events.jsonl"
        _earlier_log(path)
        fill(disk)
        with capture_logs() as logs:
            writer = EventLogWriter(str(path), 1 << 20, HEADER)
            with pytest.raises(OSError, match="No space left on device"):
                writer.open()  # no room for the run record: the daemon refuses to start
        (moved,) = disk.glob("events.jsonl.previous-*")
        records = list(EventLogReader(read_lines(moved / "events.jsonl"), strict=True))
        marked = (moved / retention.MARKER).exists()

    assert records == [EARLIER, summary(1)]
    assert not marked
    (unmarked,) = events(logs, "event_log_previous_run_unmarked")
    assert unmarked["path"] == str(moved)
