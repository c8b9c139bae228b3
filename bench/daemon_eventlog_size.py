"""How big the event log of a 4-hour run at the defaults gets, on disk, with rotation.

A synthetic 4-hour upgrade-like run goes through the daemon's real `SampleFeed` (trackers and
`Compactor`) into the real `EventLogWriter` (rotation at the default 32 MiB, gzip segments):
the in-cluster defaults give 3 LBs (service network, internal, external) x 2 protocols x 2
connection modes = 12 streams, 2 workers at 100 ms each = 20 samples/s per stream. Three
apiservers sit behind every LB, round-robin; the run has 4 rolling restarts of all three (12
shutdown windows: 70 s delay, each LB keeping a shutting-down server for its own reaction time,
a second of connection resets on new connections when it stops). The baseline is the same
samples written without compaction (every sample), measured on the first hour and scaled.
Also measured: a worst case where every request fails for 10 minutes, scaled to 4 hours.

    .venv/bin/python bench/daemon_eventlog_size.py [--hours 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prober.common.segments import segment_paths
from prober.config.model import Config
from prober.core.eventlog import encode
from prober.core.header import ShutdownHeader
from prober.core.models import (
    LB,
    REQUEST,
    Connection,
    ErrorClass,
    Protocol,
    RunRecord,
    Sample,
    StreamId,
    rfc3339,
)
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.requests.samples import SampleFeed

HOSTS = ("apiserver-aaaaaaaaaaaaaaaaaaaaaaaaaa", "apiserver-bbbbbbbbbbbbbbbbbbbbbbbbbb")
HOSTS += ("apiserver-cccccccccccccccccccccccccc",)
REACTION = {LB.SERVICE_NETWORK: 4.0, LB.INTERNAL: 12.0, LB.EXTERNAL: 28.0}
DELAY, DOWN = 70.0, 20.0  # shutdown-delay-duration; how long a stopped server stays down
WALL0 = 1_800_000_000.0


def streams() -> list[StreamId]:
    return [StreamId("kube-api", p, lb, c) for lb in REACTION for p in Protocol for c in Connection]


def shutdowns(hours: float) -> list[tuple[float, str]]:
    """(T0, host): 4 rolling restarts of the three servers per 4 hours, 5 minutes apart."""
    out = []
    rollouts = max(1, round(4 * hours / 4))
    for r in range(rollouts):
        start = (r + 0.5) * hours * 3600 / rollouts
        out += [(start + i * 300.0, host) for i, host in enumerate(HOSTS)]
    return out


def make_sample(stream: StreamId, t: float, n: int, events: list[tuple[float, str]]) -> Sample:
    alive = [
        h
        for h in HOSTS
        if not any(t0 + DELAY <= t < t0 + DELAY + DOWN for t0, x in events if x == h)
    ]
    host = alive[n % len(alive)]
    header, error, status, detail = None, None, 200, ""
    for t0, down in events:
        if down == host and t0 <= t < t0 + DELAY + DOWN:
            break
    else:
        t0 = None
    for s0, stopping in events:  # an LB that has not reacted still sends to the stopping host
        if s0 <= t < s0 + REACTION[stream.lb]:
            host, t0 = stopping, s0
    for s0, _ in events:  # the stop itself resets a second of new connections
        if stream.connection is Connection.NEW and s0 + DELAY <= t < s0 + DELAY + 1:
            error, status, detail = ErrorClass.CONNECTION_RESET, None, "[Errno 104] reset"
    if error is None:
        late = t0 is not None and t >= t0
        elapsed = float(round(t - t0)) if late and t0 is not None else 0.0
        header = ShutdownHeader(late, DELAY, elapsed, host)
    return Sample(
        ts=rfc3339(WALL0 + t), t=round(t, 6), dur=0.0042, stream_id=stream,
        reused=stream.connection is Connection.REUSED,
        http_version="HTTP/2" if stream.protocol is Protocol.HTTP2 else "HTTP/1.1",
        status=status, error=error, detail=detail, shutdown=header,
        audit_id=f"5f0c2a4e-8b1d-4c3a-9e7f-{n:012d}", local_port=40000 + n % 20000,
        peer="10.0.0.1:6443",
    )  # fmt: skip


def run(path: Path, hours: float, *, failing: bool = False) -> tuple[int, int, int]:
    """Feed a run through the pipeline into the writer; (samples, records, bytes on disk)."""
    config = Config()
    names = streams()
    header = RunRecord(
        "bench", rfc3339(WALL0), "aws", "bench", {REQUEST: tuple(s.name for s in names)}
    )
    writer = EventLogWriter(str(path), config.event_log_max_size, header)
    writer.open()
    pipeline = SampleFeed(names, [writer], wall_start=WALL0)
    n = feed(pipeline, hours, failing=failing)
    files = writer.close()
    return n, writer.records, sum(f.stat().st_size for f in files if f.exists())


def feed(pipeline: SampleFeed, hours: float, *, failing: bool = False) -> int:
    """The synthetic run's samples and summaries into `pipeline`, then closed; how many."""
    config = Config()
    names = streams()
    events = [] if failing else shutdowns(hours)
    gap = config.interval / config.workers
    end, n, t, next_summary = hours * 3600, 0, 0.0, config.summary_interval
    while t < end:
        near = [e for e in events if e[0] - 1 <= t < e[0] + DELAY + DOWN + 1]
        for i, stream in enumerate(names):
            sample = make_sample(stream, t + i * gap / len(names), n, near)
            if failing:
                sample = _failed(sample)
            pipeline.feed(sample)
            n += 1
        t += gap
        if t >= next_summary:
            pipeline.summary(round(t, 6))
            next_summary += config.summary_interval
    pipeline.close(round(end, 6))
    return n


def _failed(sample: Sample) -> Sample:
    from dataclasses import replace

    return replace(sample, error=ErrorClass.CONNECT_REFUSED, status=None, shutdown=None,
                   detail="[Errno 111] Connect call failed ('10.0.0.1', 6443)")  # fmt: skip


def uncompacted_bytes_per_hour() -> float:
    events = shutdowns(1.0)
    names = streams()
    gap = Config().interval / Config().workers
    total, n, t = 0, 0, 0.0
    while t < 600:  # ten minutes including a window, scaled to an hour
        for i, stream in enumerate(names):
            total += len(encode(make_sample(stream, 1500 + t + i * gap / 12, n, events))) + 1
            n += 1
        t += gap
    return total * 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=4.0)
    args = parser.parse_args()
    mb = 1e6
    with tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        samples, records, size = run(Path(tmp) / "events.jsonl", args.hours)
        cpu = time.process_time() - started
        segments = len(segment_paths(Path(tmp) / "events.jsonl"))
    raw = uncompacted_bytes_per_hour() * args.hours
    print(f"run: {args.hours:g} h at the defaults, 12 streams, {samples} samples, 12 windows")
    print(f"event log on disk: {size / mb:.2f} MB ({records} records, {segments} gz segments)")
    print(f"every sample, uncompacted and uncompressed: {raw / mb:.0f} MB")
    print(f"ratio on disk / uncompacted: {size / raw:.4f}  (budget: under 100 MB: {size < 1e8})")
    print(f"pipeline + writer CPU: {cpu:.1f} s = {cpu / samples * 1e6:.1f} us per sample")
    with tempfile.TemporaryDirectory() as tmp:
        minutes = 10
        _, _, size = run(Path(tmp) / "events.jsonl", minutes / 60, failing=True)
    scaled = size * args.hours * 60 / minutes
    print(f"worst case, every request failing: {size / mb:.2f} MB per {minutes} min "
          f"-> {scaled / mb:.0f} MB per {args.hours:g} h")  # fmt: skip


if __name__ == "__main__":
    main()
