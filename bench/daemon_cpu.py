"""CPU per sample of the daemon against a bare httpx loop doing the same requests, per mode.

One local TLS test server (a separate process, not measured) answers both clients. For each
mode (http1|http2 x new|reused), the real `prober run` (a subprocess with the event log on)
and then a bare loop (a subprocess: `httpx.AsyncClient` per worker, the same headers, the
same pacing: 2 staggered workers each firing every INTERVAL without waiting for answers)
run against it. After a warm-up, the CPU each process used (utime + stime from /proc) is
divided by the requests it completed in the same window (the daemon's from /metrics, the
loop's from its own count). Printed: CPU per sample for both, their ratio (target: the
daemon within 1.25x), and samples per CPU second.

    .venv/bin/python bench/daemon_cpu.py [--interval 20ms] [--seconds 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")
MODES = [(p, c) for p in ("http1", "http2") for c in ("new", "reused")]
PATH = "/api/v1/namespaces/default"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def read_json_line(stream, key: str) -> dict:
    for raw in stream:
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line.get("event") == key:
            return line
    raise RuntimeError(f"no {key!r} line")


def requests_done(port: int) -> float:
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    return sum(float(m[1]) for m in re.finditer(r"^prober_requests_total\{.*\} (\S+)$", text, re.M))


@dataclass(frozen=True)
class Setup:
    url: str
    ca: str
    token: str
    interval: str  # per worker, as the daemon takes it
    seconds: float
    tmp: str

    @property
    def gap(self) -> float:
        return float(self.interval.removesuffix("ms")) / 1000


def measure_daemon(setup: Setup, mode: tuple[str, str]) -> tuple[float, float]:
    protocol, connection = mode
    url, ca, token, interval, tmp = setup.url, setup.ca, setup.token, setup.interval, setup.tmp
    process = subprocess.Popen(
        [sys.executable, "-m", "prober", "run", f"--target=internal-lb={url}",
         f"--ca-file={ca}", f"--token-file={token}", f"--protocols={protocol}",
         f"--connections={connection}", f"--interval={interval}", "--workers=2",
         "--listen=127.0.0.1:0", f"--event-log={tmp}/events-{protocol}-{connection}.jsonl"],
        stdout=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    try:
        port = read_json_line(process.stdout, "listening")["port"]
        read_json_line(process.stdout, "ready")
        time.sleep(1.0)  # warm-up
        n0, c0 = requests_done(port), cpu_seconds(process.pid)
        time.sleep(setup.seconds)
        n1, c1 = requests_done(port), cpu_seconds(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    return (c1 - c0) / (n1 - n0), n1 - n0


def measure_bare(setup: Setup, mode: tuple[str, str]) -> tuple[float, float]:
    protocol, connection = mode
    process = subprocess.Popen(
        [sys.executable, __file__, "--bare", setup.url, setup.ca, "bench-token", protocol,
         connection, str(setup.gap)],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, cwd=ROOT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdin is not None
        process.stdout.readline()  # started
        time.sleep(1.0)
        process.stdin.write("\n")
        process.stdin.flush()
        n0, c0 = int(process.stdout.readline()), cpu_seconds(process.pid)
        time.sleep(setup.seconds)
        process.stdin.write("\n")
        process.stdin.flush()
        n1, c1 = int(process.stdout.readline()), cpu_seconds(process.pid)
    finally:
        process.kill()
        process.wait()
    return (c1 - c0) / (n1 - n0), n1 - n0


async def bare_loop(url: str, *, ca: str, token: str, protocol: str, connection: str, gap: float):
    """What a hand-written prober would do: no pipeline, no metrics, no event log."""
    import ssl

    import httpx

    done = 0
    http2 = protocol == "http2"
    limits = httpx.Limits(max_keepalive_connections=0 if connection == "new" else 1)

    def client() -> httpx.AsyncClient:
        context = ssl.create_default_context(cafile=ca)
        return httpx.AsyncClient(verify=context, http1=not http2, http2=http2, limits=limits)

    async def one(c: httpx.AsyncClient) -> None:
        nonlocal done
        headers = {
            "X-Openshift-If-Disruption": "true",
            "Audit-ID": str(uuid.uuid4()),
            "User-Agent": f"bare {protocol} {connection}",
            "Authorization": f"Bearer {token}",
        }
        try:
            response = await c.get(url + PATH, headers=headers, timeout=5)
            response.headers.get("x-openshift-disruption")
        except httpx.HTTPError:
            pass
        done += 1

    async def worker(phase: float) -> None:
        c = client()
        start = time.monotonic() + phase
        k = 0
        tasks: set[asyncio.Task[None]] = set()
        while True:
            await asyncio.sleep(max(0.0, start + k * gap - time.monotonic()))
            task = asyncio.create_task(one(c))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1

    async def report() -> None:
        loop = asyncio.get_running_loop()
        while True:
            await loop.run_in_executor(None, sys.stdin.readline)
            print(done, flush=True)

    print("started", flush=True)
    await asyncio.gather(worker(0.0), worker(gap / 2), report())


def median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The run with the median CPU per sample."""
    return sorted(runs)[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", default="20ms", help="per worker, as the daemon takes it")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per client, alternating")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca, token = f"{tmp}/ca.pem", f"{tmp}/token"
        Path(token).write_text("bench-token\n")
        setup_args = (ca, token, args.interval, args.seconds, tmp)
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.tls_server", "--ca-file", ca],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            url = f"https://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
            setup = Setup(url, *setup_args)
            print(f"interval {args.interval} x 2 workers per mode, {args.seconds:g} s measured")
            print(f"{'mode':<14}{'daemon us/sample':>18}{'bare us/sample':>16}{'ratio':>8}"
                  f"{'daemon samples/cpu-s':>22}{'bare samples/cpu-s':>20}")  # fmt: skip
            ratios = []
            for mode in MODES:
                daemon_runs, bare_runs = [], []
                for _ in range(args.repeats):  # alternate, so load changes hit both alike
                    daemon_runs.append(measure_daemon(setup, mode))
                    bare_runs.append(measure_bare(setup, mode))
                (d, dn), (b, bn) = median(daemon_runs), median(bare_runs)
                ratios.append(d / b)
                print(f"{'-'.join(mode):<14}{d * 1e6:>18.0f}{b * 1e6:>16.0f}{d / b:>8.2f}"
                      f"{1 / d:>22.0f}{1 / b:>20.0f}   (n={dn:.0f}/{bn})")  # fmt: skip
            print(f"median of {args.repeats} alternating runs per client and mode")
            print(f"worst ratio daemon/bare: {max(ratios):.2f} (target <= 1.25)")
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        url, ca, token, protocol, connection, gap = sys.argv[2:8]
        asyncio.run(
            bare_loop(
                url, ca=ca, token=token, protocol=protocol, connection=connection, gap=float(gap)
            )
        )
    else:
        main()
