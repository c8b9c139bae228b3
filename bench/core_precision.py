"""How precisely the core measures an LB's reaction time, against the incumbent's method.

openshift/origin reports, per LB, the largest `elapsed` any late request carried: whole seconds,
sampled once a second. The core intersects every sample's timing constraint to place T0 and
reports `last_late_t - t0`. Both are run here on the same synthetic shutdowns with a known T0
and known LB switch times; the figure is the ratio of their p99 absolute errors.

    .venv/bin/python bench/core_precision.py [--runs N]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prober.core.models import Window
from prober.core.shutdown import ShutdownTracker
from prober.core.stats import percentile_cont
from tests.core.synthetic import HOST, StreamPlan, make_run, stream_ids


def measure(rng: random.Random, gap: float, streams: int) -> tuple[list[float], list[float]]:
    """Absolute reaction errors (ours, incumbent's) over the streams of one shutdown."""
    plans = [
        StreamPlan(s, gap, rng.uniform(0, gap), rng.uniform(1.0, 30.0)) for s in stream_ids(streams)
    ]
    run = make_run(rng, rng.uniform(10, 20), plans, max_dur=0.02)
    tracker = ShutdownTracker()
    windows = [w for s in run.samples for w in tracker.feed(s) if isinstance(w, Window)]
    windows += tracker.close(run.end)
    (window,) = windows
    ours, theirs = [], []
    truth = {p.stream.name: p.switch_after for p in plans}
    for ws in window.streams:
        if ws.reaction is None or ws.max_elapsed is None:
            continue
        ours.append(abs(ws.reaction - truth[ws.stream]))
        theirs.append(abs(ws.max_elapsed - truth[ws.stream]))
    assert window.host == HOST
    return ours, theirs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(20261130)
    ours, same_rate, incumbent = [], [], []
    for _ in range(args.runs):
        a, b = measure(rng, gap=0.05, streams=16)  # prober defaults: 100 ms, 2 workers
        ours += a
        same_rate += b
        incumbent += measure(rng, gap=1.0, streams=16)[1]  # origin: 1 request per second
    rows = [
        ("prober (t0 from all constraints), 50 ms gap", ours),
        ("max elapsed (incumbent's method), 50 ms gap", same_rate),
        ("max elapsed (incumbent's method), 1 s gap", incumbent),
    ]
    print(f"{'method':48} {'n':>6} {'p50 err':>9} {'p99 err':>9} {'max err':>9}")
    for name, errors in rows:
        p50, p99 = percentile_cont(errors, 0.5), percentile_cont(errors, 0.99)
        print(f"{name:48} {len(errors):6d} {p50:9.3f} {p99:9.3f} {max(errors):9.3f}")
    ratio = percentile_cont(incumbent, 0.99) / percentile_cont(ours, 0.99)
    print(f"p99 reaction error: incumbent / prober = {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
