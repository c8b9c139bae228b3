"""A reused HTTP/1.1 stream against a server slower than its ticks: how many of its requests
went over a fresh connection, and how many of those were replacements it recorded.

The daemon's own scheduler and probers (2 workers, `--interval` per worker) run for
`--seconds` against the test TLS server in this process, each answer held `--delay` seconds.
Printed: requests sent, samples over a fresh connection (`reused: false`), samples that say
they replaced the kept connection (`replaced`), connections the server accepted, and ticks
skipped by reason. Reused means reused when fresh = replaced = accepted connections.

    .venv/bin/python bench/reused_slow_server.py [--delay 0.3] [--interval 0.1] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prober.common.clock import SystemClock  # noqa: E402
from prober.core.models import LB, Connection, Protocol, Sample, StreamId  # noqa: E402
from prober.daemon.requests.scheduler import StreamScheduler  # noqa: E402
from prober.probe import Prober, ProbeTarget, client_context  # noqa: E402
from tests.support.certs import make_certs  # noqa: E402
from tests.support.tls_server import TLSServer  # noqa: E402

STREAM = StreamId("kube-api", Protocol.HTTP1, LB.LOCALHOST, Connection.REUSED)


async def run(delay: float, interval: float, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        certs = make_certs(Path(tmp))
        server = await TLSServer(certs.server, certs.untrusted).start()
        server.plan.delay = delay
        context = client_context(certs.ca_file, Protocol.HTTP1, verify=True)
        target = ProbeTarget(server.url + "/api/v1/namespaces/default", context, timeout=5)
        workers = [Prober(STREAM, target, time.monotonic()) for _ in range(2)]
        samples: list[Sample] = []
        scheduler = StreamScheduler(
            STREAM, workers, interval=interval, clock=SystemClock(), emit=samples.append
        )
        task = asyncio.create_task(scheduler.run())
        await asyncio.sleep(seconds)
        task.cancel()
        await scheduler.drain(timeout=delay + 1)
        for worker in workers:
            await worker.aclose()
        await server.close()
    fresh = [s for s in samples if s.reused is False]
    replaced = Counter(str(s.replaced) for s in samples if s.replaced is not None)
    print(f"server answer delay {delay:g} s, {interval:g} s per worker x 2 workers, {seconds:g} s")
    print(f"requests sent:               {scheduler.started}")
    print(f"samples:                     {len(samples)}")
    print(f"over a fresh connection:     {len(fresh)}")
    print(f"recorded as replacements:    {sum(replaced.values())} {dict(replaced)}")
    print(f"connections server accepted: {server.connections}")
    print(f"ticks skipped:               {dict(scheduler.skipped)}")
    print(f"fresh connections that are not replacements: {len(fresh) - sum(replaced.values())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--delay", type=float, default=0.3)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    asyncio.run(run(args.delay, args.interval, args.seconds))


if __name__ == "__main__":
    main()
