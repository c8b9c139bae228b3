"""The event-log file: flushed records, numbered gzip segments, each starting with `run`."""

from __future__ import annotations

import dataclasses
import gzip
import os
from pathlib import Path

import pytest

from prober.common.segments import read_lines, segment_paths
from prober.core.eventlog import EventLogReader, decode
from prober.core.models import REQUEST, RunRecord, StreamCounters, Summary
from prober.daemon import eventlog
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.retention import KEEP_RUNS

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


def test_each_record_is_on_disk_as_soon_as_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventLogWriter(str(path), 1 << 20, HEADER)
    writer.open()
    writer.write(summary(1))
    lines = path.read_bytes().splitlines()
    assert [decode(line) for line in lines] == [HEADER, summary(1)]
    assert writer.close() == [path]


def test_rotation_numbers_and_compresses_segments_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventLogWriter(str(path), 2000, HEADER)
    writer.open()
    written = [summary(i) for i in range(60)]
    for record in written:
        writer.write(record)
    files = writer.close()
    segments = segment_paths(path)
    assert len(segments) >= 3
    assert [p.name for p in segments] == [
        f"events.jsonl.{n:06d}.gz" for n in range(1, len(segments) + 1)
    ]
    assert files == [*segments, path]
    assert not list(tmp_path.glob("*.part"))
    for segment in segments:
        with gzip.open(segment, "rb") as stream:
            first = stream.readline()
        assert decode(first) == HEADER  # every file can be read on its own
        assert segment.stat().st_size < 2000
    records = list(EventLogReader(read_lines(path), strict=True))
    assert [r for r in records if r != HEADER] == written


def test_a_segment_left_uncompressed_by_a_crash_is_still_read_in_order(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventLogWriter(str(path), 2000, HEADER)
    writer.open()
    for i in range(30):
        writer.write(summary(i))
    writer.close()
    first = segment_paths(path)[0]
    plain = first.with_name(first.name.removesuffix(".gz"))
    plain.write_bytes(gzip.decompress(first.read_bytes()))
    first.unlink()
    assert segment_paths(path)[0] == plain
    records = [r for r in EventLogReader(read_lines(path), strict=True) if r != HEADER]
    assert records == [summary(i) for i in range(30)]


def test_an_earlier_run_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("old\n")
    (tmp_path / "events.jsonl.000001.gz").write_bytes(gzip.compress(b"older\n"))
    writer = EventLogWriter(str(path), 1 << 20, HEADER)
    writer.open()
    writer.close()
    (aside,) = tmp_path.glob("events.jsonl.previous-*")
    assert sorted(p.name for p in aside.iterdir()) == [
        ".prober-previous-run",
        "events.jsonl",
        "events.jsonl.000001.gz",
    ]
    assert segment_paths(path) == []
    assert [decode(line) for line in read_lines(path)] == [HEADER]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_path_that_is_no_regular_file_is_refused_untouched(tmp_path: Path, kind: str) -> None:
    """`--event-log /proc/self/fd/1` renamed whatever the symlink was; a FIFO or a directory
    was moved aside as if it were an earlier run's log."""
    path = tmp_path / "events.jsonl"
    target = tmp_path / "elsewhere"
    target.write_text("not ours\n")
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    writer = EventLogWriter(str(path), 1 << 20, HEADER)
    with pytest.raises(OSError, match=r"events.jsonl: not a regular file; the event log needs"):
        writer.open()
    assert not list(tmp_path.glob("events.jsonl.previous-*"))
    assert path.is_symlink() if kind == "symlink" else path.exists()
    assert target.read_text() == "not ours\n"


def test_runs_started_in_one_second_each_move_aside_into_their_own(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    for n in range(3):  # each run finds the one before it
        header = dataclasses.replace(HEADER, run_id=f"run{n}-0000-0000")
        writer = EventLogWriter(str(path), 1 << 20, header)
        writer.open()
        writer.write(summary(n))
        writer.close()
    asides = sorted(tmp_path.glob("events.jsonl.previous-*"))
    assert len(asides) == 2
    runs = [next(iter(EventLogReader(read_lines(a / "events.jsonl")))) for a in asides]
    assert sorted(r.run_id for r in runs if isinstance(r, RunRecord)) == [
        "run0-0000-0000",
        "run1-0000-0000",
    ]


def test_old_runs_and_old_segments_are_pruned(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(eventlog, "KEEP_SEGMENTS", 3)
    path = tmp_path / "events.jsonl"
    for n in range(KEEP_RUNS + 3):
        header = dataclasses.replace(HEADER, run_id=f"run{n:02d}-000")
        writer = EventLogWriter(str(path), 2000, header)
        writer.open()
        for i in range(60 if n == KEEP_RUNS + 2 else 1):
            writer.write(summary(i))
        writer.close()
    assert len(list(tmp_path.glob("events.jsonl.previous-*"))) == KEEP_RUNS
    assert len(segment_paths(path)) == 3  # the newest three of the last run's segments
    assert segment_paths(path)[-1].name.startswith("events.jsonl.0000")
