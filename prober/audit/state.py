"""What `follow` remembers across restarts: where it is in the file it is reading, which
rotations it has finished, and every count, written together atomically so a restart neither
re-counts nor skips a line.

The file being read is recognised by a fingerprint of its first bytes (decompressed), not
its name or inode: rotation renames `audit.log`, compression gives it a new inode, and a
restart may find it in either form.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prober.audit.event import ScanStats
from prober.common.errors import UserError
from prober.common.segments import READ_ERRORS, open_binary
from prober.core import strictjson

STATE_VERSION = 1
FINGERPRINT_BYTES = 4096


class StateError(UserError, ValueError):
    """A state file this version cannot use: one line, naming the file."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    digest: str
    length: int

    def to_json(self) -> str:
        return f"{self.digest}:{self.length}"

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        digest, _, length = text.rpartition(":")
        return cls(digest, int(length))


def fingerprint(path: Path, length: int = FINGERPRINT_BYTES) -> Fingerprint | None:
    """The hash of the first `length` bytes (fewer if the file is shorter), or None if the
    file cannot be read now."""
    try:
        with open_binary(path) as stream:
            head = stream.read(length)
    except READ_ERRORS:
        return None
    return Fingerprint(hashlib.sha256(head).hexdigest()[:32], len(head))


@dataclass
class Position:
    """The next unread byte of the file being followed."""

    fingerprint: Fingerprint
    offset: int
    line: int
    discarding: bool = False  # inside an over-long line already counted
    inode: int | None = None  # a hint: same inode, other content means truncation

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint.to_json(),
            "offset": self.offset,
            "line": self.line,
            "discarding": self.discarding,
            "inode": self.inode,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Position:
        return cls(
            Fingerprint.from_json(body["fingerprint"]),
            int(body["offset"]),
            int(body["line"]),
            bool(body.get("discarding", False)),
            body.get("inode"),
        )


@dataclass
class FamilyState:
    position: Position | None = None
    finished: set[str] = field(default_factory=set)  # rotation names read to their end
    truncations: int = 0
    lost: int = 0  # positions whose file vanished before it was finished
    missing: bool = False  # the directory was missing at the last poll


@dataclass
class ApiserverCounts:
    stats: ScanStats = field(default_factory=ScanStats)
    late: Counter[str] = field(default_factory=Counter)  # by user agent product


@dataclass
class FollowState:
    families: dict[str, FamilyState] = field(default_factory=dict)
    counts: dict[str, ApiserverCounts] = field(default_factory=dict)
    seen_late_ids: list[str] = field(default_factory=list)
    problems: int = 0

    def family(self, key: str) -> FamilyState:
        return self.families.setdefault(key, FamilyState())

    def apiserver(self, name: str) -> ApiserverCounts:
        return self.counts.setdefault(name, ApiserverCounts())

    def to_json(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "families": {
                key: {
                    "position": fam.position.to_json() if fam.position else None,
                    "finished": sorted(fam.finished),
                    "truncations": fam.truncations,
                    "lost": fam.lost,
                    "missing": fam.missing,
                }
                for key, fam in sorted(self.families.items())
            },
            "counts": {
                name: {
                    "events": c.stats.events,
                    "bad": dict(c.stats.bad),
                    "api_versions": dict(c.stats.api_versions),
                    "invalid_annotations": c.stats.invalid_annotations,
                    "late": dict(c.late),
                }
                for name, c in sorted(self.counts.items())
            },
            "seen_late_ids": self.seen_late_ids,
            "problems": self.problems,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> FollowState:
        state = cls(seen_late_ids=list(body["seen_late_ids"]), problems=int(body["problems"]))
        for key, fam in body["families"].items():
            state.families[key] = FamilyState(
                position=Position.from_json(fam["position"]) if fam["position"] else None,
                finished={str(f) for f in fam["finished"]},
                truncations=int(fam["truncations"]),
                lost=int(fam["lost"]),
                missing=bool(fam["missing"]),
            )
        for name, c in body["counts"].items():
            stats = ScanStats(
                events=int(c["events"]),
                bad=Counter(c["bad"]),
                api_versions=Counter(c["api_versions"]),
                invalid_annotations=int(c["invalid_annotations"]),
            )
            state.counts[name] = ApiserverCounts(stats, Counter(c["late"]))
        return state


def load_state(path: Path) -> FollowState:
    """The saved state, or a fresh one if there is none. Raises `StateError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return FollowState()
    except OSError as exc:
        raise StateError(f"{path}: cannot read the follow state: {exc.strerror}") from None
    try:
        body = strictjson.loads(text)
        if body.get("v") != STATE_VERSION:
            raise StateError(f"{path}: state version {body.get('v')!r}, expected {STATE_VERSION}")
        return FollowState.from_json(body)
    except StateError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(
            f"{path}: not a follow state file ({type(exc).__name__}: {exc}); "
            "move it away to start over"
        ) from None


def save_state(state: FollowState, path: Path) -> None:
    """Write atomically: a crash leaves the old state or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(state.to_json(), handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
