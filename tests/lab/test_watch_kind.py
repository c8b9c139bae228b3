"""The daemon's watch streams against the fake apiserver on a real etcd: LIST, WATCH with
bookmarks and client-go's timeouts, the heartbeat Lease renewed and seen on every stream, a
watch ended by its timeout watched again at once from its version, one re-established on a
server already shutting down counted as doomed, one that meets a fresh cache listed again
after its 410; the live metrics and the event log's replay say the same."""

from __future__ import annotations

import asyncio
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from prober.common.exits import ExitCode
from prober.config import load_config
from prober.daemon.app import Daemon
from prober.daemon.kinds import KindRegistry
from prober.daemon.watches.kind import WatchKind
from prober.fakeapiserver.etcd import EtcdClient, b64
from prober.lab.infra.etcd import LabEtcd
from prober.lab.infra.haproxy import free_port
from prober.report.analyze import analyze_command
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from prober.report.results.summary import build_summary
from tests.daemon.test_daemon import total
from tests.support.apiservers import TOKEN, LabCerts, Running, StartServer
from tests.support.clock import FakeClock
from tests.support.waiting import until


def events(path: Path, kind: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in lines if r.get("kind") == kind]


def watch_config(running: Running, certs: LabCerts, token: Path, log: Path) -> Any:
    return load_config(
        env={},
        flags={
            "targets": [{"lb": "internal-lb", "url": running.url}],
            "ca_file": str(certs.ca),
            "token_file": str(token),
            "connections": "reused",
            "interval": "100ms",
            "listen": "127.0.0.1:0",
            "event_log": str(log),
            "platform": "aws",
            "heartbeat": "default/prober-test",
            "heartbeat_interval": "100ms",
            # client-go's timers at 1/300: timeoutSeconds 1, a watch ends every second or so
            "time_scale": "0.00334",
            "watch_blind_after": "1s",
            "watches": "list",  # LIST then WATCH; watch-list syncs: tests/lab/test_watch_list.py
        },
    )


async def test_watch_streams_follow_the_heartbeat_through_a_shutdown_and_a_restart(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint, shutdown_delay=3.0)
    log = tmp_path / "events.jsonl"
    registry = CollectorRegistry()
    daemon = Daemon(watch_config(running, certs, token_file, log), registry=registry,
                    install_signals=False)  # fmt: skip
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)

    def watched(how: str) -> int:
        return total(registry, "prober_watch_ends_total", how=how)

    # Each watch's timeoutSeconds ends it cleanly, and it is watched again from its version.
    await until(lambda: watched("timeout") >= 4, "watches ended by their timeout", 30)
    await until(lambda: total(registry, "prober_watch_lag_seconds_count") >= 20, "lag", 30)
    # The server shuts down: the next re-watch lands on it while it says shutdown=true.
    running.server.begin_shutdown("test")
    await until(lambda: total(registry, "prober_watch_doomed_total") >= 2, "doomed re-watches", 30)
    await asyncio.wait_for(running.server.wait_stopped(), 30)
    # Others write meanwhile (in a cluster, through the other apiservers).
    writer = EtcdClient(etcd.endpoint)
    for _ in range(3):
        await writer.call("/v3/kv/put", {"key": b64(b"/registry/other/x"), "value": b64(b"{}")})
    writer.close()
    # Back as a new process on the same port: its cache begins at its own LIST, so a watch
    # from an older version gets 410 and the stream lists again.
    port = running.ports.port
    again = await start_server(etcd_servers=etcd.endpoint, port=port)

    # Each stream on its own backoff: wait until both have listed again, not just the first.
    def relisted() -> set[str]:
        return {r["stream"] for r in events(log, "watch_attempt")
                if r["step"] == "list" and r["relist_cause"] in ("gone", "failed")}  # fmt: skip

    await until(lambda: len(relisted()) == 2, "both streams list again after 410", 30)
    assert any(r["relist_cause"] == "gone" for r in events(log, "watch_attempt"))
    seen_after = total(registry, "prober_watch_lag_seconds_count")
    await until(lambda: total(registry, "prober_watch_lag_seconds_count") > seen_after + 4,
                "the heartbeat seen again", 30)  # fmt: skip
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0
    await again.server.kill()

    # The event log alone rebuilds what the metrics counted.
    runs, _ = load_runs([log])
    summary, _ = build_summary(runs[0], replay(runs[0]), "aws")
    section = summary["watches"]
    assert section["heartbeat"]["writes"] > 20
    by_stream = {s["stream"]: s for s in section["streams"]}
    assert set(by_stream) == {
        "kube-api-http1-internal-lb-watch", "kube-api-http2-internal-lb-watch"
    }  # fmt: skip
    for entry in by_stream.values():
        assert entry["ends"]["timeout"] >= 2
        assert entry["relists"].get("gone", 0) >= 1 or entry["relists"].get("failed", 0) >= 1
        assert entry["lag"]["count"] > 10
        assert entry["established"] >= 3
        assert entry["reestablish"]["count"] >= 2
    assert sum(e["doomed"] for e in by_stream.values()) == total(
        registry, "prober_watch_doomed_total"
    )
    assert sum(sum(e["ends"].values()) for e in by_stream.values()) == total(
        registry, "prober_watch_ends_total"
    )
    # analyze: per watch stream three tests. The doomed re-watches landed within the
    # detection aws's checks allow the LB (30 s): their tests say so, by design, and pass.
    out = tmp_path / "out"
    code = analyze_command([log], platform=None, thresholds_path=None, out=out,
                           skip_bad_lines=False, stdout=io.StringIO())  # fmt: skip
    cases = [c for c in ET.parse(out / "junit.xml").getroot().iter("testcase")
             if " watch " in c.get("name", "")]  # fmt: skip
    assert len({c.get("name") for c in cases}) == 6
    doomed = [c.find("failure") for c in cases if "shutting-down" in c.get("name", "")]
    said = [f.get("message", "") for f in doomed if f is not None]
    assert len(said) == 2, said  # one failed-then-passed pair per stream
    assert all("by design" in m and "already shutting down" in m for m in said)
    assert all("predicted within its detection" in m for m in said)
    assert code == ExitCode.FAILED  # the requests' tests: their only server went away
    html = (out / "report.html").read_text()
    assert "http1 · watch" in html
    assert "doomed re-watch at" in html
    # Every end the log has, one of the kinds the reference names.
    assert {r["how"] for r in events(log, "watch_end")} <= {
        "timeout", "closed", "reset", "goaway", "ping", "gone", "stopped"
    }  # fmt: skip


async def test_no_watch_streams_when_turned_off(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    log = tmp_path / "events.jsonl"
    config = load_config(env={"PROBER_WATCHES": "false"}, flags={
        "targets": [{"lb": "internal-lb", "url": running.url}], "ca_file": str(certs.ca),
        "token_file": str(token_file), "listen": "127.0.0.1:0", "event_log": str(log),
    })  # fmt: skip
    daemon = Daemon(config, install_signals=False)
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0
    assert events(log, "watch_attempt") == events(log, "heartbeat") == []


async def test_the_heartbeat_writes_over_the_version_it_knows_and_reads_it_after_a_conflict(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    """A Lease takes no update without a version (kube-apiserver answers 422, as it did to
    every heartbeat but the first before the writer sent one). Another writer's update
    makes the version it holds stale: one write meets 409, the next reads the Lease and
    writes over it again."""
    running = await start_server(etcd_servers=etcd.endpoint)
    log = tmp_path / "events.jsonl"
    daemon = Daemon(watch_config(running, certs, token_file, log), registry=CollectorRegistry(),
                    install_signals=False)  # fmt: skip
    task = asyncio.create_task(daemon.run())
    await asyncio.wait_for(daemon.ready.wait(), 15)

    def acked() -> int:
        return sum(r["ack"] is not None for r in events(log, "heartbeat"))

    await until(lambda: acked() >= 3, "heartbeat writes acknowledged")
    url = f"{running.url}/apis/coordination.k8s.io/v1/namespaces/default/leases/prober-test"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(verify=certs.client_context(), headers=headers) as http:
        lease = (await http.get(url)).json()
        lease["spec"]["holderIdentity"] = "someone-else"
        assert (await http.put(url, json=lease)).status_code == 200
    before = acked()
    await until(lambda: acked() >= before + 3, "writes acknowledged after the conflict")
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0
    failed = [r["detail"] for r in events(log, "heartbeat") if r["ack"] is None]
    assert "HTTP 409" in failed
    assert "HTTP 422" not in failed


async def test_on_a_fake_clock_a_watch_stream_backs_off_and_lists_again(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts, token_file: Path, tmp_path: Path
) -> None:
    """Every wait of a watch stream is the daemon's clock's: with nothing listening, its LIST
    fails and the next waits client-go's backoff, to the instant on a fake clock that only
    the test moves; once a server answers, it lists and watches; a WATCH that meets a fresh
    server's cache after its server went is answered 410, and the stream lists again."""
    port, clock, log = free_port(), FakeClock(), tmp_path / "events.jsonl"
    config = load_config(env={}, flags={
        "targets": [{"lb": "internal-lb", "url": f"https://localhost:{port}"}],
        "protocols": "http1", "ca_file": str(certs.ca), "token_file": str(token_file),
        "listen": "127.0.0.1:0", "event_log": str(log), "platform": "aws",
        "heartbeat": "default/prober-test", "drain_timeout": "1s", "watches": "list",
    })  # fmt: skip
    daemon = Daemon(config, registry=CollectorRegistry(), clock=clock, install_signals=False,
                    kinds=KindRegistry([WatchKind()]))  # fmt: skip
    task = asyncio.create_task(daemon.run())

    def attempts(step: str | None = None) -> list[dict[str, Any]]:
        return [a for a in events(log, "watch_attempt") if step in (None, a["step"])]

    async def advance(seconds: float) -> None:
        """Move the clock past the stream's backoff: its next request is seen sent."""
        before = len(attempts())
        await clock.advance(seconds)
        seen = [(a["t"], a["step"], a["outcome"], a["relist_cause"]) for a in attempts()]
        ends = [(e["t"], e["how"]) for e in events(log, "watch_end")]
        await until(lambda: len(attempts()) > before, f"a request after {seconds} s: {seen} {ends}")

    await until(lambda: attempts("list"), "the first LIST")
    (first,) = attempts()
    assert first["outcome"] == "refused"
    # Asleep on the clock through client-go's first backoff (0.8 s, jitter up to 1.0 x it).
    await clock.advance(0.79)
    assert len(attempts()) == 1
    await advance(1.0)
    second = attempts()[1]
    assert (second["step"], second["outcome"]) == ("list", "refused")
    assert 0.8 <= second["t"] - first["t"] < 1.6 + 1e-6
    # A server comes: the next LIST (after a backoff of 1.6 to 3.2 s) is answered, and a
    # WATCH from its version follows at once.
    running = await start_server(etcd_servers=etcd.endpoint, port=port)
    await advance(3.3)
    await until(lambda: any(a["step"] == "watch" and a["outcome"] == "ok" for a in attempts()),
                "the watch established")  # fmt: skip
    # The server goes, and a new one comes on its port: its cache starts at its own LIST, so
    # the re-watch from the old version meets 410 and the stream lists again ("gone").
    await running.server.kill()
    await until(lambda: events(log, "watch_end"), "the watch ended")
    writer = EtcdClient(etcd.endpoint)  # others write meanwhile, past the stream's version
    for _ in range(3):
        await writer.call("/v3/kv/put", {"key": b64(b"/registry/other/x"), "value": b64(b"{}")})
    writer.close()
    await start_server(etcd_servers=etcd.endpoint, port=port)
    for _ in range(10):
        if any(a["relist_cause"] == "gone" for a in attempts("list")):
            break
        await advance(31.0)  # past client-go's longest backoff, 30 s
    relists = [a for a in attempts("list") if a["relist_cause"] == "gone"]
    assert relists, attempts()
    await until(lambda: attempts("list")[-1]["outcome"] == "ok", "the LIST after the 410")
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0
