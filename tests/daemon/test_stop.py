"""The stop with everything held open: a server that answers nothing, the daemon stopped past
its grace. Every request, LIST, WATCH and heartbeat write it sent is still one record, of class
or outcome `stopped`, and none is a failure: no interval, no failed write, no failed attempt."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from pathlib import Path

from prometheus_client import CollectorRegistry

from prober.config import load_config
from prober.core.models import ErrorClass, Interval, Sample, Summary
from prober.core.watch import Heartbeat, WatchAttempt
from prober.daemon.app import Daemon
from tests.daemon.test_daemon import total
from tests.support.certs import Certs
from tests.support.logcapture import log_line
from tests.support.replay import read_log
from tests.support.tls_server import TLSServer

WATCH_STREAMS = {"kube-api-http1-internal-lb-watch", "kube-api-http2-internal-lb-watch"}


async def test_a_stop_past_the_grace_records_everything_held_open_as_stopped(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, log_output: io.StringIO
) -> None:
    events = tmp_path / "events.jsonl"
    config = load_config(
        env={},
        flags={
            "targets": [{"lb": "internal-lb", "url": tls_server.url}],
            "ca_file": certs.ca_file,
            "interval": "50ms",
            "timeout": "30s",  # far past the test: only the stop ends what is held open
            "drain_timeout": "200ms",
            "listen": "127.0.0.1:0",
            "event_log": str(events),
            "heartbeat": "default/prober-test",
        },
    )
    tls_server.plan.mode = "stall"
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, install_signals=False)
    task = asyncio.create_task(daemon.run())

    def agents(server: TLSServer) -> set[str]:
        return {r.headers.get("user-agent", "").split(" ", 1)[-1] for r in server.requests}

    # Every watch stream's first watch-list and the heartbeat's first write are held by the
    # server.
    wanted = {f"{name} watch" for name in WATCH_STREAMS} | {"heartbeat watch"}
    await tls_server.wait_for(lambda s: wanted <= agents(s))
    daemon.stop()
    assert await asyncio.wait_for(task, 15) == 0

    stopped = log_line(log_output, "stopped")
    assert stopped["started"] == stopped["samples"] > 0
    assert stopped["cancelled"] == 0
    assert stopped["requests"] == {"success": 0, "stopped": stopped["samples"]}
    assert stopped["watch_sent"] == sum(stopped["watch"].values())
    assert stopped["watch"] == {"watch_list_stopped": 2}

    log = read_log(events, types=daemon.kinds.table.record_types)
    samples = log.of(Sample)
    assert len(samples) == stopped["samples"]
    assert {s.error for s in samples} == {ErrorClass.STOPPED}
    assert all(s.detail.startswith("cut by the daemon's stop") for s in samples)
    assert log.of(Interval) == []
    final = log.of(Summary)[-1]
    assert sum(c.failures for c in final.streams) == 0
    assert sum(c.disruption_seconds for c in final.streams) == 0
    attempts = log.of(WatchAttempt)
    assert Counter((a.stream, a.step, a.outcome) for a in attempts) == {
        (name, "watch_list", "stopped"): 1 for name in WATCH_STREAMS
    }
    assert all(a.dur > 0 for a in attempts)
    (heartbeat,) = log.of(Heartbeat)
    assert (heartbeat.ack, heartbeat.detail) == (None, "stopped")

    assert total(registry, "prober_watch_attempts_total", outcome="stopped") == 2
    assert total(registry, "prober_watch_attempts_total", outcome="failed") == 0
    assert total(registry, "prober_heartbeat_writes_total", result="stopped") == 1
    assert total(registry, "prober_heartbeat_writes_total", result="failed") == 0
    assert total(registry, "prober_disruption_intervals_total") == 0
