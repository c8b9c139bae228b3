"""Proof of completeness in the daemon's metrics: ticks due, requests started and samples
counted per stream, exported at zero from the start and advanced by what each summary record
adds (its counts are cumulative), so a rate() over them is the schedule's."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from prober.core.models import StreamCounters, Summary
from prober.daemon.metrics import Metrics
from tests.factories import OTHER, STREAM
from tests.support.promtool import promtool_problems

LABELS = {"platform": "aws"}
NAMES = ("prober_requests_due_total", "prober_requests_started_total",
         "prober_requests_counted_total")  # fmt: skip


def counters(stream: str, samples: int, due: int | None, started: int | None) -> StreamCounters:
    return StreamCounters(stream, samples, 0, 0, 0.0, due=due, started=started)


def values(registry: CollectorRegistry, stream_key: tuple[str, str, str]) -> list[float | None]:
    lb, protocol, connection = stream_key
    labels = {**LABELS, "lb": lb, "protocol": protocol, "connection": connection}
    return [registry.get_sample_value(name, labels) for name in NAMES]


def test_due_started_and_counted_follow_the_summaries() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, LABELS, "1.2.3")
    metrics.register_streams([STREAM, OTHER])
    assert values(registry, STREAM.key) == [0.0, 0.0, 0.0]
    for t, (due, started, samples) in enumerate([(10, 9, 8), (25, 22, 22), (25, 22, 22)]):
        mine = counters(STREAM.name, samples, due, started)
        older = counters(OTHER.name, 5, None, None)  # a feed that does not count ticks
        metrics.event(Summary(ts="2026-12-06T00:00:00Z", t=float(t), streams=(mine, older)))
    assert values(registry, STREAM.key) == [25.0, 22.0, 22.0]
    assert values(registry, OTHER.key) == [0.0, 0.0, 0.0]
    assert promtool_problems(generate_latest(registry)) == ""
