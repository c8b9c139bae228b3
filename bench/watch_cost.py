"""What the watch streams and the heartbeat cost: the daemon's CPU in quiet mode with and
without them, in the same run, against one fake apiserver on a real etcd.

The daemon (a subprocess, four LBs' worth of targets pointing at the one server, every request
stream at the quiet rate of 1 s, the defaults otherwise) runs in turns: watches off, watches on,
off, on..., each turn `--seconds` long, so that both see the same machine. Its CPU time comes
from /proc; the events its watches delivered from its metrics. Printed: CPU per minute of each,
the watches' share of the baseline (the target: at most 10 %), CPU per watch-hour and per
delivered event.

    .venv/bin/python bench/watch_cost.py [--seconds 60] [--turns 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prober.lab.infra.certs import LabCA  # noqa: E402
from prober.lab.infra.etcd import LabEtcd  # noqa: E402
from prober.lab.infra.processes import ProcessGroup  # noqa: E402

LBS = ("external-lb", "internal-lb", "service-network", "localhost")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))  # fmt: skip


async def turn(group: ProcessGroup, url: str, pki: LabCA, token: Path, *, watches: bool,
               seconds: float, n: int) -> tuple[float, float, float]:  # fmt: skip
    """One daemon run: (CPU seconds, wall seconds, watch events delivered)."""
    argv = [sys.executable, "-m", "prober", "run", "--platform=aws", "--listen=127.0.0.1:0",
            f"--ca-file={pki.ca_cert}", f"--token-file={token}", "--log-level=warning",
            f"--watches={'true' if watches else 'false'}", f"--heartbeat=default/bench-{n}",
            *(f"--target={lb}={url}" for lb in LBS)]  # fmt: skip
    daemon = await group.start(f"daemon-{n}", argv)
    assert daemon.pid is not None
    await asyncio.sleep(3.0)  # warm-up: connections made, first LISTs done
    start_cpu, start = cpu_seconds(daemon.pid), time.monotonic()
    await asyncio.sleep(seconds)
    used, wall = cpu_seconds(daemon.pid) - start_cpu, time.monotonic() - start
    events = await _events(daemon.pid)
    daemon.send_signal(signal.SIGTERM)
    await daemon.wait(30)
    return used, wall, events


async def _events(pid: int) -> float:
    """Watch events seen, from the daemon's /metrics (its port from its listening sockets)."""
    import httpx

    for port in _listening_ports(pid):
        try:
            async with httpx.AsyncClient() as client:
                text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
        except httpx.HTTPError:
            continue
        if "prober_build_info" in text:
            return metric(text, "prober_watch_lag_seconds_count")
    return 0.0


def _listening_ports(pid: int) -> list[int]:
    inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
              if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")}  # fmt: skip
    ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[3] == "0A" and parts[9] in inodes:
            ports.append(int(parts[1].split(":")[1], 16))
    return ports


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "logs").mkdir()
        pki = LabCA(work / "pki")
        cert = pki.issue("apiserver", ["localhost", "127.0.0.1"])
        token = work / "token"
        token.write_text("bench-token\n")
        async with ProcessGroup(work / "logs") as group:
            etcd = LabEtcd(work / "etcd")
            await etcd.start(group)
            server = await group.start("apiserver", [
                sys.executable, "-m", "prober.fakeapiserver", "--port", "0", "--cert",
                str(cert.cert), "--key", str(cert.key), "--token-file", str(token),
                "--etcd-servers", etcd.endpoint, "--synthetic-watches", "0"])  # fmt: skip
            line = await server.wait_for_line(lambda text: '"listening"' in text, 30)
            url = f"https://127.0.0.1:{__import__('json').loads(line)['port']}"
            results: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
            n = 0
            for _ in range(args.turns):
                for watches in (False, True):
                    n += 1
                    results[watches].append(
                        await turn(
                            group, url, pki, token, watches=watches, seconds=args.seconds, n=n
                        )
                    )
    off = sum(c for c, _, _ in results[False]) / sum(w for _, w, _ in results[False]) * 60
    on = sum(c for c, _, _ in results[True]) / sum(w for _, w, _ in results[True]) * 60
    events = sum(e for _, _, e in results[True])
    wall = sum(w for _, w, _ in results[True])
    streams = 2 * len(LBS)
    extra = (on - off) / 60 * wall  # CPU seconds the watches added over the watched time
    print(f"quiet mode, {len(LBS)} LBs: CPU {off:.2f} s/min without watches, {on:.2f} s/min "
          f"with {streams} watch streams and the heartbeat")  # fmt: skip
    print(f"watches' share of the baseline: {(on - off) / off:+.1%} (target: at most +10%)")
    print(
        f"per watch-hour: {extra / (streams * wall / 3600):.2f} CPU s; per delivered event: "
        f"{extra / events * 1000 if events else float('nan'):.2f} CPU ms ({events:.0f} events)"
    )


if __name__ == "__main__":
    asyncio.run(main())
