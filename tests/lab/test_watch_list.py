"""The daemon's watch streams sync by watch-list (client-go 1.35's default, KEP-3157) against
the fake apiserver on a real etcd: each sync a WATCH with initial events ended by the
`k8s.io/initial-events-end` bookmark, timed from request to marker, the watch going on past
it; a server that withholds the marker stalls every sync, and each stall's length agrees with
the server's own record of that watch within the bound the daemon gives it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from prober.config import load_config
from prober.core.truthlog import InitialEventsEnd, WatchEnded, WatchStarted, of_kind
from prober.daemon.app import Daemon
from prober.lab.infra.etcd import LabEtcd
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from prober.report.results.summary import build_summary
from tests.daemon.test_daemon import total
from tests.lab.test_watch_kind import events
from tests.support.apiservers import LabCerts, Running, StartServer
from tests.support.waiting import until

# What a stall's measured length may exceed the server's by beyond its bound: the watch's
# end on its way back to the daemon, which no record times (a loopback hop and a read).
END_ON_ITS_WAY = 0.5


def list_config(running: Running, certs: LabCerts, token: Path, log: Path, **more: str) -> Any:
    return load_config(env={}, flags={
        "targets": [{"lb": "internal-lb", "url": running.url}], "ca_file": str(certs.ca),
        "token_file": str(token), "connections": "reused", "listen": "127.0.0.1:0",
        "event_log": str(log), "platform": "aws", "heartbeat": "default/prober-test",
        "heartbeat_interval": "100ms", "watch_blind_after": "1s",
        # client-go's timers at 1/100: timeoutSeconds 3-5, a stall past 1 s (its floor)
        "time_scale": "0.01", **more,
    })  # fmt: skip


async def run_until(config: Any, ready: Any, what: str) -> CollectorRegistry:
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, install_signals=False)
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)
    await until(lambda: ready(registry), what, 30)
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0
    return registry


async def test_every_watch_stream_syncs_by_watch_list_each_sync_timed(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    log = tmp_path / "events.jsonl"
    registry = await run_until(
        list_config(running, certs, token_file, log),
        lambda r: (
            total(r, "prober_watch_sync_seconds_count") >= 2
            and total(r, "prober_watch_lag_seconds_count") >= 10
            and total(r, "prober_watch_ends_total", how="timeout") >= 2
        ),
        "watch-list syncs, the heartbeat seen after them, watches ended by their timeout",
    )
    attempts = events(log, "watch_attempt")
    # One sync per stream; its watch timed out and was watched again, never LISTed.
    assert {a["step"] for a in attempts} == {"watch_list", "watch"}
    firsts = {a["stream"]: a for a in reversed(attempts)}
    assert {(a["step"], a["version"]) for a in firsts.values()} == {("watch_list", "")}
    syncs = events(log, "watch_sync")
    assert syncs
    assert all(s["synced"] for s in syncs if s["how"] != "stopped")
    assert all(s["head"] <= s["t"] - s["started"] for s in syncs)
    # A busy machine may take a sync past the threshold: then still with its marker.
    assert total(registry, "prober_watch_sync_stalls_total", synced="false") == 0
    # The server sent each marker with the state it had: the heartbeat Lease, or nothing yet.
    served = of_kind(running.server.truth.records or [], InitialEventsEnd)
    assert served
    assert not any(s.withheld for s in served)
    assert {s.events for s in served} <= {0, 1}
    paths = [w.path for w in of_kind(running.server.truth.records or [], WatchStarted)]
    assert any("sendInitialEvents=true&timeoutSeconds=" in p for p in paths)
    assert all("resourceVersionMatch=NotOlderThan" in p for p in paths if "sendInitial" in p)

    runs, _ = load_runs([log])
    summary, _ = build_summary(runs[0], replay(runs[0]), "aws")
    section = summary["watches"]
    assert section["stall_after"] == 1.0
    for entry in section["streams"]:
        assert entry["syncs"]["watch_list"] >= 1
        assert entry["syncs"]["listed"] == 0
        assert entry["syncs"]["unsynced"] == {}
        assert entry["syncs"]["max"] is not None
    assert sum(e["syncs"]["watch_list"] for e in section["streams"]) == total(
        registry, "prober_watch_sync_seconds_count"
    )


async def test_a_marker_never_sent_stalls_each_sync_as_long_as_the_server_held_it(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint, withhold_initial_events_end=True)
    log = tmp_path / "events.jsonl"
    registry = await run_until(
        list_config(running, certs, token_file, log, protocols="http1"),
        lambda r: total(r, "prober_watch_sync_stalls_total") >= 3,
        "stalled watch-lists",
    )
    syncs = [s for s in events(log, "watch_sync") if s["how"] != "stopped"]
    assert syncs
    assert not any(s["synced"] for s in syncs)
    # Each ended by its timeout and was sent again at once from the same version, unsynced.
    attempts = [a for a in events(log, "watch_attempt") if a["outcome"] == "ok"]
    assert {a["step"] for a in attempts} == {"watch_list"}
    assert {a["relist_cause"] for a in attempts[1:]} == {"no-marker"}
    # Joined to the server's record by the connection (HTTP/1.1: one per watch).
    truth = running.server.truth.records or []
    started = {(w.conn, w.stream): w.peer for w in of_kind(truth, WatchStarted)}
    held = {started[(e.conn, e.stream)]: e.seconds for e in of_kind(truth, WatchEnded)}
    summary = build_summary(load_runs([log])[0][0], replay(load_runs([log])[0][0]), "aws")[0]
    stalls = [s for e in summary["watches"]["streams"] for s in e["syncs"]["stalls"]]
    checked = 0
    for stall in stalls:
        if stall["how"] != "timeout":
            continue
        attempt = next(a for a in attempts if abs(a["t"] - stall["start"]) < 1e-6)
        seconds = held[attempt["local"]]
        assert stall["lo"] - END_ON_ITS_WAY <= seconds <= stall["hi"], (stall, seconds)
        checked += 1
    assert checked >= 2
    assert total(registry, "prober_watch_sync_stalls_total", synced="false") >= 3


async def test_a_fresh_servers_429s_are_retried_as_expected_never_a_fallback(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    """KEP-4568: a server whose watch cache is not ready answers LIST and WATCH 429; client-go
    backs off and sends the watch-list again, and the report counts those 429s apart."""
    running = await start_server(etcd_servers=etcd.endpoint, watch_cache_init=2.0)
    log = tmp_path / "events.jsonl"
    await run_until(
        list_config(running, certs, token_file, log),
        lambda r: total(r, "prober_watch_sync_seconds_count") >= 2,
        "watch-list syncs once the cache is ready",
    )
    attempts = events(log, "watch_attempt")
    refused = [a for a in attempts if a["outcome"] == "too_many"]
    assert refused
    assert {(a["step"], a["status"], a["shutdown"]) for a in refused} == {
        ("watch_list", 429, False)
    }
    assert {a["step"] for a in attempts} <= {"watch_list", "watch"}  # no fallback LIST
    runs, _ = load_runs([log])
    summary, _ = build_summary(runs[0], replay(runs[0]), "aws")
    for entry in summary["watches"]["streams"]:
        assert entry["syncs"]["cache_not_ready"] >= 1
        assert entry["syncs"]["fallbacks"] == {}
        assert entry["syncs"]["watch_list"] == 1
