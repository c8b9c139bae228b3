"""The daemon stopped at random moments, many times over: nothing started is ever lost.

One test, `STOPS` runs of the real daemon (`Daemon`, in-process, so that a run costs a
fraction of a second) against the real TLS test server, each stopped at a moment drawn from a
seeded `random.Random`: while starting, quiet, inside a shutdown window, inside a witness
burst (adaptive fast mode on), and with the server holding every request open past the
stop's grace. A race at the stop shows up here in CI rather than as one lost sample in a
soak (issue 33: "started 19729, recorded 19727").

For each stop, from the daemon's own `stopped` line: requests started = samples recorded,
none cancelled, `prober_requests_total` adds up to them, LISTs and WATCHes sent = recorded.
From its event log: the final summary counts every sample, the stopped ones are all logged,
and `prober analyze`'s replay gives back the daemon's records without a warning. The server
never fails a request, so no run may have a disruption interval or a failure in a window:
a request cut by the stop is `stopped`, never a timeout, never a disruption.

The delay before each stop is drawn from the seed and decides no assertion; every wait that
does is on an event: `ready`, a metric, the server's request count. `PROBER_STOP_SEED` picks
another seed (a failure prints the seed, the run and the moment).
"""

from __future__ import annotations

import asyncio
import io
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from prober.config import load_config
from prober.core.header import format_shutdown_header
from prober.core.models import ErrorClass, Interval, Sample, Summary, Window
from prober.daemon.app import Daemon
from prober.report.replay.replay import replay
from prober.report.replay.runs import load_runs
from prober.report.results.summary import build_summary
from tests.daemon.test_daemon import total
from tests.support.certs import Certs
from tests.support.logcapture import log_line
from tests.support.replay import read_log
from tests.support.tls_server import READY, Plan, TLSServer
from tests.support.waiting import until

SEED = int(os.environ.get("PROBER_STOP_SEED", "33"))
STOPS = 24
MOMENTS = ("starting", "quiet", "window", "burst", "held", "held-burst")
SHUTTING, OTHER = "apiserver-aaaaaaaaaaaaaaaaaaaaaaaaaa", "apiserver-bbbbbbbbbbbbbbbbbbbbbbbbbb"
GRACE = "150ms"  # drain_timeout: the stop's grace, far below the request timeout


@dataclass(repr=False)
class Stop:
    index: int
    moment: str
    delay: float  # seconds after the moment was reached

    def __repr__(self) -> str:  # what a failed assertion names: enough to run it again
        return f"seed {SEED}, stop {self.index}: {self.moment} + {self.delay:.3f} s"


def stops(rng: random.Random) -> list[Stop]:
    """Every moment as often as the others, in a seeded order, each after a seeded delay."""
    moments = [MOMENTS[i % len(MOMENTS)] for i in range(STOPS)]
    rng.shuffle(moments)
    longest = {"starting": 0.05, "quiet": 0.3, "window": 0.3, "burst": 0.05, "held": 0.2,
               "held-burst": 0.1}  # fmt: skip
    return [Stop(i, m, rng.uniform(0.0, longest[m])) for i, m in enumerate(moments)]


def late_since(start: float) -> Callable[[], str | None]:
    """Every answer from a server shutting down since `start`."""
    return lambda: format_shutdown_header(True, 70, time.monotonic() - start, SHUTTING)


def rotating(rng: random.Random, start: float) -> Callable[[], str | None]:
    """An LB that still sends some requests to the server shutting down, most elsewhere:
    witness bursts begin, meet it, and begin again, one after the other."""

    def header() -> str | None:
        if rng.random() < 0.3:
            return format_shutdown_header(True, 70, time.monotonic() - start, SHUTTING)
        return format_shutdown_header(False, 70, 0, OTHER)

    return header


def config(server: TLSServer, certs: Certs, events: Path) -> Any:
    return load_config(
        env={},
        flags={
            "targets": [
                {"lb": "internal-lb", "url": server.url},
                {"lb": "external-lb", "url": server.url},
            ],
            "ca_file": certs.ca_file,
            # HTTP/1.1 first: a burst's first request goes over it ("held-burst").
            "protocols": "http1,http2",
            "interval": "20ms",
            "quiet_interval": "100ms",  # adaptive: quiet until the first late answer
            "rise": "2",  # and fast mode for an LB whose reaction is open
            "timeout": "10s",  # no request ends by its own deadline in a run
            "drain_timeout": GRACE,
            "listen": "127.0.0.1:0",
            "event_log": str(events),
            "heartbeat": "default/prober-test",
            "time_scale": "0.0625",  # client-go's first backoff 50 ms
        },
    )


async def reach(stop: Stop, daemon: Daemon, registry: CollectorRegistry, server: TLSServer,
                rng: random.Random) -> int | None:  # fmt: skip
    """Bring the run to its moment. "held": from which of the server's requests on it holds
    every one open (the index into `server.requests`)."""
    if stop.moment == "starting":
        return None
    await asyncio.wait_for(daemon.ready.wait(), 15)
    if stop.moment == "window":
        server.plan.header = late_since(time.monotonic())
        await until(
            lambda: total(registry, "prober_apiserver_shutting_down", apiserver=SHUTTING) == 1,
            "the shutdown window to open",
        )
    elif stop.moment == "burst":
        server.plan.header = rotating(rng, time.monotonic())
        await until(lambda: total(registry, "prober_burst_requests_total") > 0, "a burst")
    elif stop.moment == "held":
        seen = len(server.requests)
        server.plan.mode = "stall"
        await server.wait_for(
            lambda s: sum("audit-id" in r.headers for r in s.requests[seen:]) >= 8
        )
        return seen
    elif stop.moment == "held-burst":
        # HTTP/1.1 answers are held open from now on, HTTP/2 ones go on: the window opens
        # and bursts begin, and a burst's first request goes over HTTP/1.1 (the LB's fresh
        # streams in turn), so once one of its requests is in, the burst is in flight and
        # held open, and stays so until the stop cuts it.
        seen = len(server.requests)
        server.plan.gate = asyncio.Event()
        server.plan.header = rotating(rng, time.monotonic())
        await until(lambda: total(registry, "prober_burst_requests_total") > 0, "a burst")
        return seen
    return None


async def run_once(
    stop: Stop, server: TLSServer, certs: Certs, tmp_path: Path, output: io.StringIO
) -> tuple[dict[str, Any], Path, Daemon, CollectorRegistry, set[str]]:
    rng = random.Random(f"{SEED}/{stop.index}")
    server.plan = Plan(header=READY)
    output.seek(0)
    output.truncate()
    events = tmp_path / f"events-{stop.index:02d}.jsonl"
    registry = CollectorRegistry()
    daemon = Daemon(config(server, certs, events), registry=registry, install_signals=False)
    task = asyncio.create_task(daemon.run())
    try:
        held_from = await reach(stop, daemon, registry, server, rng)
        await asyncio.sleep(stop.delay)  # seeded: where in the moment the stop falls
        if stop.moment == "burst":  # the stop comes while a burst is in flight
            await until(lambda: daemon.supervisor.running("burst-"), "a burst in flight")
        daemon.stop()
        assert await asyncio.wait_for(task, 15) == 0, stop
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if server.plan.gate is not None:
            server.plan.gate.set()  # its held answers go to closed connections: let them end
    # The probes' requests the server held open (a watch's LIST carries no Audit-ID).
    since = server.requests[held_from:] if held_from is not None else []
    if stop.moment == "held-burst":
        since = [r for r in since if r.http_version == "HTTP/1.1"]
    held = {r.headers["audit-id"] for r in since if "audit-id" in r.headers}
    return log_line(output, "stopped"), events, daemon, registry, held


def check_counters(stop: Stop, stopped: dict[str, Any]) -> None:
    """The daemon's own account: everything started is recorded, nothing was cancelled."""
    assert stopped["started"] == stopped["samples"], stop
    assert stopped["cancelled"] == stopped["raised"] == 0, stop
    assert sum(stopped["requests"].values()) == stopped["samples"], stop
    assert stopped["watch_sent"] == sum(stopped["watch"].values()), stop


def check_log(stop: Stop, stopped: dict[str, Any], events: Path, daemon: Daemon) -> list[Sample]:
    """The event log's account, and the replay's: the same numbers, the same records."""
    log = read_log(events, types=daemon.kinds.table.record_types)
    final = log.of(Summary)[-1]
    results = Counter[str]()
    for counters in final.streams:
        assert sum(counters.results.values()) == counters.samples, stop
        results.update(counters.results)
    assert sum(results.values()) == stopped["started"], stop
    assert +results == +Counter(stopped["requests"]), stop
    samples = log.of(Sample)
    cut = [s for s in samples if s.error is ErrorClass.STOPPED]
    assert len(cut) == results["stopped"], stop  # every stopped sample is logged
    (run,), _ = load_runs([events])
    replayed = replay(run)
    assert replayed.warnings == (), stop
    assert list(replayed.intervals) == log.of(Interval), stop
    summary, _ = build_summary(run, replayed, "unknown")
    assert sum(s.get("stopped", 0) for s in summary["streams"]) == len(cut), stop
    assert log.of(Interval) == [], stop  # the server failed nothing: no stop is a disruption
    for window in log.of(Window):
        assert all(ws.failures == 0 for ws in window.streams), stop
    return samples


async def test_every_stop_records_every_request_started(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, log_output: io.StringIO, notes
) -> None:
    moments: dict[str, Counter[str]] = {m: Counter() for m in MOMENTS}
    for stop in stops(random.Random(SEED)):
        stopped, events, daemon, registry, held = await run_once(
            stop, tls_server, certs, tmp_path, log_output
        )
        check_counters(stop, stopped)
        samples = check_log(stop, stopped, events, daemon)
        assert all(s.error is not ErrorClass.TIMEOUT for s in samples), stop
        assert total(registry, "prober_disruption_intervals_total") == 0, stop
        if stop.moment in ("held", "held-burst"):
            # Held open past the grace: each of them is a `stopped` sample, not a timeout.
            mine = [s for s in samples if s.audit_id in held]
            assert len(mine) == len(held), stop
            assert len(held) >= (8 if stop.moment == "held" else 1), stop
            assert {s.error for s in mine} == {ErrorClass.STOPPED}, stop
            assert all(not s.failed and s.phases.get("sent") is not None for s in mine), stop
            assert total(registry, "prober_requests_total", result="stopped") >= len(mine)
        if stop.moment == "held-burst":
            assert any(s.stopped and s.burst is not None for s in samples), stop
        cut = [s for s in samples if s.stopped]
        moments[stop.moment].update(
            stops=1, started=stopped["started"], stopped=len(cut),
            stopped_in_bursts=sum(s.burst is not None for s in cut),
            watch_sent=stopped["watch_sent"], watch_stopped=sum(
                n for k, n in stopped["watch"].items() if k.endswith("_stopped")
            ),
        )  # fmt: skip
    for moment, counts in moments.items():
        notes(f"stop moments, seed {SEED}, {moment}: " + " ".join(
            f"{k}={v}" for k, v in counts.items()
        ))  # fmt: skip
    assert all(counts["stops"] for counts in moments.values())
