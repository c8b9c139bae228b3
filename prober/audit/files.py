"""Finding audit logs on disk, ordering kube-apiserver's rotations, and reading their lines.

kube-apiserver (lumberjack) writes `audit.log` and rotates it by renaming it to
`audit-<2006-01-02T15-04-05.000>.log`, then optionally gzips that to `.log.gz` (writing the
`.gz`, then removing the plain file). must-gather and CI artifacts prefix the node:
`<node>-audit.log`, `<node>-audit-<ts>.log.gz`. A family is one apiserver's current file and
its rotations, read oldest first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.audit.event import TOO_LONG, BadReason, LateRequest, Line, Scanner, ScanStats
from prober.common.errors import UserError
from prober.common.segments import CHUNK_BYTES, READ_ERRORS, open_binary

# Reading a file plain or gzip (by its magic) is `prober.common.segments`, shared with the
# event-log readers. Any of READ_ERRORS means
# "this file stops decoding here": counted as one unreadable line.

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024

_NAME = re.compile(
    r"(?P<prefix>(?:.+-)?)audit"
    r"(?:-(?P<ts>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(?:\.\d+)?))?"
    r"\.log(?P<gz>\.gz)?"
)


class InputError(UserError, ValueError):
    """A path named on the command line that cannot be used: one line, exit 2."""


@dataclass(frozen=True, slots=True)
class Family:
    """One apiserver's audit log: where it lives and what its files are called.

    `only` restricts it to files named on the command line; None means every file of the
    family in the directory, now and (when following) later."""

    apiserver: str
    directory: Path
    prefix: str  # "" for `audit.log`, "<node>-" for must-gather names; a whole name if `single`
    only: frozenset[str] | None = None
    single: bool = False  # one file whose name is not an audit log's

    @property
    def key(self) -> str:
        return str(self.directory / (self.prefix if self.single else f"{self.prefix}audit"))

    def files(self) -> list[Path]:
        """The family's files now, oldest rotation first and the current file last.

        While lumberjack compresses a rotation both `x.log` and `x.log.gz` exist and the
        `.gz` is incomplete: the plain one is taken."""
        if self.single:
            path = self.directory / self.prefix
            return [path] if path.exists() else []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        by_stem: dict[str, str] = {}
        for name in names:
            match = _NAME.fullmatch(name)
            if match is None or match["prefix"] != self.prefix:
                continue
            if self.only is not None and name not in self.only:
                continue
            stem = name.removesuffix(".gz")
            if stem not in by_stem or not name.endswith(".gz"):
                by_stem[stem] = name
        ordered = sorted(by_stem.values(), key=_rotation_order)
        return [self.directory / name for name in ordered]

    def is_live(self, path: Path) -> bool:
        """Whether `path` is the file being written: not a rotation (no timestamp)."""
        if self.single:
            return True
        match = _NAME.fullmatch(path.name)
        return match is not None and match["ts"] is None and not match["gz"]


def _rotation_order(name: str) -> tuple[int, str]:
    match = _NAME.fullmatch(name)
    timestamp = match["ts"] if match else None
    return (1, "") if timestamp is None else (0, timestamp)


def discover(paths: Sequence[Path], node: str | None = None) -> tuple[list[Family], list[str]]:
    """The families under the given files and directories, and a note for each directory
    that holds no audit log.

    The apiserver is `node` if given, else the name's `<node>-` prefix, else the name of
    the directory holding the file (`<dir>/<node>/audit.log`). Raises `InputError` for a
    path that does not exist."""
    families: dict[str, Family] = {}
    notes: list[str] = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        if not path.is_dir():
            _add(families, family_of(path, node, explicit=True))
            continue
        found = 0

        def unlistable(error: OSError) -> None:
            notes.append(f"{error.filename}: cannot list: {error.strerror}")

        for directory, _dirs, names in sorted(os.walk(path, onerror=unlistable)):
            for name in sorted(names):
                if _NAME.fullmatch(name):
                    found += 1
                    _add(families, family_of(Path(directory) / name, node, explicit=False))
        if not found:
            notes.append(f"{path}: no audit log files (audit.log, audit-<time>.log[.gz]) in it")
    return list(families.values()), notes


def _add(families: dict[str, Family], family: Family) -> None:
    known = families.get(family.key)
    if known is None:
        families[family.key] = family
    elif known.only is not None:
        only = None if family.only is None else known.only | family.only
        families[family.key] = Family(known.apiserver, known.directory, known.prefix, only)


def family_of(path: Path, node: str | None, *, explicit: bool) -> Family:
    """The family `path` belongs to (all of it, or only `path` if `explicit`)."""
    directory = path.absolute().parent
    match = _NAME.fullmatch(path.name)
    if match is None:
        return Family(node or directory.name, directory, path.name, single=True)
    prefix = match["prefix"]
    only = frozenset({path.name}) if explicit else None
    return Family(node or prefix.removesuffix("-") or directory.name, directory, prefix, only)


class LineSplitter:
    """Bytes in, complete lines out. A line longer than `max_len` is reported once as
    `TOO_LONG` as soon as it is known to be too long, and its bytes are skipped up to the
    next newline without being kept, so one huge line never costs its size in memory."""

    def __init__(self, max_len: int = DEFAULT_MAX_LINE_BYTES, discarding: bool = False) -> None:
        self.max_len = max_len
        self.discarding = discarding
        self.pending = b""

    def feed(self, data: bytes) -> list[Line]:
        if self.discarding:
            newline = data.find(b"\n")
            if newline < 0:
                return []
            data = data[newline + 1 :]
            self.discarding = False
        if self.pending:
            data = self.pending + data
        parts = data.split(b"\n")
        tail = parts.pop()
        limit = self.max_len
        lines: list[Line] = [TOO_LONG if len(p) > limit else p for p in parts]
        if len(tail) > limit:
            self.discarding = True
            tail = b""
            lines.append(TOO_LONG)
        self.pending = tail
        return lines


@dataclass
class ReadResult:
    """Where a read of one file stopped."""

    offset: int  # the byte after the last complete line (or skipped too-long bytes)
    pending: bytes  # a partial line at the end, not consumed
    discarding: bool  # inside a too-long line whose newline has not come yet
    error: str | None = None  # why decoding stopped early, if it did
    missing: bool = False  # the file was gone when it was to be opened


def read_lines(
    path: Path,
    offset: int = 0,
    *,
    max_len: int = DEFAULT_MAX_LINE_BYTES,
    discarding: bool = False,
    result: ReadResult | None = None,
) -> Iterator[Line]:
    """The complete lines of `path` from byte `offset` (of the decompressed stream) to its end.

    When the iterator is exhausted, `result` tells where it stopped. An I/O or gzip error
    ends the iteration and is recorded in `result.error` rather than raised: the lines before
    it are good data."""
    splitter = LineSplitter(max_len, discarding)
    position = offset
    error: str | None = None
    missing = False
    try:
        with open_binary(path) as stream:
            stream.seek(offset)
            while chunk := stream.read(CHUNK_BYTES):
                position += len(chunk)
                yield from splitter.feed(chunk)
    except FileNotFoundError:
        missing, error = True, "the file vanished"
    except READ_ERRORS as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if result is not None:
        result.offset = position - len(splitter.pending)
        result.pending = splitter.pending
        result.discarding = splitter.discarding
        result.error = error
        result.missing = missing


@dataclass
class FileScan:
    """Where a scan of one file stopped, for resuming it."""

    offset: int
    line: int  # lines consumed so far, for `path:line` in problems
    discarding: bool
    pending: bool  # an unterminated line is waiting at `offset`
    missing: bool


def scan_file(
    path: Path,
    apiserver: str,
    scanner: Scanner,
    stats: ScanStats,
    on_late: Callable[[LateRequest], None],
    *,
    offset: int = 0,
    line: int = 0,
    discarding: bool = False,
    finished: bool = True,
    max_len: int = DEFAULT_MAX_LINE_BYTES,
) -> FileScan:
    """Scan `path` from `offset` to its end. When `finished` (the file will not grow: a
    rotation, or any file `summarize` reads), an unterminated last line is scanned too, and a
    read error is counted as one unreadable line; otherwise both wait for the next scan."""
    result = ReadResult(offset, b"", discarding)
    number = line

    def where() -> str:
        return f"{path}:{number}"

    for item in read_lines(path, offset, max_len=max_len, discarding=discarding, result=result):
        number += 1
        late = scanner.scan(item, apiserver, stats, where)
        if late is not None:
            on_late(late)
    if result.missing:
        return FileScan(offset, line, discarding, False, True)
    end = result.offset
    if finished and result.pending:
        number += 1
        late = scanner.scan(result.pending, apiserver, stats, where, tail=True)
        if late is not None:
            on_late(late)
        end += len(result.pending)
    if finished and result.error:
        number += 1
        scanner.bad(BadReason.UNREADABLE, stats, where, result.error)
    return FileScan(end, number, result.discarding, bool(result.pending) and not finished, False)
