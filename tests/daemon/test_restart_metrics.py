"""The other edge in the daemon's metrics: restarts, each LB's add-back with its bound, early
failures counted live from the samples, unattributed ones from each restarted instance."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from prober.core.instances import AddBack, Instance
from prober.core.kinds import standard_kinds
from prober.core.models import LB, REQUEST, RunRecord
from prober.daemon.eventlog import EventLogWriter
from prober.daemon.metrics import Metrics
from prober.daemon.requests.samples import SampleFeed
from tests.factories import OTHER, STREAM
from tests.report.test_restarts import early_run
from tests.support.promtool import promtool_problems
from tests.support.replay import read_log

LABELS = {"platform": "aws", "job": "e2e"}


def metrics() -> tuple[CollectorRegistry, Metrics]:
    registry = CollectorRegistry()
    made = Metrics(registry, LABELS, "1.2.3")
    made.register_streams([STREAM, OTHER])
    return registry, made


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {**LABELS, **labels})


def test_every_series_is_exported_at_zero_before_any_restart() -> None:
    registry, _ = metrics()
    assert value(registry, "prober_apiserver_restarts_total") == 0
    for lb in ("internal-lb", "external-lb"):
        assert value(registry, "prober_early_failures_total", lb=lb) == 0
        assert value(registry, "prober_unattributed_failures_total", lb=lb) == 0


def test_a_restart_with_early_failures_as_the_pipeline_counts_it(tmp_path: Path) -> None:
    registry, made = metrics()
    names = (STREAM.name, OTHER.name)
    writer = EventLogWriter(
        str(tmp_path / "events.jsonl"),
        1 << 20,
        RunRecord("r", "x", "aws", "1.2.3", {REQUEST: names}),
    )
    writer.open()
    feed = SampleFeed([STREAM, OTHER], [made, writer], wall_start=0)
    for s in early_run():
        feed.feed(s)
    # Counted live: before the instance is written up (its young period runs 90 s).
    assert value(registry, "prober_early_failures_total", lb="internal-lb") == 4
    assert value(registry, "prober_early_failures_total", lb="external-lb") == 4
    assert value(registry, "prober_apiserver_restarts_total") == 0
    feed.close(50.0)
    writer.close()
    types = standard_kinds().record_types
    [instance] = read_log(tmp_path / "events.jsonl", types=types).of(Instance)
    assert value(registry, "prober_apiserver_restarts_total") == 1
    for back in instance.lbs:
        lb = str(back.lb)
        assert back.seconds is not None
        assert value(registry, "prober_apiserver_add_back_seconds_count", lb=lb) == 1
        assert value(registry, "prober_apiserver_add_back_seconds_sum", lb=lb) == back.seconds
        for side, bound in (("lo", back.seconds_lo), ("hi", back.seconds_hi)):
            got = value(registry, "prober_apiserver_add_back_bound_seconds_sum", lb=lb, side=side)
            assert got == bound
    assert value(registry, "prober_early_failures_total", lb="internal-lb") == 4
    assert promtool_problems(generate_latest(registry)) == ""


def back(lb: LB, seconds: float | None, lo: float | None, hi: float | None, unattributed: int):
    return AddBack("kube-api", lb, None, None, None, seconds, lo, hi, 0, unattributed)


@pytest.mark.parametrize(
    ("backs", "count", "lo", "hi", "unattributed"),
    [
        # Taken back, bounded both sides, no unanswered failure.
        ([back(LB.INTERNAL, 12.0, 11.0, 14.0, 0)], 1, 11.0, 14.0, 0),
        # Taken back, no lower bound (no misses before the first hit): no lo observation.
        ([back(LB.INTERNAL, 12.0, None, 14.0, 2)], 1, None, 14.0, 2),
        # Never taken back by the run's end: no add-back, the unanswered failures still count.
        ([back(LB.INTERNAL, None, None, None, 3)], 0, None, None, 3),
    ],
)
def test_an_instance_record_becomes_add_back_and_unattributed_series(
    backs: list[AddBack], count: int, lo: float | None, hi: float | None, unattributed: int
) -> None:
    registry, made = metrics()
    made.event(Instance("A", "master-0", 2, None, 1.0, 2.0, 1.5, 2.5, "old-instance",
                        "internal-lb answer", tuple(backs), 0, True))  # fmt: skip
    lb = {"lb": "internal-lb"}
    assert value(registry, "prober_apiserver_restarts_total") == 1
    assert value(registry, "prober_apiserver_add_back_seconds_count", **lb) == (count or None)
    for side, bound in (("lo", lo), ("hi", hi)):
        got = value(registry, "prober_apiserver_add_back_bound_seconds_sum", **lb, side=side)
        assert got == bound
    assert value(registry, "prober_unattributed_failures_total", **lb) == unattributed
    assert value(registry, "prober_unattributed_failures_total", lb="external-lb") == 0
