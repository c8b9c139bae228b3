"""Scrape latency and sampling rate of the daemon while Prometheus scrapes it hard.

The real `prober run` (a subprocess) probes one local TLS test server (another subprocess) on
4 streams at `--interval` per worker, 2 workers. Then, for `--seconds`, /metrics and, as the
baseline in the same run, /healthz (the same server and event loop, no encoding) are each
fetched `--per-second` times a second over one kept connection, alternating. Printed: p50,
p99 and max latency of both and the ratio /metrics over /healthz, and the samples per second
the daemon kept up during the scrapes against its nominal rate. These are the speed figures
`tests/reliability/test_daemon_faults.py` prints but no longer asserts.

    .venv/bin/python bench/scrape_latency.py [--interval 25ms] [--per-second 50] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _support import json_line, metric_total  # noqa: E402

STREAMS, WORKERS = 4, 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scrape(port: int, per_second: float, seconds: float) -> tuple[list, list, float]:
    """Alternate /metrics and /healthz, each `per_second` a second; latencies, and the
    samples the daemon completed during the window."""
    metrics, healthz = [], []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        first = metric_total(client.get("/metrics").text)
        start = time.monotonic()
        step = 1.0 / (2 * per_second)
        for index in range(round(2 * per_second * seconds)):
            time.sleep(max(0.0, start + index * step - time.monotonic()))
            path, bucket = ("/metrics", metrics) if index % 2 == 0 else ("/healthz", healthz)
            sent = time.monotonic()
            answer = client.get(path)
            bucket.append(time.monotonic() - sent)
            answer.raise_for_status()
        elapsed = time.monotonic() - start
        done = metric_total(client.get("/metrics").text) - first
    return metrics, healthz, done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", default="25ms", help="per worker, as the daemon takes it")
    parser.add_argument("--per-second", type=float, default=50.0, help="scrapes of each path")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    nominal = STREAMS * WORKERS / (float(args.interval.removesuffix("ms")) / 1000)
    with tempfile.TemporaryDirectory() as tmp:
        ca = f"{tmp}/ca.pem"
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.tls_server", "--ca-file", ca],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        daemon = None
        try:
            assert server.stdout is not None
            url = f"https://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
            daemon = subprocess.Popen(
                [sys.executable, "-m", "prober", "run", f"--target=internal-lb={url}",
                 f"--ca-file={ca}", f"--interval={args.interval}", "--quiet-interval=0",
                 f"--workers={WORKERS}",
                 "--listen=127.0.0.1:0", "--watches=false", f"--event-log={tmp}/events.jsonl"],
                stdout=subprocess.PIPE, cwd=ROOT,
            )  # fmt: skip
            port = json_line(daemon.stdout, "listening")["port"]
            json_line(daemon.stdout, "ready")
            time.sleep(1.0)  # warm-up
            metrics, healthz, rate = scrape(port, args.per_second, args.seconds)
        finally:
            if daemon is not None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=30)
            server.kill()
            server.wait()
    print(f"{len(metrics)} scrapes of /metrics, {len(healthz)} of /healthz in {args.seconds:g} s")
    print(f"{'path':<10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for name, values in (("/metrics", metrics), ("/healthz", healthz)):
        print(
            f"{name:<10}{statistics.median(values) * 1000:>9.1f}"
            f"{percentile(values, 0.99) * 1000:>9.1f}{max(values) * 1000:>9.1f}"
        )
    ratio = statistics.median(metrics) / statistics.median(healthz)
    print(f"median latency /metrics over /healthz (baseline, same run): {ratio:.2f}")
    print(f"samples/s kept during the scrapes: {rate:.0f} of {nominal:.0f} nominal "
          f"({rate / nominal:.0%})")  # fmt: skip


if __name__ == "__main__":
    main()
