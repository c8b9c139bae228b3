"""Finding audit logs, ordering rotations, splitting lines."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from prober.audit.event import TOO_LONG
from prober.audit.files import (
    Family,
    InputError,
    LineSplitter,
    ReadResult,
    discover,
    read_lines,
)
from tests.support.auditlog import event, line, write


def names(family: Family) -> list[str]:
    return [p.name for p in family.files()]


def test_node_directories_each_hold_one_apiserver(tmp_path: Path):
    for node in ("master-0", "master-1"):
        write(tmp_path / node / "audit.log", event())
        write(tmp_path / node / "audit-2026-05-01T10-00-00.000.log", event())
    (tmp_path / "master-1" / "termination.log").write_text("not an audit log\n")
    families, notes = discover([tmp_path])
    assert [f.apiserver for f in families] == ["master-0", "master-1"]
    assert names(families[1]) == ["audit-2026-05-01T10-00-00.000.log", "audit.log"]
    assert notes == []


def test_rotations_are_read_oldest_first_and_a_half_compressed_one_as_plain(tmp_path: Path):
    for name in (
        "audit.log",
        "audit-2026-05-01T10-00-00.000.log.gz",
        "audit-2026-04-30T23-59-59.999.log.gz",
        "audit-2026-05-01T11-30-00.000.log",
        "audit-2026-05-01T11-30-00.000.log.gz",  # being written by the compressor
    ):
        (tmp_path / name).write_bytes(b"")
    (family,), _ = discover([tmp_path], node="master-2")
    assert family.apiserver == "master-2"
    assert names(family) == [
        "audit-2026-04-30T23-59-59.999.log.gz",
        "audit-2026-05-01T10-00-00.000.log.gz",
        "audit-2026-05-01T11-30-00.000.log",
        "audit.log",
    ]
    assert family.is_live(tmp_path / "audit.log")
    assert not family.is_live(tmp_path / "audit-2026-05-01T11-30-00.000.log")


def test_must_gather_names_carry_the_node(tmp_path: Path):
    gathered = tmp_path / "audit_logs" / "kube-apiserver"
    for name in (
        "ip-10-0-1-2.ec2.internal-audit.log.gz",
        "ip-10-0-1-2.ec2.internal-audit-2026-05-01T10-00-00.000.log.gz",
        "ip-10-0-3-4.ec2.internal-audit.log.gz",
    ):
        write(gathered / name, event(), compress=True)
    families, _ = discover([tmp_path])
    assert [f.apiserver for f in families] == [
        "ip-10-0-1-2.ec2.internal",
        "ip-10-0-3-4.ec2.internal",
    ]
    assert len(families[0].files()) == 2


def test_files_named_explicitly_are_read_alone(tmp_path: Path):
    write(tmp_path / "master-0" / "audit.log", event())
    old = write(tmp_path / "master-0" / "audit-2026-05-01T10-00-00.000.log", event())
    other = write(tmp_path / "captured.jsonl", event())
    families, _ = discover([old, other])
    assert [(f.apiserver, names(f)) for f in families] == [
        ("master-0", [old.name]),
        (tmp_path.name, ["captured.jsonl"]),
    ]


def test_a_missing_path_is_an_input_error_and_an_empty_directory_a_note(tmp_path: Path):
    with pytest.raises(InputError, match=r"nope: no such file or directory"):
        discover([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    families, notes = discover([tmp_path / "empty"])
    assert families == []
    assert notes == [f"{tmp_path / 'empty'}: no audit log files (audit.log, "
                     "audit-<time>.log[.gz]) in it"]  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_splitter_gives_the_same_lines_whatever_the_chunking(chunk: int):
    data = b"a\nbb\n" + b"x" * 20 + b"\nccc\ntail"
    splitter = LineSplitter(max_len=10)
    got = []
    for i in range(0, len(data), chunk):
        got += splitter.feed(data[i : i + chunk])
    assert got == [b"a", b"bb", TOO_LONG, b"ccc"]
    assert splitter.pending == b"tail"
    assert not splitter.discarding


def test_a_line_exactly_at_the_limit_is_kept():
    splitter = LineSplitter(max_len=4)
    assert splitter.feed(b"abcd\nabcde\n") == [b"abcd", TOO_LONG]


def test_read_lines_resumes_at_an_offset_in_plain_and_gzip_files(tmp_path: Path):
    data = line(event(1.0)) + line(event(2.0)) + b'{"partial'
    for path in (tmp_path / "p.log", tmp_path / "z.log"):
        path.write_bytes(gzip.compress(data) if path.name == "z.log" else data)
        result = ReadResult(0, b"", False)
        first = list(read_lines(path, result=result))
        assert len(first) == 2
        assert result.offset == len(data) - len(b'{"partial')
        assert result.pending == b'{"partial'
        again = ReadResult(0, b"", False)
        assert list(read_lines(path, len(line(event(1.0))), result=again)) == first[1:]


def test_a_ten_megabyte_line_is_skipped_without_being_held(tmp_path: Path):
    path = tmp_path / "audit.log"
    path.write_bytes(b"{" + b"x" * (10 * 1024 * 1024) + b"}\n" + line(event()))
    result = ReadResult(0, b"", False)
    items = list(read_lines(path, max_len=1024 * 1024, result=result))
    assert items[0] is TOO_LONG
    assert len(items) == 2
    assert result.offset == os.path.getsize(path)


def test_a_corrupt_gzip_stops_with_an_error_after_the_good_lines(tmp_path: Path):
    good = gzip.compress(b"".join(line(event(t)) for t in range(200)))
    path = tmp_path / "audit-2026-05-01T10-00-00.000.log.gz"
    path.write_bytes(good[: len(good) // 2])  # cut in the middle of the stream
    result = ReadResult(0, b"", False)
    items = list(read_lines(path, result=result))
    assert result.error is not None
    assert "EOFError" in result.error or "Error" in result.error
    assert all(isinstance(i, bytes) for i in items)


def test_a_vanished_file_is_reported_as_missing(tmp_path: Path):
    result = ReadResult(0, b"", False)
    assert list(read_lines(tmp_path / "gone.log", result=result)) == []
    assert result.missing
