"""CPU per sample: the daemon against a bare httpx loop and against the floor, per mode, and
each lever of the daemon's cost before and after, all in one run.

One local TLS test server (a separate process, not measured) answers every client. For each
mode (http1|http2 x new|reused) these clients run in turn against it, each a subprocess paced
the same way (2 staggered workers, each firing every `--interval` without waiting for
answers), for `--seconds` after a second of warm-up:

- `floor`: a minimal asyncio + ssl client, one hand-written HTTP/1.1 GET per request over the
  same TLS context (HTTP/1.1 modes only: the floor of the issue is HTTP/1.1), on the asyncio
  loop and on uvloop (`floor+uvloop`);
- `httpx`: an `httpx.AsyncClient` per worker, the same headers;
- `daemon`: the real `prober run` (event log on), on uvloop, its only loop since round 5
  (this bench measured asyncio's loop a third dearer; `floor` and `floor+uvloop` still show
  the lever);
- `before` (with `--before DIR`, a checkout of an earlier version): that version's daemon,
  e.g. the httpx-based probe, so the lever "the probe's own client" shows before and after.

The CPU each process used (utime + stime from /proc) is divided by the requests it completed
in the same window (the daemon's from /metrics, the loops' from their own count). Repeats
alternate the clients so that load changes hit all alike; the median of the repeats is
printed, per mode and client, with the daemon's ratio to the floor and to httpx.

    .venv/bin/python bench/daemon_cpu.py [--interval 20ms] [--seconds 5] [--repeats 3]
        [--before DIR] [--modes http1-new,http1-reused,...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _support import cpu_seconds, json_line, metric_total  # noqa: E402

MODES = [f"{p}-{c}" for p in ("http1", "http2") for c in ("new", "reused")]
PATH = "/api/v1/namespaces/default"


def requests_done(port: int) -> float:
    import httpx

    return metric_total(httpx.get(f"http://127.0.0.1:{port}/metrics").text)


@dataclass(frozen=True)
class Setup:
    url: str
    ca: str
    token: str
    interval: str  # per worker, as the daemon takes it
    seconds: float
    tmp: str
    before: str | None

    @property
    def gap(self) -> float:
        return float(self.interval.removesuffix("ms")) / 1000


Measure = Callable[[Setup, str], tuple[float, float]]


def daemon(tree: str | None = None) -> Measure:
    def measure(setup: Setup, mode: str) -> tuple[float, float]:
        protocol, connection = mode.split("-")
        cwd = tree or str(ROOT)
        args = [sys.executable, "-m", "prober", "run", f"--target=internal-lb={setup.url}",
                f"--ca-file={setup.ca}", f"--token-file={setup.token}",
                f"--protocols={protocol}", f"--connections={connection}",
                f"--interval={setup.interval}", "--workers=2", "--listen=127.0.0.1:0",
                "--watches=false",
                f"--event-log={setup.tmp}/events-{uuid.uuid4()}.jsonl"]  # fmt: skip
        if tree is None:  # an earlier version may not know it
            args += ["--quiet-interval=0"]
        env = {**os.environ, "PYTHONPATH": cwd}
        process = subprocess.Popen(args, stdout=subprocess.PIPE, cwd=cwd, env=env)
        try:
            port = json_line(process.stdout, "listening")["port"]
            json_line(process.stdout, "ready")
            time.sleep(1.0)  # warm-up
            n0, c0 = requests_done(port), cpu_seconds(process.pid)
            time.sleep(setup.seconds)
            n1, c1 = requests_done(port), cpu_seconds(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        return (c1 - c0) / (n1 - n0), n1 - n0

    return measure


def loop_client(kind: str, loop: str) -> Measure:
    def measure(setup: Setup, mode: str) -> tuple[float, float]:
        process = subprocess.Popen(
            [sys.executable, __file__, "--bare", kind, loop, setup.url, setup.ca, mode,
             str(setup.gap)],
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

    return measure


# --- the loops run in their own process ----------------------------------------------------


def headers(mode: str) -> dict[str, str]:
    return {
        "X-Openshift-If-Disruption": "true",
        "Audit-ID": str(uuid.uuid4()),
        "User-Agent": f"bench {mode}",
        "Authorization": "Bearer bench-token",
        "Accept": "application/json",
    }


def httpx_one(url: str, ca: str, mode: str) -> Callable[[], Callable[[], object]]:
    import httpx

    protocol, connection = mode.split("-")
    http2 = protocol == "http2"
    limits = httpx.Limits(max_keepalive_connections=0 if connection == "new" else 1)

    def worker():
        context = ssl.create_default_context(cafile=ca)
        client = httpx.AsyncClient(verify=context, http1=not http2, http2=http2, limits=limits)

        async def one() -> None:
            try:
                answer = await client.get(url + PATH, headers=headers(mode), timeout=5)
                answer.headers.get("x-openshift-disruption")
            except httpx.HTTPError:
                pass

        return one

    return worker


def floor_one(url: str, ca: str, mode: str) -> Callable[[], Callable[[], object]]:
    """What no client can beat: asyncio + ssl, one GET written by hand, the answer read by
    its Content-Length, the shutdown header looked up."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    reused = mode.endswith("reused")
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["http/1.1"])

    def request() -> bytes:
        lines = [f"GET {PATH} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{k}: {v}" for k, v in headers(mode).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def worker():
        kept: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        busy = asyncio.Lock()

        async def exchange(reader, writer) -> None:
            writer.write(request())
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
                elif name.lower() == b"x-openshift-disruption":
                    value.strip()
            await reader.readexactly(length)

        async def one() -> None:
            try:
                if not reused:
                    reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
                    await exchange(reader, writer)
                    writer.close()
                    return
                async with busy:  # one kept connection, one request at a time
                    if not kept:
                        kept.append(await asyncio.open_connection(host, int(port), ssl=context))
                    await exchange(*kept[0])
            except (OSError, asyncio.IncompleteReadError):
                pass

        return one

    return worker


async def paced(make_worker: Callable[[], Callable[[], object]], gap: float) -> None:
    done = 0

    async def worker(phase: float) -> None:
        nonlocal done
        one = make_worker()
        start = time.monotonic() + phase
        k = 0
        tasks: set[asyncio.Task[None]] = set()

        async def counted() -> None:
            nonlocal done
            await one()  # type: ignore[misc]
            done += 1

        while True:
            await asyncio.sleep(max(0.0, start + k * gap - time.monotonic()))
            task = asyncio.create_task(counted())
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


def bare(argv: list[str]) -> None:
    kind, loop, url, ca, mode, gap = argv
    make = {"httpx": httpx_one, "floor": floor_one}[kind](url, ca, mode)
    if loop == "uvloop":
        import uvloop

        uvloop.run(paced(make, float(gap)))
    else:
        asyncio.run(paced(make, float(gap)))


# --- the table -----------------------------------------------------------------------------


def median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The run with the median CPU per sample."""
    return sorted(runs)[len(runs) // 2]


def clients(before: str | None) -> dict[str, Measure]:
    chosen = {
        "floor": loop_client("floor", "asyncio"),
        "floor+uvloop": loop_client("floor", "uvloop"),
        "httpx": loop_client("httpx", "asyncio"),
        "daemon": daemon(),
    }
    if before:
        chosen["before"] = daemon(before)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", default="20ms", help="per worker, as the daemon takes it")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per client, alternating")
    parser.add_argument("--before", help="a checkout of an earlier version: its daemon too")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ca, token = f"{tmp}/ca.pem", f"{tmp}/token"
        Path(token).write_text("bench-token\n")
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.support.tls_server", "--ca-file", ca],
            stdout=subprocess.PIPE, cwd=ROOT, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            url = f"https://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
            setup = Setup(url, ca, token, args.interval, args.seconds, tmp, args.before)
            run_all(setup, args.modes.split(","), clients(args.before), args.repeats)
        finally:
            server.kill()
            server.wait()


def run_all(setup: Setup, modes: list[str], chosen: dict[str, Measure], repeats: int) -> None:
    print(f"interval {setup.interval} x 2 workers per mode, {setup.seconds:g} s measured, "
          f"median of {repeats} alternating runs; CPU microseconds per sample")  # fmt: skip
    names = list(chosen)
    print(f"{'mode':<14}" + "".join(f"{n:>15}" for n in names)
          + f"{'daemon/floor':>14}{'daemon/httpx':>14}")  # fmt: skip
    for mode in modes:
        runs: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for _ in range(repeats):
            for name in names:
                if name.startswith("floor") and mode.startswith("http2"):
                    continue
                runs[name].append(chosen[name](setup, mode))
        cost = {n: median(r)[0] for n, r in runs.items() if r}
        cells = "".join(f"{cost[n] * 1e6:>15.0f}" if n in cost else f"{'-':>15}" for n in names)
        best = cost["daemon"]
        floor = f"{best / cost['floor']:>14.2f}" if "floor" in cost else f"{'-':>14}"
        print(f"{mode:<14}{cells}{floor}{best / cost['httpx']:>14.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        bare(sys.argv[2:8])
    else:
        main()
