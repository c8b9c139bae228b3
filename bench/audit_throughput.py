"""How fast `prober audit summarize` parses audit logs, against a bare `json.loads` loop.

Writes a real-shaped audit log (level Metadata events of ~1 KB, 1 % of them late, in both
annotation formats) to a temporary directory, then times, on the same file in the same run:

- the baseline: `for line in open(path, "rb"): json.loads(line)`, nothing else;
- `summarize` on that directory (discovery, chunked line splitting, classification, late
  grouping), and again with a shutdown span set, which makes it read every event's time.

Each is timed in CPU seconds (the machine is shared), best of `--repeat`. The figure is the
ratio of summarize's events per second to the baseline's; the target is at least 0.5.

    .venv/bin/python bench/audit_throughput.py [--events N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prober.audit.evidence import ShutdownSpan
from prober.audit.files import discover
from prober.audit.summary import summarize
from tests.support.auditlog import OPERATOR, T0, event, graceful, line, shutdown

TARGET = 0.5


def write_log(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        for i in range(count):
            if i % 100 == 7:
                annotations = graceful() if i % 200 == 7 else shutdown()
                agent = OPERATOR
            else:
                annotations, agent = {}, f"client-{i % 40}/v1.29.0 (linux/amd64) kubernetes/abc"
            handle.write(line(event(i * 0.01, user_agent=agent, annotations=annotations)))


def best_cpu(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    best, result = float("inf"), 0
    for _ in range(repeat):
        start = time.process_time()
        result = run()
        best = min(best, time.process_time() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "master-0" / "audit.log"
        write_log(path, args.events)
        size = path.stat().st_size

        def baseline() -> int:
            count = 0
            with path.open("rb") as handle:
                for raw in handle:
                    json.loads(raw)
                    count += 1
            return count

        families, _ = discover([Path(tmp)])
        span = ShutdownSpan("events", "master-0", None, T0 + 100.0, T0 + 400.0)

        def ours() -> int:
            return summarize(families).stats.events

        def ours_with_span() -> int:
            return summarize(families, spans=[span]).stats.events

        base_s, base_n = best_cpu(baseline, args.repeat)
        ours_s, ours_n = best_cpu(ours, args.repeat)
        span_s, span_n = best_cpu(ours_with_span, args.repeat)
    assert base_n == ours_n == span_n == args.events
    print(f"file: {args.events} events, {size / 1e6:.1f} MB, {size / args.events:.0f} B/event")
    print(f"json.loads loop     {base_n / base_s:12,.0f} events/s")
    print(f"summarize           {ours_n / ours_s:12,.0f} events/s")
    print(f"summarize + window  {span_n / span_s:12,.0f} events/s")
    ratio = base_s / ours_s
    print(f"ratio summarize / json.loads: {ratio:.2f} (target >= {TARGET})")
    print(f"ratio with a window:          {base_s / span_s:.2f}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
