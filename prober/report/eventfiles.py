"""Which files make up an event log, and their lines, plain or gzip.

The daemon writes PATH and rotates it by size to gzipped segments PATH.000001.gz,
PATH.000002.gz, ... (000001 the oldest), each beginning with the `run` record. An event log is
therefore its segments in number order followed by PATH itself; either part may be missing (a
run too short to rotate, or PATH removed after a copy of the segments). A segment the daemon
died while compressing is still plain (PATH.000003, next to a partial PATH.000003.gz.part):
it is read the same way, and the finished .gz preferred when both exist.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from prober.report.errors import BadInput

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate data
_CHUNK = 1 << 16
_SEGMENT = re.compile(r"(?P<base>.+)\.(?P<number>\d{6,})(?P<gz>\.gz)?")


def event_logs(arg: Path) -> list[list[Path]]:
    """The event logs an argument names, each as its files in reading order.

    A directory means every `*.jsonl` in it (with its segments), sorted by name."""
    if arg.is_dir():
        bases = {p.name for p in arg.glob("*.jsonl") if p.is_file()}
        for p in arg.iterdir():
            match = _SEGMENT.fullmatch(p.name)
            if match is not None and match["base"].endswith(".jsonl"):
                bases.add(match["base"])
        if not bases:
            raise BadInput(f"{arg}: directory holds no *.jsonl event log")
        return [log_files(arg / name) for name in sorted(bases)]
    return [log_files(arg)]


def log_files(path: Path) -> list[Path]:
    """PATH's rotated segments in number order, then PATH itself if it exists."""
    numbered: dict[int, Path] = {}
    if path.parent.is_dir():
        for candidate in path.parent.iterdir():
            match = _SEGMENT.fullmatch(candidate.name)
            if match is None or match["base"] != path.name:
                continue
            number = int(match["number"])
            if number not in numbered or match["gz"]:
                numbered[number] = candidate
    files = [numbered[n] for n in sorted(numbered)]
    if path.is_file():
        files.append(path)
    elif path.exists():
        raise BadInput(f"{path}: not a regular file")
    if not files:
        raise BadInput(f"{path}: no such file")
    return files


class LineSource:
    """The lines of one file, decompressed if it is gzip (told by its magic, not its name).

    Lines keep their newline, so the reader can tell a cut last line. A gzip stream cut short
    (a copy taken mid-rotation) yields what it holds, its last line incomplete, and sets
    `truncated`: the same leniency the reader gives a plain file's cut last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.truncated = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            with self.path.open("rb") as file:
                compressed = file.read(2) == _GZIP_MAGIC
                file.seek(0)
                if compressed:
                    yield from self._gunzip(file)
                else:
                    yield from file
        except zlib.error as exc:
            raise BadInput(f"{self.path}: damaged gzip data: {exc}") from None
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot read: {exc.strerror or exc}") from None

    def _gunzip(self, file: BinaryIO) -> Iterator[bytes]:
        inflater = zlib.decompressobj(wbits=_GZIP_WBITS)
        pending = b""
        while chunk := file.read(_CHUNK):
            while chunk:
                pending += inflater.decompress(chunk)
                *lines, pending = pending.split(b"\n")
                yield from (line + b"\n" for line in lines)
                chunk = inflater.unused_data  # a file may hold several gzip members
                if chunk:
                    inflater = zlib.decompressobj(wbits=_GZIP_WBITS)
        self.truncated = not inflater.eof
        if pending:
            yield pending
