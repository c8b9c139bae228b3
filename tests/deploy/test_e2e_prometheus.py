"""End to end: the lab (fake apiservers behind HAProxy, the real daemon) scraped by a real
Prometheus that runs the project's own recording rules and alerts.

Two labs on GCP's profile at 1/20 of its durations, one after the other against the same
Prometheus: a healthy rollout, then a rollout behind a `slow-lb` external LB whose health
check needs longer than the shutdown delay. The only change to the project's rules is the
data they read for the delay: GCP's 95 s becomes the lab's 4.75 s.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from prober.lab.run import LabOptions, LabResult, profile_for, run_lab
from tests.deploy.manifests import DEPLOY, dashboard_queries, grafana_expanded
from tests.deploy.prometheus_server import Prometheus, running_prometheus
from tests.support.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCALE = 0.05
RULES = DEPLOY / "prometheus" / "rules"
LATE = 'ALERTS{alertname="ProberLoadBalancerRoutedLate", alertstate="firing"}'
FAILED = 'ALERTS{alertname="ProberRequestsFailedDuringShutdown", alertstate="firing"}'


def lab_options(scenario: str) -> LabOptions:
    # HAProxy's path: its daemon listens on this namespace's loopback, where this test's
    # Prometheus scrapes it (on the kernel path it is in the lab's client namespace).
    return LabOptions(
        platform="gcp", scenario=scenario, time_scale=SCALE, shutdowns=1, lb="haproxy"
    )


def lab_delays(path: Path) -> Path:
    """The project's delay table with GCP's delay scaled the way the lab scales it."""
    delay = profile_for(lab_options("rollout")).shutdown_delay
    assert delay == profile_for(lab_options("slow-lb")).shutdown_delay == pytest.approx(4.75)
    table = yaml.safe_load((RULES / "shutdown-delays.yaml").read_text())
    (gcp,) = [r for g in table["groups"] for r in g["rules"] if r["labels"]["platform"] == "gcp"]
    gcp["expr"] = f"vector({delay})"
    path.write_text(yaml.safe_dump(table))
    return path


@dataclass(frozen=True)
class Run:
    scenario: str
    start: float
    end: float
    result: LabResult


async def scraped_lab(prometheus: Prometheus, tmp_path: Path, scenario: str) -> Run:
    """Run a lab; as soon as its daemon listens, have Prometheus scrape it."""
    out = tmp_path / f"lab-{scenario}"
    start = time.time()
    lab = asyncio.create_task(run_lab(lab_options(scenario), out, say=None), name=scenario)
    daemon = out / "daemon.json"
    await until(lambda: daemon.exists() or lab.done(), "the lab's daemon.json", 60)
    if lab.done():
        await lab  # it failed before its daemon listened: raise why
    port = json.loads(daemon.read_text())["metrics_port"]
    prometheus.scrape(scenario, port, {"scenario": scenario})
    await prometheus.until(f'up{{scenario="{scenario}"}} == 1')
    result = await lab
    return Run(scenario, start, time.time(), result)


async def test_the_alert_fires_after_a_slow_lb_and_not_after_a_healthy_rollout(
    tmp_path: Path,
) -> None:
    rules = [RULES / "prober.yaml", lab_delays(tmp_path / "shutdown-delays.yaml")]
    async with running_prometheus(tmp_path / "prometheus", rules) as prometheus:
        healthy = await scraped_lab(prometheus, tmp_path, "rollout")
        slow = await scraped_lab(prometheus, tmp_path, "slow-lb")
        await check_readiness_violations(prometheus, healthy, slow)
        await check_late_routing_alert(prometheus, healthy, slow)
        await check_failure_alert(prometheus, healthy, slow)
        await check_dashboard_queries(prometheus, slow)


async def check_readiness_violations(prometheus: Prometheus, healthy: Run, slow: Run) -> None:
    # Localhost always reaches the server that shuts down; the slow LB keeps sending it new
    # connections for the whole delay. A healthy LB may send it none before it notices.
    for run, lbs in ((healthy, {"localhost"}), (slow, {"localhost", "external-lb"})):
        series = await prometheus.series(
            f'prober_readiness_violation_seconds_count{{scenario="{run.scenario}"}}',
            run.start,
            run.end,
        )
        new = {s["lb"] for s in series if s["connection"] == "new"}
        assert new >= lbs, (run.scenario, series)
    threshold = await prometheus.query_range(
        'prober:late_routing_threshold_seconds{platform="gcp"}', slow.start, slow.end
    )
    assert float(threshold[0]["values"][-1][1]) == pytest.approx(0.8 * 4.75)


async def check_late_routing_alert(prometheus: Prometheus, healthy: Run, slow: Run) -> None:
    quiet = await prometheus.query_range(
        'ALERTS{alertname="ProberLoadBalancerRoutedLate"}', healthy.start, healthy.end
    )
    assert quiet == [], "the healthy rollout's LBs reacted in time"
    fired = await prometheus.query_range(LATE, slow.start, slow.end + 1)
    assert fired, "no ProberLoadBalancerRoutedLate after the slow LB"
    assert {(a["metric"]["lb"], a["metric"]["connection"]) for a in fired} == {
        ("external-lb", "new")
    }
    # What it compared: the slowest reaction's bucket bound, past 80 % of the delay.
    (bound, *_) = await prometheus.query_range(
        'max(prober:readiness_violation_seconds:max_bound{lb="external-lb", connection="new"})',
        slow.start,
        slow.end,
    )
    assert float(bound["values"][-1][1]) > 0.8 * 4.75


async def check_failure_alert(prometheus: Prometheus, healthy: Run, slow: Run) -> None:
    # New connections through a healthy LB never meet a server that stopped serving.
    quiet = await prometheus.query_range(
        FAILED.replace("}", ', connection="new"}'), healthy.start, healthy.end
    )
    assert quiet == [], quiet
    fired = await prometheus.query_range(FAILED, slow.start, slow.end + 1)
    assert "external-lb" in {a["metric"]["lb"] for a in fired}, fired


async def check_dashboard_queries(prometheus: Prometheus, slow: Run) -> None:
    empty = []
    for query in dashboard_queries():
        if not await prometheus.query_range(grafana_expanded(query), slow.start, slow.end + 1):
            empty.append(query)
    assert empty == [], "dashboard panels without data after the slow-lb lab"
