"""An event log's files and their lines: real files in tmp_path, plain, gzip, cut and misnamed."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from prober.common import segments
from prober.common.segments import (
    GzipStream,
    NoSuchLog,
    NotARegularFile,
    SegmentLines,
    is_gzip,
    log_files,
    logs_in,
    open_binary,
    read_lines,
    segment_path,
    segment_paths,
)

TEXT = b"".join(b'{"line":%d}\n' % i for i in range(400))
GZ = gzip.compress(TEXT)


def _damaged() -> bytes:
    data = bytearray(gzip.compress(TEXT * 20))
    data[30:40] = b"\xff" * 10
    return bytes(data)


Read = tuple[bool, list[bytes], bool]  # is gzip, the lines read, truncated

FILES: list[tuple[str, bytes, Read]] = [
    ("plain.jsonl", b"a\nb\n", (False, [b"a\n", b"b\n"], False)),
    ("torn.jsonl", b"a\nb", (False, [b"a\n", b"b"], False)),
    ("empty.jsonl", b"", (False, [], False)),
    ("one-byte.gz", b"\x1f", (False, [b"\x1f"], False)),
    ("log.jsonl.gz", gzip.compress(b"a\nb\n"), (True, [b"a\n", b"b\n"], False)),
    ("plain-named.gz", b"a\nb\n", (False, [b"a\n", b"b\n"], False)),
    ("gzip-named.jsonl", gzip.compress(b"a\nb\n"), (True, [b"a\n", b"b\n"], False)),
    (
        "members.gz",
        gzip.compress(b"a\nb") + gzip.compress(b"c\n"),
        (True, [b"a\n", b"bc\n"], False),
    ),
    ("magic-only.gz", b"\x1f\x8b", (True, [], True)),
]


@pytest.mark.parametrize(("name", "content", "expected"), FILES)
def test_gzip_is_told_by_magic_and_lines_keep_their_newline(
    tmp_path: Path, name: str, content: bytes, expected: Read
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    source = SegmentLines(path)
    assert (is_gzip(path), list(source), source.truncated) == expected


@pytest.mark.parametrize("cut", [20, len(GZ) // 2, len(GZ) - 4])
def test_a_cut_gzip_yields_every_line_it_holds_then_says_truncated(tmp_path: Path, cut: int):
    path = tmp_path / "events.jsonl.000001.gz"
    path.write_bytes(GZ[:cut])
    held = zlib.decompressobj(wbits=31).decompress(GZ[:cut])
    source = SegmentLines(path)
    assert b"".join(source) == held  # nothing decoded is lost, the cut line included
    assert source.truncated
    with pytest.raises(EOFError), gzip.open(path, "rb") as stream:
        stream.read()  # what the standard reader does with the same file


def test_damaged_gzip_raises_after_the_lines_before_it(tmp_path: Path) -> None:
    path = tmp_path / "damaged.gz"
    path.write_bytes(gzip.compress(TEXT) + _damaged())
    got: list[bytes] = []
    with pytest.raises(zlib.error):
        got.extend(SegmentLines(path))
    assert b"".join(got).startswith(TEXT)


@pytest.mark.parametrize(
    ("content", "error", "before"),
    [
        (GZ[: len(GZ) // 2], EOFError, zlib.decompressobj(wbits=31).decompress(GZ[: len(GZ) // 2])),
        (GZ + _damaged(), zlib.error, TEXT),  # a good member, then a damaged one
    ],
)
def test_gzip_stream_hands_out_what_it_decoded_before_raising(
    tmp_path: Path, content: bytes, error: type[Exception], before: bytes
) -> None:
    path = tmp_path / "x.gz"
    path.write_bytes(content)
    with open_binary(path) as stream:
        assert isinstance(stream, GzipStream)
        assert stream.read() == before
        with pytest.raises(error):
            stream.read()


def test_gzip_stream_seeks_forward_only(tmp_path: Path) -> None:
    path = tmp_path / "x.gz"
    path.write_bytes(GZ)
    with open_binary(path) as stream:
        assert stream.seek(10) == 10
        assert stream.read(5) == TEXT[10:15]
        assert stream.tell() == 15
        with pytest.raises(OSError, match="only seeks forward"):
            stream.seek(0)


def _touch(directory: Path, *names: str) -> None:
    for name in names:
        (directory / name).write_bytes(b"")


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([], []),
        (["events.jsonl"], []),
        (
            ["events.jsonl.000002", "events.jsonl.000001.gz", "events.jsonl.000010.gz"],
            ["events.jsonl.000001.gz", "events.jsonl.000002", "events.jsonl.000010.gz"],
        ),
        (["events.jsonl.000003", "events.jsonl.000003.gz"], ["events.jsonl.000003.gz"]),
        (["events.jsonl.000003", "events.jsonl.000003.gz.part"], ["events.jsonl.000003"]),
        (
            ["events.jsonl.999999.gz", "events.jsonl.1000000.gz", "events.jsonl.000001.gz"],
            ["events.jsonl.000001.gz", "events.jsonl.999999.gz", "events.jsonl.1000000.gz"],
        ),
        (
            ["events.jsonl.00001.gz", "events.jsonl.000001.gzip", "other.jsonl.000004.gz",
             "xevents.jsonl.000005.gz", "events.jsonl.previous-20260101T000000Z"],
            [],
        ),
    ],
)  # fmt: skip
def test_segments_in_number_order_preferring_the_finished_gzip(
    tmp_path: Path, names: list[str], expected: list[str]
) -> None:
    _touch(tmp_path, *names)
    assert [p.name for p in segment_paths(tmp_path / "events.jsonl")] == expected
    assert segment_paths(str(tmp_path / "events.jsonl")) == segment_paths(tmp_path / "events.jsonl")


def test_segment_names_are_what_the_listing_reads(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    for number in (1, 2, 999_999, 1_000_000):
        segment_path(path, number).write_bytes(b"")
    assert segment_path(path, 1).name == "events.jsonl.000001"
    assert segment_paths(path) == [segment_path(path, n) for n in (1, 2, 999_999, 1_000_000)]


def test_segment_paths_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert segment_paths(tmp_path / "nowhere" / "events.jsonl") == []


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda d: _touch(d, "events.jsonl"), ["events.jsonl"]),
        (
            lambda d: _touch(d, "events.jsonl", "events.jsonl.000001.gz"),
            ["events.jsonl.000001.gz", "events.jsonl"],
        ),
        (lambda d: _touch(d, "events.jsonl.000001.gz"), ["events.jsonl.000001.gz"]),
        (lambda d: None, NoSuchLog),
        (lambda d: (d / "events.jsonl").mkdir(), NotARegularFile),
        (
            lambda d: ((d / "events.jsonl").mkdir(), _touch(d, "events.jsonl.000001.gz")),
            NotARegularFile,
        ),
    ],
)
def test_log_files_are_the_segments_then_the_live_file(
    tmp_path: Path, setup: Callable[[Path], object], expected: list[str] | type[Exception]
) -> None:
    setup(tmp_path)
    path = tmp_path / "events.jsonl"
    if isinstance(expected, list):
        assert [p.name for p in log_files(path)] == expected
    else:
        with pytest.raises(expected, match=r"events\.jsonl"):
            log_files(path)


def test_a_directory_holds_every_log_whose_name_matches(tmp_path: Path) -> None:
    _touch(tmp_path, "b.jsonl", "a.jsonl", "a.jsonl.000001.gz", "gone.jsonl.000002.gz")
    _touch(tmp_path, "notes.txt", "c.jsonl.000001.gz.part", "x.log.000001.gz")
    (tmp_path / "dir.jsonl").mkdir()
    assert [p.name for p in logs_in(tmp_path)] == ["a.jsonl", "b.jsonl", "gone.jsonl"]
    assert [p.name for p in logs_in(tmp_path, "*.log")] == ["x.log"]
    assert logs_in(tmp_path, "*.yaml") == []


def test_read_lines_reads_plain_and_gzip_segments_in_order_then_the_live_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    (tmp_path / "events.jsonl.000001.gz").write_bytes(gzip.compress(b"1\n"))
    (tmp_path / "events.jsonl.000002").write_bytes(b"2\n")  # left plain by a crash
    (tmp_path / "events.jsonl.000003.gz").write_bytes(b"3\n")  # plain, whatever its name
    (tmp_path / "events.jsonl.000010").write_bytes(gzip.compress(b"10\n"))  # and vice versa
    path.write_bytes(b"live\n")
    assert list(read_lines(path)) == [b"1\n", b"2\n", b"3\n", b"10\n", b"live\n"]
    path.unlink()
    assert list(read_lines(path))[-1] == b"10\n"


def test_a_line_longer_than_a_chunk_comes_out_whole(tmp_path: Path) -> None:
    long = b"x" * (3 * (1 << 20) + 5)
    for name, content in (("p", long + b"\nend"), ("z", gzip.compress(long + b"\nend"))):
        path = tmp_path / name
        path.write_bytes(content)
        assert list(SegmentLines(path)) == [long + b"\n", b"end"]


def test_a_gzip_bomb_is_inflated_a_chunk_at_a_time(tmp_path: Path) -> None:
    """64 MiB of zeros in a 64 kB gzip: inflated whole at the first read before, and each
    read then copied what was left (1.1 s for 64 MiB, 21.3 s for 256 MiB)."""
    bomb = tmp_path / "events.jsonl.000001.gz"
    bomb.write_bytes(gzip.compress(b"0" * (64 << 20), compresslevel=9))
    with open_binary(bomb) as stream:
        total = 0
        while data := stream.read(segments.CHUNK_BYTES):
            total += len(data)
            assert len(stream._buffer) <= 2 * segments.CHUNK_BYTES  # type: ignore[attr-defined]
    assert total == 64 << 20


def test_a_line_past_the_cap_is_cut_and_the_next_one_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(segments, "MAX_LINE", 1024)
    monkeypatch.setattr(segments, "CHUNK_BYTES", 300)  # the long line spans many reads
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"x" * 10_000 + b"\n" + b'{"v":1}\n')
    lines = list(segments.SegmentLines(path))
    assert lines == [b"x" * 1024 + b"\n", b'{"v":1}\n']
