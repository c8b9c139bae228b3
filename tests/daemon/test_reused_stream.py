"""Reused means reused: a reused HTTP/1.1 stream against a server slower than its ticks keeps
one connection per worker; the ticks that find it busy are skipped and counted, never queued
behind it and never sent over a connection of their own. Real probers and a real TLS server;
the ticks come from a fake clock, so the test waits on the server, not on the machine."""

from __future__ import annotations

import asyncio
import time

from prober.core.models import LB, Connection, Protocol, Replacement, Sample, StreamId
from prober.daemon.requests.scheduler import StreamScheduler
from prober.probe import Prober, ProbeTarget, client_context
from tests.support.certs import Certs
from tests.support.clock import FakeClock
from tests.support.tls_server import TLSServer
from tests.support.waiting import until

STREAM = StreamId("kube-api", Protocol.HTTP1, LB.LOCALHOST, Connection.REUSED)


async def test_a_slow_server_skips_ticks_and_never_opens_a_second_connection(
    tls_server: TLSServer, certs: Certs
) -> None:
    gate = asyncio.Event()
    tls_server.plan.gate = gate  # every answer waits until the test opens the gate
    context = client_context(certs.ca_file, Protocol.HTTP1, verify=True)
    target = ProbeTarget(tls_server.url + "/api/v1/namespaces/default", context, timeout=30)
    workers = [Prober(STREAM, target, time.monotonic()) for _ in range(2)]
    clock, emitted = FakeClock(), list[Sample]()
    sched = StreamScheduler(
        STREAM, workers, interval=1.0, clock=clock, emit=emitted.append, jitter=0.0
    )
    task = asyncio.create_task(sched.run())
    try:
        await tls_server.wait_for(lambda s: len(s.requests) == 1)
        await clock.advance(0.5)
        await tls_server.wait_for(lambda s: len(s.requests) == 2)
        for _ in range(6):  # both connections busy: every tick is skipped
            await clock.advance(0.5)
        assert sched.skipped == {"busy": 6}
        assert (tls_server.connections, len(tls_server.requests)) == (2, 2)

        gate.set()
        await until(lambda: len(emitted) == 2, "the two held answers")
        for sent in range(3, 11):  # the server answers at once now: no tick is skipped
            await clock.advance(0.5)
            await until(lambda n=sent: len(emitted) == n, f"answer {sent}")
    finally:
        task.cancel()
        for worker in workers:
            await worker.aclose()

    assert sched.skipped == {"busy": 6}
    assert tls_server.connections == 2
    assert all(s.error is None for s in emitted)
    assert sorted((s.reused, s.replaced) for s in emitted) == sorted(
        [(False, Replacement.FIRST)] * 2 + [(True, None)] * 8
    )
    assert len({s.local_port for s in emitted}) == 2
