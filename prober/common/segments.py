"""An event log's files on disk and the lines in them, plain or gzip: the one place that knows
how the daemon names its segments and how a cut or damaged gzip file is read.

The daemon writes PATH and, past its size limit, renames it `PATH.000001` (numbers rise with
time; past 999999 they simply grow a digit), then gzips that to `PATH.000001.gz`, written as
`PATH.000001.gz.part` and renamed into place before the plain segment is removed. An event log
is therefore its segments in number order, then PATH; either part may be missing (a run too
short to rotate, PATH removed after the segments were copied). A plain `PATH.NNNNNN` is a
segment the daemon did not finish compressing (it died, or the disk was full) and is read the
same way; when both exist the `.gz` is complete, and preferred.

Whether a file is gzip is told by its first two bytes, never its name: CI artifacts and
hand-made copies get renamed, and a name is no reason to refuse good data.
"""

from __future__ import annotations

import fnmatch
import io
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 20
# A line past this is cut to it (its reader then finds it malformed): a file of garbage with
# no newline must not be held whole. Event-log lines are a few kB; audit events below 1 MiB.
MAX_LINE = 16 * 1024 * 1024
# What reading a file through `open_binary` can raise: the disk, a gzip stream that stops
# early, damaged gzip data.
READ_ERRORS = (OSError, EOFError, zlib.error)

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around deflate data
_SEGMENT = re.compile(r"(?P<base>.+)\.(?P<number>\d{6,})(?P<gz>\.gz)?")


class EventLogFilesError(Exception):
    """The files of an event log cannot be listed. Each caller words its own message."""


class NoSuchLog(EventLogFilesError):
    """Neither PATH nor any rotated segment of it exists."""


class NotARegularFile(EventLogFilesError):
    """PATH exists but is a directory, a FIFO or the like."""


def segment_path(path: Path, number: int) -> Path:
    """The name of PATH's segment `number` (from 1), before compression."""
    return path.with_name(f"{path.name}.{number:06d}")


def segment_paths(path: str | Path) -> list[Path]:
    """PATH's rotated segments, oldest first (compressed or not), without PATH itself."""
    base = Path(path)
    numbered: dict[int, Path] = {}
    if base.parent.is_dir():
        for candidate in base.parent.iterdir():
            match = _SEGMENT.fullmatch(candidate.name)
            if match is None or match["base"] != base.name:
                continue
            number = int(match["number"])
            if number not in numbered or match["gz"]:  # the finished .gz wins
                numbered[number] = candidate
    return [numbered[n] for n in sorted(numbered)]


def log_files(path: Path) -> list[Path]:
    """PATH's segments in number order, then PATH itself if it exists.

    Raises `NotARegularFile` if PATH exists but is not a file (even when it has segments: a
    directory named like a log is a mistake worth saying), `NoSuchLog` if there is nothing."""
    files = segment_paths(path)
    if path.is_file():
        files.append(path)
    elif path.exists():
        raise NotARegularFile(str(path))
    if not files:
        raise NoSuchLog(str(path))
    return files


def logs_in(directory: Path, pattern: str = "*.jsonl") -> list[Path]:
    """The live path of every event log in `directory` whose name matches `pattern`, sorted by
    name; a log whose PATH is gone but whose segments remain counts too."""
    names: set[str] = set()
    for entry in directory.iterdir():
        match = _SEGMENT.fullmatch(entry.name)
        if match is not None:
            if fnmatch.fnmatchcase(match["base"], pattern):
                names.add(match["base"])
        elif fnmatch.fnmatchcase(entry.name, pattern) and entry.is_file():
            names.add(entry.name)
    return [directory / name for name in sorted(names)]


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic. Raises OSError if it cannot be read."""
    with path.open("rb") as file:
        return file.read(len(GZIP_MAGIC)) == GZIP_MAGIC


def open_binary(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip (by its magic, not its name).

    A gzip file is read with `GzipStream`, so reading it may raise any of `READ_ERRORS`."""
    raw = path.open("rb")
    try:
        compressed = raw.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        raw.seek(0)
    except OSError:
        raw.close()
        raise
    # GzipStream has every method its callers use of a binary file; it is no BinaryIO subclass.
    return cast(BinaryIO, GzipStream(raw)) if compressed else raw


class GzipStream(io.RawIOBase):
    """A forward-only gzip reader that hands out everything it decoded before a problem.

    `gzip.GzipFile` drops what it decoded in a `read` that meets a cut-off or damaged stream
    and raises. A segment cut short (a copy taken mid-upload, a compressor killed with its
    process) still holds good lines, so this one returns them first and raises on the next
    read: EOFError for a stream that stops early, zlib.error for damaged data, OSError for
    the disk. Concatenated members are read in turn, as gzip does."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=_GZIP_WBITS)
        self._input = b""  # compressed bytes read and not yet inflated
        self._buffer = b""
        self._position = 0
        self._ended = False
        self._error: OSError | zlib.error | None = None

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while not self._ended and self._error is None and (size < 0 or len(self._buffer) < size):
            try:
                self._fill()
            except (OSError, zlib.error) as exc:
                self._error = exc  # raised once what came before it has been read
        if not self._buffer:
            if self._error is not None:
                raise self._error
            if self._ended and not self._inflate.eof:
                raise EOFError("compressed file ended before the end-of-stream marker")
        take = len(self._buffer) if size < 0 else size
        data, self._buffer = self._buffer[:take], self._buffer[take:]
        self._position += len(data)
        return data

    def _fill(self) -> None:
        """Inflate at most CHUNK_BYTES more. Unbounded, one compressed chunk of a gzip bomb
        became gigabytes at once, and each read copied the rest of it: quadratic in time."""
        if not self._input:
            self._input = self._raw.read(CHUNK_BYTES)
            if not self._input:
                self._ended = True
                return
        if self._inflate.eof:  # the next member of a concatenated gzip
            self._inflate = zlib.decompressobj(wbits=_GZIP_WBITS)
        self._buffer += self._inflate.decompress(self._input, CHUNK_BYTES)
        inflate = self._inflate
        self._input = inflate.unused_data if inflate.eof else inflate.unconsumed_tail

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET or offset < self._position:
            raise OSError("a gzip stream only seeks forward from its start")
        while self._position < offset and self.read(min(CHUNK_BYTES, offset - self._position)):
            pass
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._raw.close()
        super().close()


class SegmentLines:
    """The lines of one file, plain or gzip. Lines keep their newline, so a reader can tell a
    cut last line.

    A gzip stream that stops early yields what it holds, its last line cut, and sets
    `truncated` instead of raising. Why: such a file is a copy taken mid-rotation or a
    compressor killed with its process; every line before the cut is good data, and the cut
    line is then skipped and counted the way `EventLogReader` treats a plain file's torn last
    line. Damaged gzip data (zlib.error) and the disk (OSError) still raise, after the lines
    before them: they are not a log that merely ends early."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.truncated = False

    def __iter__(self) -> Iterator[bytes]:
        self.truncated = False
        with open_binary(self.path) as stream:
            pending: list[bytes] = []  # the start of a line longer than a chunk, in pieces
            held = 0  # bytes in `pending`, at most MAX_LINE: the rest of a longer line goes
            try:
                while chunk := stream.read(CHUNK_BYTES):
                    *lines, rest = chunk.split(b"\n")
                    if lines:
                        lines[0] = b"".join([*pending, lines[0][: max(0, MAX_LINE - held)]])
                        pending.clear()
                        held = 0
                        yield from (line + b"\n" for line in lines)
                    if rest and held < MAX_LINE:
                        pending.append(rest[: MAX_LINE - held])
                        held += len(pending[-1])
            except EOFError:
                self.truncated = True
            if pending:
                yield b"".join(pending)


def read_lines(path: str | Path) -> Iterator[bytes]:
    """Every line of an event log in order: its segments by number, then PATH itself. A file
    gone by the time its turn comes (an earlier run moved aside) is skipped."""
    for file in [*segment_paths(path), Path(path)]:
        if file.exists():
            yield from SegmentLines(file)
