"""The daemon against servers that try what issue 22 found, each beside a well-behaved one:
its peak RSS and samples per stream while probing each, and the ratios to the good server's.

Servers (the test TLS server in this process, one at a time, the same daemon flags each):
- `good`: answers every request;
- `chunk_bomb`: HTTP/1.1 answers announcing a chunk of FFFFFFFFFFFFFFFF bytes, then data;
- `max_frame_zero`: HTTP/2 SETTINGS_MAX_FRAME_SIZE=0;
- `huge_table`: HTTP/2 SETTINGS_HEADER_TABLE_SIZE=2^31 (every Audit-ID kept and searched);
- `host_per_answer`: shutdown=true from a new apiserver name in every answer.
The daemon (`prober run`, 4 streams: HTTP/1.1 and HTTP/2, new and reused, 20 samples/s
each) runs `--seconds` against each; RSS is polled from /proc, samples come from its event
log's last summary. A hostile server may cost samples (its answers are failures, not
answers) but must not cost memory, or the samples of the streams it does not touch.

    .venv/bin/python bench/hostile_servers.py [--seconds 8] [--daemon-src DIR]

`--daemon-src` runs the daemon from another checkout (`git worktree add DIR REV`), to hold an
earlier version against the same servers in the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.certs import make_certs  # noqa: E402
from tests.support.tls_server import TLSServer, host_per_answer  # noqa: E402

CASES = ("good", "chunk_bomb", "max_frame_zero", "huge_table", "host_per_answer")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def last_summary(log: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "summary":  # the last one: written as the daemon stops
            found = {s["stream"]: s["samples"] for s in record["streams"]}
    return found


async def run_case(
    case: str, seconds: float, tmp: Path, source: Path | None
) -> tuple[float, dict[str, int]]:
    certs = make_certs(tmp / case / "pki")
    server = TLSServer(certs.server, certs.untrusted, keep_requests=False)
    if case == "host_per_answer":
        server.plan.header = host_per_answer()
    elif case != "good":
        server.plan.mode = case
    await server.start()
    log = tmp / case / "events.jsonl"
    argv = [
        sys.executable, "-m", "prober", "run", "--platform", "aws",
        "--target", f"internal-lb={server.url}", "--ca-file", certs.ca_file,
        "--interval", "100ms", "--quiet-interval", "0", "--timeout", "2s",
        "--listen", "127.0.0.1:0", "--watches", "false", "--event-log", str(log),
        "--duration", f"{seconds:g}s",
    ]  # fmt: skip
    env = {**os.environ, **({"PYTHONPATH": str(source)} if source else {})}
    daemon = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=source,  # `-m` puts the working directory first on the path
    )
    peak = 0.0
    try:
        async with asyncio.timeout(seconds + 60):
            while daemon.returncode is None:
                peak = max(peak, rss_mb(daemon.pid) or 0.0)
                try:
                    await asyncio.wait_for(daemon.wait(), 0.2)
                except TimeoutError:
                    continue
    finally:
        if daemon.returncode is None:
            daemon.kill()
        await server.close()
    return peak, last_summary(log)


def short(stream: str) -> str:
    return stream.removeprefix("kube-api-").removesuffix("-connections").replace("internal-lb-", "")


async def main_async(seconds: float, source: Path | None) -> None:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            results[case] = await run_case(case, seconds, Path(tmp), source)
    good_rss, good_samples = results["good"]
    streams = sorted(good_samples)
    print(f"daemon, 4 streams at 20 samples/s each, {seconds:g} s against each server")
    head = f"{'server':16} {'peak RSS':>9} {'x good':>7}  " + "  ".join(
        f"{short(s):>13}" for s in streams
    )
    print(head)
    for case, (rss, samples) in results.items():
        cells = []
        for stream in streams:
            ratio = samples.get(stream, 0) / good_samples[stream] if good_samples[stream] else 0
            cells.append(f"{samples.get(stream, 0):6d} {ratio:5.2f}x")
        print(f"{case:16} {rss:7.1f}MB {rss / good_rss:6.2f}x  " + "  ".join(cells))
    print("per stream: samples, and their ratio to the good server's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--daemon-src", type=Path, help="run the daemon from this checkout")
    args = parser.parse_args()
    asyncio.run(main_async(args.seconds, args.daemon_src))


if __name__ == "__main__":
    main()
