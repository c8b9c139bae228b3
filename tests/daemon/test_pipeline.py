"""The pipeline's fan-out: metrics on an injected registry, the event log, the log lines."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from prober.common.statusserver import StatusServer
from prober.core.clientgo import retry_after_detail
from prober.core.connection_age import ConnectionAges
from prober.core.kinds import standard_kinds
from prober.core.models import (
    LB,
    REQUEST,
    Connection,
    ErrorClass,
    Interval,
    Protocol,
    RunRecord,
    StreamId,
    Window,
)
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.logs import LogSink
from prober.daemon.metrics import Metrics
from prober.daemon.requests.samples import SampleFeed
from prober.report.analyze import analyze_runs
from tests.factories import OTHER, STREAM, fail, ok, sample
from tests.support.promtool import promtool_problems
from tests.support.replay import read_log, replay

STREAMS = [STREAM, OTHER]
IDLE = StreamId("kube-api", Protocol.HTTP1, LB.LOCALHOST, Connection.NEW)  # never sampled
LABELS = {"platform": "aws", "job": "e2e"}


def run_pipeline(tmp_path: Path, samples, end: float):
    registry = CollectorRegistry()
    metrics = Metrics(registry, LABELS, "1.2.3")
    metrics.register_streams([*STREAMS, IDLE])
    names = tuple(s.name for s in (*STREAMS, IDLE))
    writer = EventLogWriter(
        str(tmp_path / "events.jsonl"),
        1 << 20,
        RunRecord("r", "x", "aws", "1.2.3", {REQUEST: names}),
    )
    writer.open()
    pipeline = SampleFeed([*STREAMS, IDLE], [metrics, writer, LogSink()], wall_start=0)
    with capture_logs() as logs:
        for s in samples:
            pipeline.feed(s)
        final = pipeline.close(end)
    writer.close()
    return registry, logs, final, pipeline


def story():
    """A disruption on one stream, a shutdown window seen by both, a restart."""
    late = {"host": "A", "late": True, "delay": 20.0}
    return [
        ok(0.0, host="A"),
        sample(0.1, stream=OTHER, host="A"),
        fail(1.0),
        fail(1.5),
        ok(2.0, host="A"),
        sample(3.0, elapsed=0, **late),
        sample(3.2, stream=OTHER, elapsed=0, **late),
        sample(4.0, elapsed=1, **late),
        sample(5.0, stream=OTHER, error=ErrorClass.RETRY_AFTER, elapsed=2, status=429, **late),
        ok(6.0, host="B"),
        sample(7.0, stream=OTHER, host="B"),
        sample(30.0, host="A"),  # restarted: the window closes
    ]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {**LABELS, **labels})


def test_metrics_count_what_the_trackers_saw(tmp_path: Path) -> None:
    registry, _, _, _pipeline = run_pipeline(tmp_path, story(), end=40.0)
    new = {"lb": "internal-lb", "protocol": "http2", "connection": "new"}
    reused = {"lb": "external-lb", "protocol": "http1", "connection": "reused"}
    assert value(registry, "prober_requests_total", **new, result="success") == 6
    assert value(registry, "prober_requests_total", **new, result="connect_refused") == 2
    assert value(registry, "prober_requests_total", **reused, result="retry_after") == 1
    # By run phase (`core.latency`): four before the first late answer opened A's window; A's
    # answer at 30 s closes it, but no answer through the other LB has shown A back yet.
    durations = {
        phase: value(registry, "prober_request_duration_seconds_count", **new, phase=phase)
        for phase in ("before_windows", "in_windows", "after_windows")
    }
    assert durations == {"before_windows": 4, "in_windows": 4, "after_windows": 0}
    assert value(registry, "prober_disruption_seconds_total", **new) == 1.0
    assert value(registry, "prober_disruption_intervals_total", **new, error="connect_refused") == 1
    assert value(registry, "prober_disruption_intervals_total", **reused, error="retry_after") == 1
    assert value(registry, "prober_late_requests_total", **new, apiserver="A") == 2
    assert value(registry, "prober_late_requests_total", **reused, apiserver="A") == 2
    assert value(registry, "prober_apiserver_shutting_down", apiserver="A") == 0
    assert (
        value(registry, "prober_shutdown_windows_total", apiserver="A", closed_by="recovered") == 1
    )
    assert value(registry, "prober_readiness_violation_seconds_count", **new) == 1
    assert value(registry, "prober_readiness_violation_seconds_count", **reused) == 1
    idle = {"lb": "localhost", "protocol": "http1", "connection": "new"}
    assert value(registry, "prober_requests_total", **idle, result="success") == 0
    assert value(registry, "prober_build_info", version="1.2.3") == 1
    (window,) = list(pipeline_windows(tmp_path))
    reaction = {s.stream: s.reaction for s in window.streams}[STREAM.name]
    assert value(registry, "prober_readiness_violation_seconds_sum", **new) == reaction


def pipeline_windows(tmp_path: Path) -> list[Window]:
    return read_log(tmp_path / "events.jsonl").of(Window)


def test_the_felt_disruption_leaves_out_what_client_gos_retries_got_through(
    tmp_path: Path,
) -> None:
    # A 429 told the client to wait 1 s; the next fresh request of that LB and protocol,
    # sent after the wait, succeeded: raw disruption 0.5 s, none felt. A refused request
    # afterwards is felt whole.
    told = retry_after_detail(429, "1")
    samples = [
        sample(0.0, error=ErrorClass.RETRY_AFTER, status=429, detail=told),
        ok(0.5),
        ok(1.2),
        fail(2.0),
        ok(2.25),
    ]
    registry, _, _, _ = run_pipeline(tmp_path, samples, end=5.0)
    new = {"lb": "internal-lb", "protocol": "http2", "connection": "new"}
    assert value(registry, "prober_disruption_seconds_total", **new) == 0.75
    assert value(registry, "prober_felt_disruption_seconds_total", **new) == 0.25
    assert value(registry, "prober_retry_after_answers_total", **new, outcome="succeeded") == 1
    assert value(registry, "prober_retry_after_answers_total", **new, outcome="felt") is None
    reused = {"lb": "external-lb", "protocol": "http1", "connection": "reused"}
    assert value(registry, "prober_felt_disruption_seconds_total", **reused) == 0.0


def test_the_event_log_replays_to_the_same_intervals_and_windows(tmp_path: Path) -> None:
    _, _, final, pipeline = run_pipeline(tmp_path, story(), end=40.0)
    log = read_log(tmp_path / "events.jsonl")
    assert log.records[0].streams_of(REQUEST)[-1] == IDLE.name
    intervals, windows = replay(log)
    assert intervals == log.of(Interval)
    assert windows == log.of(Window)
    assert [(i.stream, i.start_t, i.end_t) for i in intervals] == [
        (STREAM.name, 1.0, 2.0),
        (OTHER.name, 5.0, 7.0),
    ]
    assert {s.stream for s in windows[0].streams} == {STREAM.name, OTHER.name, IDLE.name}
    assert log.of(type(final))[-1] == final
    counts = {c.stream: c for c in final.streams}
    assert counts[STREAM.name].samples == 8
    assert counts[STREAM.name].failures == 2
    assert counts[STREAM.name].disruption_seconds == 1.0
    assert counts[OTHER.name].results == {"retry_after": 1, "success": 3}
    assert counts[IDLE.name].samples == 0
    assert pipeline.fed == 12
    assert len(log.of(type(story()[0]))) < 12  # plain successes are not all logged


def test_the_logs_tell_the_story(tmp_path: Path) -> None:
    _, logs, _, _ = run_pipeline(tmp_path, story(), end=40.0)
    events = [e["event"] for e in logs]
    assert events == [
        "disruption_started",
        "disruption_ended",
        "shutdown_window_opened",
        "disruption_started",
        "disruption_ended",
        "shutdown_window_closed",
        "connection_ages",
        "summary",
    ]
    ended = logs[1]
    assert (ended["stream"], ended["seconds"], ended["samples"]) == (STREAM.name, 1.0, 2)
    closed = logs[5]
    assert closed["host"] == "A"
    assert closed["closed_by"] == "recovered"
    assert closed["late"] == 4
    assert {s["stream"] for s in closed["streams"]} == {STREAM.name, OTHER.name}
    # At the end, the late answers by the phase their connection was opened in (this story's
    # samples carry no age: an older daemon's).
    ages = logs[6]
    assert {(r["stream"], r["opened"]) for r in ages["rows"]} >= {(STREAM.name, "no_age")}


async def test_endpoints_and_promtool(tmp_path: Path) -> None:
    registry, _, _, _pipeline = run_pipeline(tmp_path, story(), end=40.0)
    waiting = ["kube-api-http1-localhost-new-connections: no sample yet"]
    server = StatusServer(registry, readyz=lambda: waiting)
    port = await server.start("127.0.0.1", 0)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        assert (await client.get("/healthz")).status_code == 200
        not_ready = await client.get("/readyz")
        assert not_ready.status_code == 503
        assert "[-] kube-api-http1-localhost-new-connections: no sample yet" in not_ready.text
        waiting.clear()
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/nope")).status_code == 404
        metrics = await client.get("/metrics")
    await server.close()
    assert metrics.status_code == 200
    assert 'platform="aws"' in metrics.text
    assert promtool_problems(metrics.content) == ""


def test_apiserver_label_values_are_capped(tmp_path: Path) -> None:
    """16,000 series after 4,000 samples, from a server naming a new host in each answer."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, LABELS, "1.2.3", max_apiservers=2)
    metrics.register_streams([STREAM])
    pipeline = SampleFeed([STREAM], [metrics], wall_start=0.0, max_open=2)
    with capture_logs() as logs:
        for n in range(50):
            pipeline.feed(sample(1.0 + n * 0.01, host=f"h{n}", late=True))
    new = {"lb": "internal-lb", "protocol": "http2", "connection": "new"}
    hosts = {
        s.labels["apiserver"]
        for family in registry.collect()
        if family.name == "prober_late_requests"
        for s in family.samples
    }
    assert hosts == {"h0", "h1", "other"}
    assert value(registry, "prober_late_requests_total", **new, apiserver="other") == 48
    assert value(registry, "prober_apiserver_names_refused_total") == 48
    assert [e["event"] for e in logs].count("apiserver_names_refused") == 1
    assert pipeline.shutdown.open_hosts == frozenset({"h0", "h1"})


def aged(s, port: int, age: float, **changes):
    """`s` over the connection at local `port`, `age` seconds old."""
    return dataclasses.replace(s, local_port=port, connection_age=age, **changes)


def test_a_kept_connections_failure_is_replayed_to_the_same_server(tmp_path: Path) -> None:
    """A failure on a kept connection carries no header: it is put down to the newest answer
    on that connection, here a plain success the log would not keep (neither the host's
    newest ready answer nor the stream's newest success: the other worker's connection has
    that); the daemon writes it (held) before the failure, so `prober analyze` places the
    failure alike, and its table is the daemon's `connection_ages` record."""
    late = {"host": "A", "late": True, "delay": 20.0}
    reset = ErrorClass.CONNECTION_RESET
    samples = [
        aged(sample(0.1, stream=OTHER, host="A", delay=20.0), 5000, 0.0, reused=False),
        aged(sample(1.1, stream=OTHER, host="A", delay=20.0), 5000, 1.0),
        aged(sample(2.1, stream=OTHER, host="A", delay=20.0), 5000, 2.0),
        aged(sample(2.2, stream=OTHER, host="B", delay=20.0), 6000, 0.0, reused=False),
        ok(2.4, host="A", delay=20.0),  # the host's newest ready answer: T0's lower bound
        sample(3.0, elapsed=0, **late),
        sample(3.5, elapsed=1, **late),
        aged(fail(3.55, reset, stream=OTHER), 6000, 1.35),  # opens the stream's interval
        aged(fail(3.6, reset, stream=OTHER), 5000, 3.5),  # joins it
        ok(30.0, host="A", delay=20.0),  # restarted: the window closes
    ]
    run_pipeline(tmp_path, samples, end=40.0)
    log = read_log(tmp_path / "events.jsonl", types=standard_kinds().record_types)
    (daemons,) = log.of(ConnectionAges)
    rows = {
        r.opened: (dict(r.failed), dict(r.errors)) for r in daemons.rows if r.stream_id == OTHER
    }
    assert rows == {
        "before": ({"delay_early": 1}, {"connection_reset": 1}),  # on A's connection
        "no_shutdown": ({"unknown": 1}, {"connection_reset": 1}),  # on B's: no shutdown
    }
    held = {s.audit_id for s in log.of(type(samples[0])) if s.held}
    assert samples[2].audit_id in held  # the answer the failure on A's connection is put to
    [analysis], _ = analyze_runs([tmp_path / "events.jsonl"])
    assert analysis.replay.ages == daemons
    assert analysis.warnings == []
