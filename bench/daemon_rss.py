"""Resident memory of `prober run` over a long run: it should be flat after warm-up.

The daemon (a subprocess, all 4 streams, event log on) probes a local TLS test server that
plays an endless rolling restart of three apiservers (`--cycle`: every window opens, then
closes when the host answers shutdown=false again), at 4x the default rate so a few minutes
cover the samples of a much longer run. VmRSS is read from /proc every few seconds. Printed:
the series, RSS at the end of warm-up and at the end, and the growth per 100k samples after
warm-up (the baseline being the warm-up RSS of the same run).

    .venv/bin/python bench/daemon_rss.py [--minutes 3] [--interval 25ms]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _support import json_line, metric_total  # noqa: E402


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match[1]) / 1024


def samples_done(port: int) -> float:
    import httpx

    return metric_total(httpx.get(f"http://127.0.0.1:{port}/metrics").text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--interval", default="25ms")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca, token = f"{tmp}/ca.pem", f"{tmp}/token"
        Path(token).write_text("bench-token\n")
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.tls_server", "--ca-file", ca, "--cycle", "20"],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        assert server.stdout is not None
        url = f"https://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
        daemon = subprocess.Popen(
            [sys.executable, "-m", "prober", "run", f"--target=internal-lb={url}",
             f"--ca-file={ca}", f"--token-file={token}", f"--interval={args.interval}",
             "--quiet-interval=0",
             "--listen=127.0.0.1:0", "--watches=false", f"--event-log={tmp}/events.jsonl",
             "--event-log-max-size=1MiB"],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        try:
            assert daemon.stdout is not None
            port = json_line(daemon.stdout, "listening")["port"]
            threading_drain(daemon.stdout)
            start = time.monotonic()
            series: list[tuple[float, float, float]] = []
            while (elapsed := time.monotonic() - start) < args.minutes * 60:
                series.append((elapsed, samples_done(port), rss_mb(daemon.pid)))
                time.sleep(5)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
            server.kill()
            server.wait()
    for elapsed, samples, rss in series:
        print(f"t={elapsed:6.1f}s samples={samples:9.0f} rss={rss:6.1f} MB")
    warm = next(row for row in series if row[0] >= args.warmup)
    last = series[-1]
    growth = (last[2] - warm[2]) / max(1.0, (last[1] - warm[1]) / 1e5)
    print(f"rss after warm-up ({warm[0]:.0f} s): {warm[2]:.1f} MB; at the end: {last[2]:.1f} MB")
    print(f"ratio end / warm-up: {last[2] / warm[2]:.3f}")
    print(f"growth after warm-up: {growth:+.2f} MB per 100k samples "
          f"({last[1] - warm[1]:.0f} samples)")  # fmt: skip


def threading_drain(stream) -> None:
    """Keep reading the daemon's log lines so its stdout pipe never fills."""
    import threading

    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()


if __name__ == "__main__":
    main()
