"""How much a prober container writes to its pod log over an upgrade-like run, `event_log_stdout`
`all` against `compact`, beside the kubelet's rotation size.

The synthetic 4-hour run of `daemon_eventlog_size.py` (12 streams at 20 samples/s, three
apiservers behind each LB, 12 shutdown windows, a second of resets at each stop) goes through
the daemon's real `SampleFeed` with its real pace decisions (`PaceTracker`) into both echoes,
and the daemon's structured log lines (`LogSink`, JSON) go to the same log, as a container's
stdout and stderr both do. Both figures come from the same run; the ratio is what to read.

    .venv/bin/python bench/stdout_volume.py [--hours 4]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from daemon_eventlog_size import WALL0, feed, shutdowns, streams

from prober.common.logs import configure_logging
from prober.config.model import Config
from prober.core.models import REQUEST, RunRecord, rfc3339
from prober.core.pace import PaceTracker
from prober.daemon.echo import RecordEcho
from prober.daemon.logs import LogSink
from prober.daemon.requests.samples import SampleFeed

MIB = 1024 * 1024
ROTATION = {"upstream kubelet": 10 * MIB, "OpenShift nodes": 50 * MIB}


class Counter(io.TextIOBase):
    """A stream that keeps only how much was written to it."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


def run(hours: float) -> tuple[int, int, int, int]:
    """(samples, windows, bytes with `all`, bytes with `compact`), log lines in both."""
    config = Config()
    names = streams()
    header = RunRecord(
        "bench", rfc3339(WALL0), "aws", "bench", {REQUEST: tuple(s.name for s in names)}
    )
    full, compact, logs = Counter(), Counter(), Counter()
    configure_logging("json", "info", logs)
    sinks = [RecordEcho(header, full), RecordEcho(header, compact, samples=False), LogSink()]
    pipeline = SampleFeed(names, sinks, wall_start=WALL0, pace=PaceTracker(config.settle))
    n = feed(pipeline, hours)
    return n, len(shutdowns(hours)), full.bytes + logs.bytes, compact.bytes + logs.bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=4.0)
    args = parser.parse_args()
    samples, windows, full, compact = run(args.hours)
    print(f"run: {args.hours:g} h, 12 streams, {samples} samples, {windows} shutdown windows")
    print(f"pod log, event_log_stdout all:     {full / MIB:8.2f} MiB")
    print(f"pod log, event_log_stdout compact: {compact / MIB:8.2f} MiB")
    print(f"ratio compact / all: {compact / full:.4f}")
    for where, size in ROTATION.items():
        print(
            f"rotation at {size // MIB} MiB ({where}): all rotates {full // size} times; "
            f"compact fills {compact / size:.1%} of one file"
        )


if __name__ == "__main__":
    main()
