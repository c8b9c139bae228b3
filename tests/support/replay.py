"""Replay an event log through fresh core trackers, as `prober analyze` does, to check that
the daemon's logged intervals and windows are reproduced exactly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from prober.common.segments import read_lines
from prober.core.eventlog import EventLogReader
from prober.core.models import (
    REQUEST,
    Interval,
    LogRecord,
    Record,
    RunRecord,
    Sample,
    StreamId,
    Summary,
    Window,
)
from prober.core.trackers import Trackers


@dataclass
class Log:
    records: list[Record]
    skipped: int
    truncated: bool

    def of(self, kind: type) -> list:
        return [r for r in self.records if isinstance(r, kind)]


def read_log(
    path: str | Path, *, strict: bool = True, types: Mapping[str, type[LogRecord]] | None = None
) -> Log:
    """`types`: the record types it reads (`KindTable.record_types`); the request kind's by
    default, every other kind's records then skipped as unknown."""
    extra = {} if types is None else {"types": types}
    reader = EventLogReader(read_lines(path), source=str(path), strict=strict, **extra)
    records = list(reader)
    return Log(records, reader.skipped, reader.truncated)


def replay(log: Log) -> tuple[list[Interval], list[Window]]:
    """The intervals and windows the logged samples give, closed at the final summary."""
    run = log.of(RunRecord)[0]
    nodes = {w.host: w.node for w in log.of(Window)}
    trackers = Trackers(map(StreamId.parse, run.streams_of(REQUEST)), node_of=nodes.get)
    records = [e for sample in log.of(Sample) for e in trackers.feed(sample)]
    final = log.of(Summary)[-1]
    records += trackers.close(final.t, final.ts)
    return [r for r in records if isinstance(r, Interval)], [
        r for r in records if isinstance(r, Window)
    ]
