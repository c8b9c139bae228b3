"""Replay an event log through fresh core trackers, as `prober analyze` does, to check that
the daemon's logged intervals and windows are reproduced exactly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prober.common.segments import read_lines
from prober.core.disruption import DisruptionTracker
from prober.core.eventlog import EventLogReader
from prober.core.models import Interval, Record, RunRecord, Sample, StreamId, Summary, Window
from prober.core.shutdown import ShutdownTracker


@dataclass
class Log:
    records: list[Record]
    skipped: int
    truncated: bool

    def of(self, kind: type) -> list:
        return [r for r in self.records if isinstance(r, kind)]


def read_log(path: str | Path, *, strict: bool = True) -> Log:
    reader = EventLogReader(read_lines(path), source=str(path), strict=strict)
    records = list(reader)
    return Log(records, reader.skipped, reader.truncated)


def replay(log: Log) -> tuple[list[Interval], list[Window]]:
    """The intervals and windows the logged samples give, closed at the final summary."""
    run = log.of(RunRecord)[0]
    nodes = {w.host: w.node for w in log.of(Window)}
    disruption = DisruptionTracker()
    shutdown = ShutdownTracker(node_of=nodes.get)
    for name in run.streams:
        shutdown.add_stream(StreamId.parse(name))
    intervals: list[Interval] = []
    windows: list[Window] = []
    for sample in log.of(Sample):
        for event in [*disruption.feed(sample), *shutdown.feed(sample)]:
            if isinstance(event, Interval):
                intervals.append(event)
            elif isinstance(event, Window):
                windows.append(event)
    final = log.of(Summary)[-1]
    end_ts = final.ts
    intervals += disruption.close(final.t, end_ts)
    windows += shutdown.close(final.t)
    return intervals, windows
