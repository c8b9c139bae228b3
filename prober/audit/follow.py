"""`prober audit follow`: follow live audit logs the way `tail -F` does, counting exactly once.

Each `poll` visits every family and reads, oldest first, every file it has not finished:
the one it was in (still `audit.log`, or rotated and maybe compressed since, recognised by
its first bytes) from its saved position, the others from their start, up to the live
`audit.log`. A rotation is finished when read to its end: its unterminated last line is
scanned and its name (unique: it holds the rotation time) is remembered as done. The live file's
unterminated last line waits for its newline. Truncation (same file, other first bytes, or
shorter than the position) starts the file again from its beginning, as `tail -F` does.

Counts go through the same `Scanner` as `summarize`, so both give the same numbers on the
same files. `poll` is synchronous and reads no clock: the caller decides when to poll.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prober.audit.event import LateRequest, Problems, Scanner, SeenIds, user_agent_product
from prober.audit.files import DEFAULT_MAX_LINE_BYTES, Family, scan_file
from prober.audit.state import (
    FINGERPRINT_BYTES,
    FamilyState,
    Fingerprint,
    FollowState,
    Position,
    fingerprint,
)

# Finished rotations remembered before the ones no longer on disk are forgotten.
FINISHED_KEPT = 64
# Distinct user-agent labels per apiserver; later products are counted as "other".
MAX_USER_AGENT_LABELS = 50
OTHER_USER_AGENT = "other"


@dataclass
class PollReport:
    """What one poll did."""

    lines: int = 0
    late: Counter[tuple[str, str]] = field(default_factory=Counter)  # (apiserver, agent)
    problems: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.lines or self.problems)


def user_agent_label(user_agent: str | None, known: Counter[str]) -> str:
    """The bounded label for a user agent, given the labels already in use."""
    product = user_agent_product(user_agent)
    if product in known or len(known) < MAX_USER_AGENT_LABELS:
        return product
    return OTHER_USER_AGENT


class Follower:
    def __init__(
        self,
        families: Sequence[Family],
        state: FollowState | None = None,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.families = list(families)
        self.state = state or FollowState()
        self.max_line_bytes = max_line_bytes
        self.lines_total = 0
        self._problems = Problems()
        self._seen = SeenIds(self.state.seen_late_ids)
        self._scanner = Scanner(self._seen, self._problems)
        for family in self.families:
            self.state.apiserver(family.apiserver)

    def poll(self) -> PollReport:
        report = PollReport()
        kept_before = len(self._problems.kept)
        total_before = self._problems.total
        for family in self.families:
            self._poll_family(family, report)
        report.problems = self._problems.kept[kept_before:]
        # Only the problems of this poll are worth keeping in memory: they were reported.
        self._problems.kept = []
        self.state.problems += self._problems.total - total_before
        self.state.seen_late_ids = self._seen.ids()
        self.lines_total += report.lines
        return report

    def _poll_family(self, family: Family, report: PollReport) -> None:
        fam = self.state.family(family.key)
        if not self._directory_present(family, fam):
            return
        files = [p for p in family.files() if _rotation_name(p) not in fam.finished]
        position = self._resume(family, files, fam)
        for index, path in enumerate(files):
            live = index == len(files) - 1 and family.is_live(path)
            if not self._read(family, fam, path, position, live=live, report=report):
                return  # vanished right now (renamed, compressed): try again next poll
            position = None
            if not live:
                fam.finished.add(_rotation_name(path))
                fam.position = None
        self._prune(family, fam)

    def _directory_present(self, family: Family, fam: FamilyState) -> bool:
        present = family.directory.is_dir()
        if present == fam.missing:
            fam.missing = not present
            said = "is missing" if not present else "is back"
            self._problems.add(f"{family.directory}: directory {said}")
        return present

    def _resume(self, family: Family, files: list[Path], fam: FamilyState) -> Position | None:
        """The saved position, if the oldest unfinished file is the one it is in.

        Files are read in order and a rotation is finished before the next is begun, so the
        position can only be in the oldest unfinished file: after a rename (same inode), a
        compression (same content) or in a copied directory. If that file does not begin
        with the bytes read from it, it was truncated, or it is gone."""
        position = fam.position
        if position is None or position.fingerprint.length == 0:
            return None
        if files:
            head = fingerprint(files[0], position.fingerprint.length)
            if head == position.fingerprint and _plain_size(files[0]) >= position.offset:
                return position
        self._lost(family, files, fam, position)
        return None

    def _lost(
        self, family: Family, files: list[Path], fam: FamilyState, position: Position
    ) -> None:
        fam.position = None
        live = files[-1] if files and family.is_live(files[-1]) else None
        if live is not None and position.inode is not None and _inode(live) == position.inode:
            fam.truncations += 1
            self._problems.add(f"{live}: file truncated; reading it from its start")
        else:
            fam.lost += 1
            self._problems.add(
                f"{live or 'audit log'}: the file being read at line {position.line} is gone "
                "(deleted before it was finished); its remaining lines cannot be read"
            )

    def _read(
        self,
        family: Family,
        fam: FamilyState,
        path: Path,
        position: Position | None,
        *,
        live: bool,
        report: PollReport,
    ) -> bool:
        counts = self.state.apiserver(family.apiserver)

        def on_late(late: LateRequest) -> None:
            label = user_agent_label(late.user_agent, counts.late)
            counts.late[label] += 1
            report.late[(family.apiserver, label)] += 1

        scan = scan_file(
            path,
            family.apiserver,
            self._scanner,
            counts.stats,
            on_late,
            offset=position.offset if position else 0,
            line=position.line if position else 0,
            discarding=position.discarding if position else False,
            finished=not live,
            max_len=self.max_line_bytes,
        )
        if scan.missing:
            return False
        report.lines += scan.line - (position.line if position else 0)
        if live:
            fam.position = Position(
                _head(path, scan.offset), scan.offset, scan.line, scan.discarding, _inode(path)
            )
        return True

    def _prune(self, family: Family, fam: FamilyState) -> None:
        """Forget finished files that are gone, so the state stays small."""
        if len(fam.finished) > FINISHED_KEPT:
            present = {_rotation_name(p) for p in family.files()}
            fam.finished &= present


def _rotation_name(path: Path) -> str:
    """A rotated file's name, the same before and after compression."""
    return path.name.removesuffix(".gz")


def _head(path: Path, offset: int) -> Fingerprint:
    """The fingerprint of what was consumed (up to its first 4 KiB); of nothing when nothing
    was, which resumes like having no position."""
    found = fingerprint(path, min(FINGERPRINT_BYTES, offset))
    return found if found is not None else Fingerprint("", 0)


def _plain_size(path: Path) -> int:
    try:
        return os.stat(path).st_size if not path.name.endswith(".gz") else 1 << 62
    except OSError:
        return 0


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None
