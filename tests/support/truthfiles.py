"""Truth files for tests: records stamped as an apiserver's writer stamps them
(`core.truthlog.stamp`) and written through the event log's codec, as the fake writes them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from prober.core.eventlog import encode
from prober.core.truthlog import TruthRecord, stamp

R = TypeVar("R", bound=TruthRecord)
HOST, APISERVER = "master-0", "apiserver-x"


def at(wall: float, record: R, host: str = HOST, apiserver: str = APISERVER) -> R:
    """`record` stamped at `wall` (its `mono` the same)."""
    return stamp(record, host=host, apiserver=apiserver, wall=wall, mono=wall)


def truth_lines(records: Iterable[TruthRecord]) -> str:
    return "".join(encode(r) + "\n" for r in records)


def write_truth(path: Path, records: Iterable[TruthRecord]) -> Path:
    path.write_text(truth_lines(records), encoding="utf-8")
    return path
