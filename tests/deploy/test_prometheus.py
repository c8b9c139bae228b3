"""deploy/prometheus and deploy/dashboards: promtool checks and unit tests, the
PrometheusRule against the plain rule files, the dashboard's queries through promtool, and
every metric they name against what the daemon and the audit follower export."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from prober.audit.metrics import AuditMetrics
from prober.daemon.metrics import Metrics, WatchMetrics
from tests.deploy.manifests import (
    DASHBOARD,
    DEPLOY,
    dashboard_queries,
    grafana_expanded,
    one,
    render,
)

PROMETHEUS = DEPLOY / "prometheus"
RULE_FILES = sorted((PROMETHEUS / "rules").glob("*.yaml"))
UNIT_TESTS = sorted((PROMETHEUS / "tests").glob("*.yaml"))


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, check=False, timeout=60
    )


def exported_metric_names() -> set[str]:
    """Every series name the daemon and the audit follower can export."""
    registry = CollectorRegistry()
    Metrics(registry, {"platform": "aws", "vantage": "pod-network"}, "0.0.0")
    WatchMetrics(registry, {"platform": "aws", "vantage": "pod-network"})
    AuditMetrics(registry)
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    return {
        family.name + suffix for family in registry.collect() for suffix in suffixes[family.type]
    }


def rule_groups(path: Path) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(path.read_text())["groups"]
    return groups


def all_rules() -> list[dict[str, Any]]:
    return [rule for path in RULE_FILES for group in rule_groups(path) for rule in group["rules"]]


def test_promtool_checks_the_rule_files() -> None:
    checked = promtool("check", "rules", *map(str, RULE_FILES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("SUCCESS") == len(RULE_FILES)


def test_promtool_unit_tests_pass() -> None:
    assert len(UNIT_TESTS) >= 4
    tested = promtool("test", "rules", *map(str, UNIT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(UNIT_TESTS)


def test_a_failing_unit_test_fails(tmp_path: Path) -> None:
    text = (PROMETHEUS / "tests" / "scrape.yaml").read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        text.replace('10.0.0.3:9774"}', 'x"}').replace("../rules/", f"{PROMETHEUS}/rules/")
    )
    assert promtool("test", "rules", str(broken)).returncode != 0


def test_the_prometheus_rule_holds_the_same_groups(tmp_path: Path) -> None:
    (rule,) = render(PROMETHEUS)
    assert rule["kind"] == "PrometheusRule"
    namespace = one(render(DEPLOY / "namespace"), "Namespace")
    assert rule["metadata"]["namespace"] == namespace["metadata"]["name"]
    groups = [group for path in RULE_FILES[::-1] for group in rule_groups(path)]
    by_name = {group["name"]: group for group in groups}
    assert [g["name"] for g in rule["spec"]["groups"]] == [
        "prober.shutdown-delays", "prober.recording", "prober.alerts"
    ]  # fmt: skip
    assert rule["spec"]["groups"] == [by_name[g["name"]] for g in rule["spec"]["groups"]]
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    assert promtool("check", "rules", str(spec)).returncode == 0


SEVERITIES = ("info", "warning", "critical")


def _alerts(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}


def test_the_ci_variant_fires_nothing_above_info(tmp_path: Path) -> None:
    """origin fails a CI job on a new alert above info firing ("No new alerts should be
    firing"): deploy/prometheus/ci is the same rule with every alert at info, long-lived
    clusters keep the warnings of deploy/prometheus."""
    (long_lived,) = render(PROMETHEUS)
    (ci,) = render(PROMETHEUS / "ci")
    assert (ci["kind"], ci["metadata"]) == (long_lived["kind"], long_lived["metadata"])
    assert (
        set(_alerts(ci))
        == set(_alerts(long_lived))
        == {rule["alert"] for rule in all_rules() if "alert" in rule}
    )
    for rule in _alerts(long_lived).values():
        assert rule["labels"]["severity"] == "warning"
    for name, rule in _alerts(ci).items():
        assert rule["labels"]["severity"] in SEVERITIES
        assert SEVERITIES.index(rule["labels"]["severity"]) == 0, name
        # Nothing else differs: the CI run measures and alerts as a long-lived cluster would.
        assert {**rule, "labels": {**rule["labels"], "severity": "warning"}} == _alerts(long_lived)[
            name
        ]
    recording = [[r for r in g["rules"] if "record" in r] for g in ci["spec"]["groups"]]
    assert recording == [
        [r for r in g["rules"] if "record" in r] for g in long_lived["spec"]["groups"]
    ]
    spec = tmp_path / "ci.yaml"
    spec.write_text(yaml.safe_dump({"groups": ci["spec"]["groups"]}))
    checked = promtool("check", "rules", str(spec))
    assert checked.returncode == 0, checked.stdout + checked.stderr


NAME = re.compile(
    r"(?<![\w:\"'.])([a-zA-Z_:][\w:]*)(?=\s*(?:\{|\[|\)|$|\s+(?:>|<|=|or|and|unless|offset)))"
)
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "offset", "bool", "le", "inf", "nan"}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """Series names an expression reads: identifiers not called as functions, outside
    strings and label matchers."""
    bare = re.sub(r"\{[^}]*\}", "{}", re.sub(r"\"[^\"]*\"", '""', expr))
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return {m for m in NAME.findall(bare) if m.lower() not in KEYWORDS}


def test_the_metric_name_reader_sees_what_a_query_reads() -> None:
    assert metric_names(
        'sum by (lb) (rate(prober_requests_total{result!="x"}[2m])) > on (platform) '
        'group_left () prober:late_routing_threshold_seconds or absent(up{job=~"p"})'
    ) == {"prober_requests_total", "prober:late_routing_threshold_seconds", "up"}


def test_rules_read_only_series_that_exist() -> None:
    known = exported_metric_names() | {"up", "ALERTS"}
    known |= {rule["record"] for rule in all_rules() if "record" in rule}
    read = [metric_names(rule["expr"]) for rule in all_rules()]
    assert set().union(*read) - {"up"} >= exported_metric_names() & {
        "prober_readiness_violation_seconds_bucket", "prober_requests_total",
        "prober_late_requests_total", "prober_disruption_seconds_total",
        "prober_apiserver_shutting_down",
    }  # fmt: skip
    for rule, names in zip(all_rules(), read, strict=True):
        assert names <= known, (rule.get("record") or rule.get("alert"), names - known)


def test_every_alert_says_what_broke() -> None:
    alerts = {rule["alert"]: rule for rule in all_rules() if "alert" in rule}
    assert set(alerts) == {
        "ProberLoadBalancerRoutedLate", "ProberRequestsFailedDuringShutdown", "ProberNotScraped",
        "ProberWatchLandedOnStoppingApiserver",
    }  # fmt: skip
    for rule in alerts.values():
        assert rule["labels"]["severity"] == "warning"
        assert set(rule["annotations"]) == {"summary", "description"}


def test_the_dashboard_has_the_variables_and_panels_asked_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"platform", "lb", "protocol", "connection"} <= set(variables)
    for name in ("platform", "lb", "protocol", "connection"):
        assert variables[name]["query"]["query"] == f"label_values(prober_requests_total, {name})"
    titles = " | ".join(p["title"] for p in dashboard["panels"]).lower()
    for subject in ("reaction", "late requests per apiserver", "disruption seconds", "outcomes",
                    "across platforms"):  # fmt: skip
        assert subject in titles
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert queries
    rules = tmp_path / "dashboard.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "dashboard",
                        "rules": [
                            {"record": f"dashboard:query_{i}", "expr": grafana_expanded(q)}
                            for i, q in enumerate(queries)
                        ],
                    }
                ]
            }
        )
    )
    checked = promtool("check", "rules", str(rules))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("query", dashboard_queries())
def test_dashboard_queries_read_only_series_that_exist(query: str) -> None:
    known = exported_metric_names() | {"up", "ALERTS"}
    known |= {rule["record"] for rule in all_rules() if "record" in rule}
    assert metric_names(grafana_expanded(query)) <= known
