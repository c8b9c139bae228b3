"""A third kind of stream, registered through the seam only (`tests/daemon/tickkind.py`):
the daemon runs it, its records reach the event log, its metrics and `prober analyze`'s
replay, and requests beside it measure as they always did. Nothing in `daemon/app.py` or the
pipeline names it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from prober.common.segments import read_lines
from prober.config import load_config
from prober.core.eventlog import EventLogReader
from prober.core.models import REQUEST, Interval, RunRecord, Sample, Window
from prober.daemon.app import Daemon
from prober.daemon.kinds import KindRegistry
from prober.daemon.registry import default_kinds
from prober.daemon.requests.kind import RequestKind
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from tests.daemon.test_daemon import total
from tests.daemon.tickkind import TICK, Tick, TickKind, TickTotal
from tests.support.certs import Certs
from tests.support.clock import FakeClock
from tests.support.tls_server import TLSServer
from tests.support.waiting import until

TICKS = 3


def tick_config(events: Path, url: str = "https://127.0.0.1:9", **flags: object):
    return load_config(
        env={},
        flags={
            "targets": [{"lb": "internal-lb", "url": url}],
            "listen": "127.0.0.1:0",
            "watches": "false",  # a toy server: no Lease API to watch
            "event_log": str(events),
            "drain_timeout": "1s",
            "platform": "aws",
            **flags,
        },
    )


def read_all(events: Path, kinds: KindRegistry) -> list:
    return list(EventLogReader(read_lines(events), types=kinds.table.record_types, strict=True))


@pytest.mark.parametrize("with_feed", [True, False], ids=["own-feed", "no-feed"])
async def test_a_kind_registered_through_the_seam_reaches_log_metrics_and_replay(
    tmp_path: Path, with_feed: bool
) -> None:
    events, clock, registry = tmp_path / "events.jsonl", FakeClock(), CollectorRegistry()
    kinds = KindRegistry([TickKind(period=1.0, feed=with_feed)])
    daemon = Daemon(
        tick_config(events), registry=registry, clock=clock, install_signals=False, kinds=kinds
    )
    names = [s.name for s in daemon.streams]
    assert names == ["kube-api-http1-internal-lb-tick", "kube-api-http2-internal-lb-tick"]
    task = asyncio.create_task(daemon.run())
    # Two tickers, the readiness check and the summaries wait on the clock once started.
    await until(lambda: clock.sleepers >= 4, "the daemon to start its tasks")
    for _ in range(TICKS):
        await clock.advance(1.0)
    await asyncio.wait_for(daemon.ready.wait(), 5)  # every tick stream has made a record
    async with httpx.AsyncClient() as client:
        ready = await client.get(f"http://127.0.0.1:{daemon.port}/readyz")
    assert ready.status_code == 200
    assert total(registry, "prober_ticks_total") == TICKS * len(names)
    # Each record kind of the kind is exported at zero in the event log's drop counter.
    assert {"tick", "tick_total"} <= exported_kinds(registry)
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0

    records = read_all(events, kinds)
    run = records[0]
    assert isinstance(run, RunRecord)
    assert run.kind_streams == {TICK: tuple(names)}
    ticks = [r for r in records if isinstance(r, Tick)]
    assert sorted((t.stream, t.n) for t in ticks) == [
        (name, n) for name in names for n in range(1, TICKS + 1)
    ]
    totals = [r for r in records if isinstance(r, TickTotal)]
    assert [(t.stream, t.ticks) for t in totals] == (
        [(name, TICKS) for name in names] if with_feed else []
    )

    runs, stats = load_runs([events], kinds=kinds.table)
    assert replay(runs[0]).of_kind(TICK) == tuple(ticks + totals)
    assert stats.unknown_kinds == 0
    # A reader that was not given the kind skips its records and counts them, as ever.
    runs, stats = load_runs([events])
    assert (runs[0].others, stats.unknown_kinds) == ({}, len(ticks) + len(totals))


def exported_kinds(registry: CollectorRegistry) -> set[str]:
    return {
        s.labels["kind"]
        for metric in registry.collect()
        for s in metric.samples
        if s.name == "prober_event_log_dropped_total"
    }


async def test_requests_measure_as_ever_beside_another_kind(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path
) -> None:
    events, registry = tmp_path / "events.jsonl", CollectorRegistry()
    kinds = default_kinds()
    kinds.register(TickKind(period=0.01))
    config = tick_config(
        events, tls_server.url, ca_file=certs.ca_file, token_file=str(token_file), interval="20ms"
    )
    daemon = Daemon(config, registry=registry, install_signals=False, kinds=kinds)
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)  # a sample and a tick of every stream
    await tls_server.refuse()
    await until(
        lambda: total(registry, "prober_requests_total", result="connect_refused") >= 4,
        "refused requests",
    )
    await tls_server.accept()
    await until(
        lambda: total(registry, "prober_disruption_intervals_total", connection="new") >= 2,
        "both new-connection streams to recover",
    )
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0

    records = read_all(events, kinds)
    run = records[0]
    assert len(run.streams_of(REQUEST)) == 4
    assert all(n.endswith("-connections") for n in run.streams_of(REQUEST))
    assert len(run.kind_streams[TICK]) == 2
    assert any(isinstance(r, Tick) for r in records)
    runs, _ = load_runs([events], kinds=kinds.table)
    result = replay(runs[0])
    assert result.warnings == ()  # the request kind's replay gives back the daemon's records
    assert list(result.intervals) == [r for r in records if isinstance(r, Interval)]
    assert list(result.windows) == [r for r in records if isinstance(r, Window)]
    assert sum(isinstance(r, Sample) for r in records) > 0
    assert len(result.of_kind(TICK)) == sum(isinstance(r, Tick | TickTotal) for r in records)


def test_a_kind_of_a_name_or_record_kind_taken_is_refused() -> None:
    kinds = default_kinds()
    with pytest.raises(ValueError, match="'request' is there already"):
        kinds.register(RequestKind())
    kinds.register(TickKind(period=1.0))
    with pytest.raises(ValueError, match="'tick' is there already"):
        kinds.register(TickKind(period=2.0))
