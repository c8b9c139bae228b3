"""Event logs written by the daemon's own code, for tests of everything that reads them.

The samples, in completion order, go through the daemon's pipeline (`daemon.pipeline`, the
request kind's `daemon.samples.SampleFeed`: its trackers and compaction) to its event-log
writer (`daemon.eventlog.EventLogWriter`: its rotation), on a fake clock, wired as
`daemon.app.Daemon` wires them: the apiservers' nodes first (a daemon that knows them logs
them), a summary every `summary_every` seconds, and at a clean end its stop path (the pipeline
closes, then `RunEnd` "stopped"). What the live trackers emitted is returned too, so a test
can hold a replay of the log against it.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prober.core import kinds
from prober.core.connection_age import ConnectionAges
from prober.core.instances import Instance
from prober.core.latency import RunPhase
from prober.core.models import (
    REQUEST,
    ApiserverNode,
    Interval,
    LogRecord,
    RunEnd,
    RunRecord,
    Sample,
    StreamId,
    Summary,
    Window,
    parse_rfc3339,
    rfc3339,
)
from prober.core.samenode import Placement
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.pipeline import Event, Observed, Pipeline
from prober.daemon.requests.samples import SampleFeed
from tests.support.clock import FakeClock

START = "2026-11-30T10:00:00.000000Z"


def run_record(
    streams: Iterable[StreamId], *, run_id: str = "run-1", platform: str = "aws"
) -> RunRecord:
    names = [s.name for s in streams]
    return kinds.run_record(
        run_id=run_id, ts=START, platform=platform, version="0.1.0", streams={REQUEST: names}
    )


@dataclass
class LiveOutput:
    """What the daemon's own trackers emitted (a sink of its pipeline), and how many rotated
    segments its log has."""

    intervals: list[Interval] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    segments: int = 0
    ages: ConnectionAges | None = None
    instances: list[Instance] = field(default_factory=list)
    summaries: list[Summary] = field(default_factory=list)
    # Each sample's run phase (`core.latency`), by (stream, send time).
    phases: dict[tuple[str, float], RunPhase] = field(default_factory=dict)

    def observe(self, observed: Observed) -> None:
        self.phases[(observed.sample.stream, observed.sample.t)] = observed.phase

    def keep(self, sample: Sample) -> None:
        pass

    def event(self, event: Event) -> None:
        if isinstance(event, Interval):
            self.intervals.append(event)
        elif isinstance(event, Window):
            self.windows.append(event)
        elif isinstance(event, ConnectionAges):
            self.ages = event
        elif isinstance(event, Instance):
            self.instances.append(event)
        elif isinstance(event, Summary):
            self.summaries.append(event)


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
    schedule: float | None = None,
    skips: Iterable[tuple[float, StreamId, int]] = (),
    others: Iterable[LogRecord] = (),
) -> LiveOutput:
    """Feed `samples` (in completion order) as the daemon does and write its event log;
    `nodes`: the apiservers' nodes the daemon knows; `placement`: a prober that knows its node
    labels its samples (`core.samenode`); `clean_end` False: the daemon was killed.
    `schedule`: every stream's mean gap, which makes the daemon count its completeness
    (`core.coverage`): then `skips` are ticks the scheduler skipped (`behind`), each at its
    run time, and every sample is a tick's request (None: a daemon before coverage). `others`:
    records of another kind (a heartbeat's writes), each written to the log as the pipeline
    passes it on, once the samples completed before it have been fed."""
    clock = FakeClock(0.0, parse_rfc3339(run.ts))  # run time 0 is the run record's ts
    writer = EventLogWriter(str(path), rotate_bytes or sys.maxsize, run, clock=clock)
    live = LiveOutput()
    pipeline = Pipeline([live, writer], run_start=clock.now, clock=clock)
    streams = [StreamId.parse(name) for name in run.streams_of(REQUEST)]
    node_of = nodes.get if nodes else None
    feed = SampleFeed(
        streams,
        [pipeline.out],
        wall_start=clock.wall(),
        node_of=node_of,
        placement=placement,
        schedule=None if schedule is None else (lambda _name: schedule),
        now=lambda: clock.now,
    )
    ticks: Counter[str] = Counter()  # per stream: ticks due, the started ones counted below
    started: Counter[str] = Counter()
    if schedule is not None:
        feed.count_ticks(lambda name: (ticks[name], started[name]))
    pending_skips = sorted(skips, key=lambda skip: skip[0])
    pipeline.attach(feed)
    writer.open()
    for host, node in (nodes or {}).items():
        pipeline.feed(ApiserverNode(pipeline.now(), rfc3339(clock.wall()), host, node))
    next_summary = summary_every
    pending = sorted(others, key=lambda r: float(getattr(r, "t", 0.0)))
    for sample in samples:
        while pending and float(getattr(pending[0], "t", 0.0)) <= sample.end:
            pipeline.out.event(pending.pop(0))
        clock.now = max(clock.now, sample.end)
        while clock.now >= next_summary:  # the summary task woke first
            pipeline.summary(next_summary)
            next_summary += summary_every
        while pending_skips and pending_skips[0][0] <= sample.end:
            at, stream, count = pending_skips.pop(0)
            clock.now = max(clock.now, at)  # the scheduler skips as it wakes
            ticks[stream.name] += count
            feed.skipped(stream, "behind", count)
        ticks[sample.stream] += 1
        started[sample.stream] += 1
        pipeline.feed(sample)
    for record in pending:
        pipeline.out.event(record)
    if clean_end:
        clock.now = end_t if end_t is not None else clock.now + 0.5
        pipeline.close(pipeline.now())
        pipeline.out.event(RunEnd(pipeline.now(), rfc3339(clock.wall()), "stopped"))
    live.segments = len(writer.close()) - 1  # the segments, then PATH
    return live
