"""Event logs written the way the daemon writes them, for tests of everything that reads them.

The live trackers see every sample; the `Compactor` decides which samples reach the log; the
trackers' intervals and windows are logged as they close; `summary` records carry the counters
every `summary_every` seconds and at the end; the file rotates by size into gzipped segments
PATH.000001.gz, ... each beginning with the `run` record. What the live trackers emitted is
returned too, so a test can hold a replay of the log against it.
"""

from __future__ import annotations

import gzip
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prober.core.compaction import Compactors
from prober.core.connection_age import ConnectionAges
from prober.core.eventlog import encode
from prober.core.instances import Instance
from prober.core.models import (
    ApiserverNode,
    Interval,
    Record,
    RunEnd,
    RunRecord,
    Sample,
    StreamCounters,
    StreamId,
    Summary,
    Window,
    parse_rfc3339,
    rfc3339,
)
from prober.core.samenode import Placement
from prober.core.trackers import Trackers

START = "2026-11-30T10:00:00.000000Z"


def run_record(
    streams: Iterable[StreamId], *, run_id: str = "run-1", platform: str = "aws"
) -> RunRecord:
    return RunRecord(run_id, START, platform, tuple(s.name for s in streams), "0.1.0")


class RotatingWriter:
    def __init__(self, path: Path, run: RunRecord, rotate_bytes: int | None) -> None:
        self.path, self.run, self.rotate_bytes = path, run, rotate_bytes
        self.segments = 0
        self._file = path.open("w", encoding="utf-8")
        self._size = 0
        self.write(run)

    def write(self, record: Record | RunEnd | ApiserverNode | ConnectionAges | Instance) -> None:
        line = encode(record) + "\n"
        if self.rotate_bytes and self._size + len(line) > self.rotate_bytes and self._size:
            self._rotate()
        self._file.write(line)
        self._size += len(line)

    def _rotate(self) -> None:
        self._file.close()
        self.segments += 1
        segment = self.path.with_name(f"{self.path.name}.{self.segments:06d}.gz")
        with self.path.open("rb") as src, gzip.open(segment, "wb") as dst:
            shutil.copyfileobj(src, dst)
        self._file = self.path.open("w", encoding="utf-8")
        self._size = 0
        self.write(self.run)

    def close(self) -> None:
        self._file.close()


@dataclass
class LiveOutput:
    """What the daemon's own trackers emitted, and what it logged."""

    intervals: list[Interval] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    logged_samples: int = 0
    segments: int = 0
    ages: ConnectionAges | None = None
    instances: list[Instance] = field(default_factory=list)


def write_daemon_log(
    path: Path,
    run: RunRecord,
    samples: Iterable[Sample],
    *,
    nodes: dict[str, str] | None = None,
    end_t: float | None = None,
    summary_every: float = 10.0,
    rotate_bytes: int | None = None,
    clean_end: bool = True,
    placement: Placement | None = None,
) -> LiveOutput:
    """Feed `samples` (in completion order) as the daemon does and write its event log;
    `placement`: a prober that knows its node labels its samples (`core.samenode`), and
    logs the apiservers' nodes it knows first."""
    node_map = nodes or {}
    own = None if placement is None else placement.on_own_node
    trackers = Trackers(map(StreamId.parse, run.streams), node_of=node_map.get, on_own_node=own)
    disruption = trackers.disruption
    compactor = Compactors()
    writer = RotatingWriter(path, run, rotate_bytes)
    if placement is not None:
        for host, node in placement.nodes.items():
            writer.write(ApiserverNode(0.0, run.ts, host, node))
    out = LiveOutput()
    counts: dict[str, Counter[str]] = {name: Counter() for name in run.streams}
    next_summary = summary_every
    now = 0.0

    def summary(t: float) -> Summary:
        streams = tuple(
            StreamCounters(
                stream=name,
                samples=c["samples"],
                failures=c["failures"],
                late=c["late"],
                disruption_seconds=disruption.seconds(name),
                results={k[2:]: v for k, v in c.items() if k.startswith("r:")},
                same_node=c["same_node"],
            )
            for name, c in counts.items()
        )
        return Summary(rfc3339(parse_rfc3339(run.ts) + t), t, streams)

    def emit(events: Iterable[object]) -> None:
        for event in events:
            if isinstance(event, Interval):
                out.intervals.append(event)
                writer.write(event)
            elif isinstance(event, Window):
                out.windows.append(event)
                writer.write(event)
            elif isinstance(event, ConnectionAges):
                out.ages = event
                writer.write(event)
            elif isinstance(event, Instance):
                out.instances.append(event)
                writer.write(event)

    labelled = samples if placement is None else map(placement.label, samples)
    for s in labelled:
        now = max(now, s.end)
        while now >= next_summary:
            writer.write(summary(next_summary))
            next_summary += summary_every
        s = trackers.mark(s)  # noqa: PLW2901 (the daemon's order: marked, then fed)
        events = trackers.feed(s)
        for kept in compactor.select(s, events, trackers):
            writer.write(kept)
            out.logged_samples += 1
        emit(events)
        c = counts.setdefault(s.stream, Counter())
        c["samples"] += 1
        c["failures"] += s.failed
        c["late"] += s.late
        c["same_node"] += s.same_node
        c["r:" + (s.error.value if s.error else "success")] += 1
    if clean_end:
        end = end_t if end_t is not None else now + 0.5
        end_ts = rfc3339(parse_rfc3339(run.ts) + end)
        emit(trackers.close(end, end_ts))
        writer.write(summary(end))
        writer.write(RunEnd(end, end_ts, "stopped"))  # the stop path's last record
    writer.close()
    out.segments = writer.segments
    return out
