"""Witness bursts in the whole daemon, against a real TLS server answering as an LB over three
apiservers would: one in three fresh connections reaches the one shutting down, until the LB
drops it. The bursts' requests are samples of the LB's fresh streams, marked, never more in
flight at once than `burst_parallel`, and they bound the reaction."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from prometheus_client import CollectorRegistry

from prober.config import load_config
from prober.core.header import format_shutdown_header
from prober.core.models import Connection, Sample, StreamId, Window
from prober.daemon.app import Daemon
from prober.daemon.requests.bursts import Slots
from prober.daemon.requests.samples import SampleFeed
from tests.daemon.test_daemon import total
from tests.support.certs import Certs
from tests.support.replay import read_log
from tests.support.tls_server import TLSServer
from tests.support.waiting import until

PARALLEL = 3


class ThreeServers:
    """The header an LB over A, B and C would bring back: A shuts down at `start`, and the
    LB routes to it until `drop` is called."""

    def __init__(self) -> None:
        self._rng = random.Random(24)
        self.down_at: float | None = None
        self.routes_to_a = True

    def __call__(self) -> str:
        host = self._rng.choice("ABC") if self.routes_to_a else self._rng.choice("BC")
        if host == "A" and self.down_at is not None:
            return format_shutdown_header(True, 70, time.monotonic() - self.down_at, "A")
        return format_shutdown_header(False, 70, 0, host)


def most_at_once(samples: list[Sample]) -> int:
    edges = sorted([(s.t, 1) for s in samples] + [(s.end, -1) for s in samples])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


async def test_bursts_are_marked_samples_within_their_parallel_limit(
    tls_server: TLSServer, certs: Certs, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    config = load_config(
        env={},
        flags={
            "targets": [{"lb": "internal-lb", "url": tls_server.url}],
            "ca_file": certs.ca_file,
            "interval": "50ms",
            "quiet_interval": "200ms",
            "burst_parallel": str(PARALLEL),
            "listen": "127.0.0.1:0",
            "watches": "false",  # a toy server: no Lease API to watch
            "event_log": str(events),
            "drain_timeout": "1s",
        },
    )
    lb = ThreeServers()
    tls_server.plan.header = lb
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, install_signals=False)
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)

    lb.down_at = time.monotonic()
    await until(lambda: total(registry, "prober_late_requests_total") >= 20, "late requests")
    lb.routes_to_a = False  # the LB drops A
    requests = [s for s in daemon.streams if isinstance(s, StreamId)]
    fresh_streams = [s.name for s in requests if s.connection is Connection.NEW]
    feed = daemon.pipeline.feed_for(Sample)  # type: ignore[union-attr]
    assert isinstance(feed, SampleFeed)
    shutdown = feed.shutdown
    await until(
        lambda: all(shutdown.settled(name) for name in fresh_streams),
        "the fresh streams' reaction bounded and confirmed",
    )
    lb.routes_to_a, lb.down_at = True, None  # A is back: the window closes
    await until(
        lambda: total(registry, "prober_shutdown_windows_total", closed_by="recovered") == 1,
        "the window to close",
    )
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0

    log = read_log(events)
    burst = [s for s in log.of(Sample) if s.burst is not None]
    assert burst, "no burst sample in the event log"
    assert {s.connection for s in burst} == {Connection.NEW}
    assert {s.protocol for s in burst} == {"http1", "http2"}  # the LB's fresh streams in turn
    assert most_at_once(burst) <= PARALLEL
    assert len(burst) == total(registry, "prober_burst_requests_total")
    (window,) = log.of(Window)
    fresh = [ws for ws in window.streams if ws.connection is Connection.NEW]
    assert all(ws.reaction_hi is not None and ws.bound_by == "sampling" for ws in fresh)
    # A burst went out after the LB's last late fresh connection: after the drop, to bound it.
    assert any(s.t > window.t0_lo + min(ws.reaction for ws in fresh) for s in burst)


async def test_slots_go_to_bounding_requests_first_then_the_oldest_burst() -> None:
    slots = Slots(1)
    await slots.acquire((0, 1))  # held
    order: list[str] = []

    async def take(name: str, priority: tuple[int, int]) -> None:
        await slots.acquire(priority)
        order.append(name)

    waiters = [
        asyncio.create_task(take(name, priority))
        for name, priority in (("confirm-1", (1, 1)), ("bound-3", (0, 3)), ("bound-2", (0, 2)))
    ]
    cancelled = asyncio.create_task(take("cancelled", (0, 0)))
    await asyncio.sleep(0)
    cancelled.cancel()
    for _ in waiters:
        slots.release()
        await asyncio.sleep(0)
    await asyncio.gather(*waiters)
    assert order == ["bound-2", "bound-3", "confirm-1"]
