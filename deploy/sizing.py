"""CPU and memory of `prober run` at its default rate: the figures behind the manifests'
resource requests and limits.

The real daemon (a subprocess, defaults: 2 workers x 100ms per stream, event log on) probes
four targets, one per LB kind (16 streams), all served by one fake kube-apiserver (`python -m
prober.fakeapiserver`, a separate process, not measured). Sampling is adaptive: `--pace window`
(the default) holds the window rate throughout (`--quiet-interval 0`: 320 samples/s, what a
rollout costs, and what the requests are sized for); `--pace quiet` leaves the daemon at its
quiet rate (16 samples/s, the rest of the time). After a warm-up it reads the daemon's CPU time
(utime + stime from /proc) and RSS every few seconds. Printed: samples per second, CPU in cores
and per sample, RSS at the end and at its peak.

    .venv/bin/python deploy/sizing.py [--seconds 60] [--warmup 20] [--pace window|quiet]
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

from prober.lab.infra.certs import make_certificates

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the helpers the daemon benchmarks share

from _support import cpu_seconds, json_line, metric_total  # noqa: E402

LBS = ("external-lb", "internal-lb", "service-network", "localhost")


def memory_mb(pid: int, field: str) -> float:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert match is not None, field
    return int(match[1]) / 1024


def samples_done(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return metric_total(answer.read().decode())


def drain(stream: IO[str]) -> None:
    """Keep reading a child's output so its pipe never fills."""
    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before it")
    parser.add_argument("--pace", choices=("window", "quiet"), default="window")
    args = parser.parse_args()
    pace = ["--quiet-interval=0"] if args.pace == "window" else []
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert = make_certificates(Path(tmp), ["127.0.0.1", "localhost"])
        token = Path(tmp) / "token"
        token.write_text("sizing-token\n")
        server = subprocess.Popen(
            [sys.executable, "-m", "prober.fakeapiserver", "--port", "0",
             "--cert", str(cert.cert), "--key", str(cert.key), "--token-file", str(token)],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        assert server.stdout is not None
        url = f"https://127.0.0.1:{json_line(server.stdout, 'listening')['port']}"
        drain(server.stdout)
        targets = [f"--target={lb}={url}" for lb in LBS]
        daemon = subprocess.Popen(
            [sys.executable, "-m", "prober", "run", *targets, f"--ca-file={ca}",
             f"--token-file={token}", "--listen=127.0.0.1:0", f"--event-log={tmp}/events.jsonl",
             *pace],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        try:
            assert daemon.stdout is not None
            port = int(str(json_line(daemon.stdout, "listening")["port"]))
            drain(daemon.stdout)
            time.sleep(args.warmup)
            start, cpu0, done0 = time.monotonic(), cpu_seconds(daemon.pid), samples_done(port)
            rss: list[float] = []
            while time.monotonic() - start < args.seconds:
                time.sleep(5)
                rss.append(memory_mb(daemon.pid, "VmRSS"))
            elapsed = time.monotonic() - start
            cpu = cpu_seconds(daemon.pid) - cpu0
            samples = samples_done(port) - done0
            peak = memory_mb(daemon.pid, "VmHWM")
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
            server.kill()
            server.wait()
    print(f"streams: {len(LBS) * 4} at the {args.pace} rate, measured {elapsed:.0f} s after "
          f"{args.warmup:.0f} s warm-up")  # fmt: skip
    print(f"samples: {samples / elapsed:.0f}/s")
    print(f"cpu: {cpu / elapsed:.3f} cores, {1000 * cpu / samples:.2f} ms per sample")
    # VmHWM is updated lazily by the kernel: the peak is the larger of it and the samples.
    print(f"rss: {rss[-1]:.1f} MB at the end, {max([*rss, peak]):.1f} MB peak")


if __name__ == "__main__":
    main()
