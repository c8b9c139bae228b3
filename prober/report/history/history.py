"""Reading summaries back, for the history (`thresholds`, `--check`, `export`): only what
the history needs, each field checked; and which summary files a command was given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from prober.common import filekinds
from prober.core.models import parse_rfc3339
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import read_json
from prober.report.schema.keys import Key, parse_key
from prober.report.schema.types import WorstEntry

KNOWN_VERSIONS = (1, 2, 3)  # v1: no bounds; v3: causes, verdict keys and counts
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class WorstOfRun:
    key: Key
    reaction: float | None
    disruption_seconds: float
    # The bound of the worst reaction: None when unbounded on that side, and always in a
    # v1 summary, which has none. The history is built from the point values only.
    reaction_lo: float | None = None
    reaction_hi: float | None = None


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What one summary contributes to the history."""

    source: str
    run_id: str
    platform: str
    windows: int
    worst: tuple[WorstOfRun, ...]
    started: str | None = None  # RFC 3339; summaries before the export had none


def load_run_facts(path: Path) -> RunFacts:
    doc = read_json(path, filekinds.SUMMARY)
    version = summary_version(path, doc)
    windows = _field(path, doc, "windows", list)
    worst = [
        _worst_of_run(path, f"worst[{i}]", entry, version)
        for i, entry in enumerate(_field(path, doc, "worst", list))
    ]
    _field(path, doc, "streams", list)  # its entries: `export.read_summary`
    return RunFacts(
        source=str(path),
        run_id=_field(path, doc, "run_id", str),
        platform=_field(path, doc, "platform", str),
        windows=len(windows),
        worst=tuple(worst),
        started=started_of(path, doc),
    )


def started_of(path: Path, doc: Mapping[str, object]) -> str | None:
    """A summary's run start time, checked; None in a summary written before it was kept."""
    started = doc.get("started")
    if started is None:
        return None
    if not isinstance(started, str):
        raise BadInput(f"{path}: field 'started': expected a time, got {started!r:.40}")
    try:
        parse_rfc3339(started)
    except ValueError:
        raise BadInput(
            f"{path}: field 'started': {started!r:.40} is not an RFC 3339 time"
        ) from None
    return started


def _worst_of_run(path: Path, where: str, raw: object, version: int) -> WorstOfRun:
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: {where}: expected an object")
    key = parse_key(raw, f"{path}: {where}")
    _check_number(path, raw, "reaction", where, optional=True)
    _check_number(path, raw, "disruption_seconds", where, optional=False)
    bounded = version >= 2  # a v1 summary has no bound, and whatever it holds there is unread
    if bounded:
        _check_number(path, raw, "reaction_lo", where, optional=True)
        _check_number(path, raw, "reaction_hi", where, optional=True)
    # Untrusted JSON is typed only here, after every key read below was checked above: the
    # cast then states what the checks proved, and the reads that follow are checked by name.
    entry = cast(WorstEntry, raw)
    return WorstOfRun(
        key,
        _float(entry["reaction"]),
        float(entry["disruption_seconds"]),
        _float(entry["reaction_lo"]) if bounded else None,
        _float(entry["reaction_hi"]) if bounded else None,
    )


def _float(value: float | None) -> float | None:
    # JSON may spell 5.0 as 5: what is computed from it must not print differently.
    return None if value is None else float(value)


def summary_version(path: Path, doc: Mapping[str, object]) -> int:
    """The schema version of a summary this reader knows, or BadInput naming it."""
    version = doc.get("v")
    if type(version) is not int or version not in KNOWN_VERSIONS:  # not True, not 2.0
        *rest, last = (str(v) for v in KNOWN_VERSIONS)
        known = f"{', '.join(rest)} and {last}"
        raise BadInput(f"{path}: summary version {version!r:.40}, this reader knows {known}")
    return version


def _field(path: Path, doc: Mapping[str, object], name: str, tp: type[_T]) -> _T:
    value = doc.get(name)
    if not isinstance(value, tp):
        # Worded as `export._get` words it: every summary reader gives the one message.
        what = "a string" if tp is str else "a list" if tp is list else tp.__name__
        raise BadInput(f"{path}: field {name!r}: expected {what}, got {value!r:.40}")
    return value


def _check_number(
    path: Path, entry: Mapping[str, object], name: str, where: str, *, optional: bool
) -> None:
    value = entry.get(name)
    if value is None and optional and name in entry:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadInput(f"{path}: {where}.{name}: expected a number, got {value!r:.40}")
