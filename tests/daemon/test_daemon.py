"""The whole daemon in-process against a real TLS server: disruption, shutdown window,
metrics, event log replay, and the token kept out of every output."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry

from prober.config import load_config
from prober.core.coverage import Coverage
from prober.core.header import format_shutdown_header
from prober.core.kinds import standard_kinds
from prober.core.models import REQUEST, Interval, RunEnd, RunRecord, Summary, Window
from prober.daemon.app import Daemon
from tests.support.certs import Certs
from tests.support.promtool import promtool_problems
from tests.support.replay import read_log, replay
from tests.support.tls_server import HOST_ID, READY, TLSServer
from tests.support.waiting import until

TOKEN = "first-secret-token-7f3a"


def total(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = 0.0
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                found += s.value
    return found


async def test_the_daemon_measures_a_disruption_and_a_shutdown_window(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path, log_output
) -> None:
    events = tmp_path / "events.jsonl"
    config = load_config(
        env={},
        flags={
            "targets": [{"lb": "internal-lb", "url": tls_server.url}],
            "ca_file": certs.ca_file,
            "token_file": str(token_file),
            "interval": "20ms",
            "listen": "127.0.0.1:0",
            "watches": "false",  # a toy server: no Lease API to watch
            "event_log": str(events),
            "drain_timeout": "1s",
            "platform": "aws",
            "labels": "job=e2e",
        },
    )
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, install_signals=False)
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)

    await tls_server.refuse()  # new connections fail; kept ones go on
    await until(
        lambda: (
            total(registry, "prober_requests_total", connection="new", result="connect_refused")
            >= 6
        ),
        "refused requests",
    )
    await tls_server.accept()
    await until(
        lambda: total(registry, "prober_disruption_intervals_total", connection="new") >= 2,
        "both new-connection streams to recover",
    )

    went_down = time.monotonic()
    tls_server.plan.header = lambda: format_shutdown_header(
        True, 70, time.monotonic() - went_down, HOST_ID
    )
    await until(lambda: total(registry, "prober_late_requests_total") >= 40, "late requests")
    assert total(registry, "prober_apiserver_shutting_down", apiserver=HOST_ID) == 1
    tls_server.plan.header = READY  # the same host answers shutdown=false: it restarted
    await until(
        lambda: total(registry, "prober_shutdown_windows_total", closed_by="recovered") == 1,
        "the window to close",
    )

    async with httpx.AsyncClient() as client:
        scraped = await client.get(f"http://127.0.0.1:{daemon.port}/metrics")
        ready = await client.get(f"http://127.0.0.1:{daemon.port}/readyz")
    assert ready.status_code == 200
    assert promtool_problems(scraped.content) == ""

    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0

    log = read_log(events, types=standard_kinds().record_types)
    run = log.of(RunRecord)[0]
    assert log.records[0] == run
    assert len(run.streams_of(REQUEST)) == 4
    assert run.platform == "aws"
    intervals, windows = replay(log)
    assert intervals == log.of(Interval)
    assert windows == log.of(Window)
    new_refused = [i for i in intervals if i.connection == "new" and i.error == "connect_refused"]
    assert len(new_refused) >= 2
    (window,) = windows
    assert window.host == HOST_ID
    assert window.closed_by == "recovered"
    assert window.t0_lo <= window.t0 <= window.t0_hi
    assert all(s.late > 0 and s.reaction is not None for s in window.streams)
    final = log.of(Summary)[-1]
    assert log.records[-2:] == [final, *log.of(RunEnd)]
    assert sum(s.samples for s in final.streams) == daemon.pipeline.fed
    for counters in final.streams:  # every tick sent or skipped, every request counted
        assert counters.started == counters.samples
        assert counters.due == counters.started + sum(counters.skipped.values())
    (coverage,) = log.of(Coverage)  # per window, per stream: what was due and taken
    assert (coverage.host, coverage.t0, coverage.end_t) == (window.host, window.t0, window.end_t)
    assert {c.stream for c in coverage.streams} == set(run.streams_of(REQUEST))
    for taken in coverage.streams:
        assert 0 < taken.taken <= taken.due
        assert taken.gap is not None
        assert taken.gap_start is not None
        assert taken.gap_start < window.end_t
        assert taken.gap_start + taken.gap > window.t0
    # The kept HTTP/2 stream's answers by apiserver, counted live for the rebalancing
    # (`core.rebalancing`): every answer it had, all from the one server; no other stream's.
    kept = {s.stream: s for s in final.streams if s.kept_answers or s.kept_connections}
    (counters,) = kept.values()
    assert counters.stream == "kube-api-http2-internal-lb-reused-connections"
    assert counters.kept_answers == {HOST_ID: counters.results["success"]}
    assert 1 <= counters.kept_connections <= config.workers

    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in tls_server.requests)
    assert TOKEN not in log_output.getvalue()
    assert TOKEN not in scraped.text
    assert TOKEN.encode() not in events.read_bytes()
    logged = log_output.getvalue()
    for event in ("listening", "ready", "disruption_started", "shutdown_window_closed"):
        assert f'"event": "{event}"' in logged
