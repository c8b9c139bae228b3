"""Adaptive sampling against the fake kube-apiserver: quiet until a shutdown starts, then the
window rate on every stream within one quiet interval of the first `shutdown=true` answer.

Real probers over real TLS; the schedulers tick on a fake clock and the apiserver runs on a
manual one, so the test steps time itself and waits on the requests, never on the machine."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from pathlib import Path

from prober.core.models import LB, Connection, Pace, PaceChange, Protocol, Sample, StreamId
from prober.core.pace import PaceTracker
from prober.daemon.requests.pacer import Pacer
from prober.daemon.requests.samples import SampleFeed
from prober.daemon.requests.scheduler import StreamScheduler
from prober.probe import Prober, ProbeTarget, TokenFile, client_context
from tests.support.apiservers import LabCerts, StartServer
from tests.support.clock import FakeClock
from tests.support.waiting import until

QUIET, INTERVAL, WORKERS = 1.0, 0.1, 2
WINDOW_GAP = INTERVAL / WORKERS
STEP = 0.01
STREAMS = [StreamId("kube-api", p, LB.LOCALHOST, c) for p in Protocol for c in Connection]


class Timed:
    """A prober whose requests are stamped with the fake clock's time as they start."""

    def __init__(self, prober: Prober, clock: FakeClock, ticks: list[float]) -> None:
        self.prober, self.clock, self.ticks = prober, clock, ticks
        self.capacity = prober.capacity

    async def sample(self) -> Sample:
        self.ticks.append(self.clock.now)
        return await self.prober.sample()

    def stop(self) -> None:
        self.prober.stop()


async def test_the_window_rate_engages_within_one_quiet_interval_on_every_stream(
    start_server: StartServer, certs: LabCerts, token_file: Path
) -> None:
    running = await start_server(manual_clock=True, shutdown_delay=10.0)
    clock, pacer = FakeClock(), Pacer(QUIET)
    changes: list[tuple[float, Pace]] = []

    def on_pace(change: PaceChange) -> None:
        if change.stream is None:
            changes.append((clock.now, change.pace))
        pacer.set(change)

    start = time.monotonic()
    pipeline = SampleFeed(
        STREAMS, [], wall_start=time.time(), pace=PaceTracker(30.0),
        on_pace=on_pace,
    )  # fmt: skip
    ticks: dict[str, list[float]] = {s.name: [] for s in STREAMS}
    schedulers = []
    for index, stream in enumerate(STREAMS):
        context = client_context(str(certs.ca), stream.protocol, verify=True)
        target = ProbeTarget(
            running.url + "/api/v1/namespaces/default", context, token=TokenFile(str(token_file))
        )
        workers = [
            Timed(Prober(stream, target, start), clock, ticks[stream.name]) for _ in range(WORKERS)
        ]
        scheduler = StreamScheduler(
            stream, workers, interval=INTERVAL, clock=clock, emit=pipeline.feed,
            pacer=pacer, rng=random.Random(index),
        )  # fmt: skip
        schedulers.append(scheduler)
    tasks = [asyncio.create_task(s.run()) for s in schedulers]

    async def step_until(predicate, limit: float) -> None:
        deadline = clock.now + limit
        while not predicate() and clock.now < deadline:
            await clock.advance(STEP)
            await until(lambda: sum(s.in_flight for s in schedulers) == 0, "answers")

    try:
        await step_until(lambda: False, 3.0)  # quiet: nothing shuts down
        assert changes == []
        running.server.begin_shutdown()
        await step_until(lambda: bool(changes), 3.0)
        assert [pace for _, pace in changes] == [Pace.WINDOW]
        engaged = changes[0][0]
        await step_until(lambda: False, QUIET)
    finally:
        for task in tasks:
            task.cancel()
        for scheduler in schedulers:
            await scheduler.drain(1.0)

    assert pipeline.shutdown.open_hosts  # the answers said shutdown=true from then on
    for name, times in ticks.items():
        before = [t for t in times if t < engaged - STEP]
        after = [t for t in times if t >= engaged]
        quiet_gaps = [b - a for a, b in itertools.pairwise(before)]
        assert quiet_gaps, name
        assert min(quiet_gaps) >= QUIET * 0.5 - STEP, name
        # Within one quiet interval of the first late answer: in fact within a window gap.
        assert after[0] - engaged <= WINDOW_GAP + STEP, name
        window_gaps = [b - a for a, b in itertools.pairwise(after)]
        assert max(window_gaps) <= WINDOW_GAP * 1.5 + STEP, name
