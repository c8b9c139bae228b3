"""The daemon evicted in the middle of a shutdown window (SIGKILL, as a drain's eviction past
its grace period) and replaced by a new one with a new event log: every shutdown window is
still in what a CI gather step collects, the daemons' pod logs, read by `prober analyze
--pod-logs`. One run (a module-scoped fixture); each claim a test."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prober.cli import main
from prober.core.models import parse_rfc3339
from prober.lab.infra.daemons import daemon_logs
from prober.lab.infra.options import TOLERANCE
from prober.lab.run import LabOptions, LabResult, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@dataclass(frozen=True)
class Evicted:
    result: LabResult
    logs: list[Path]  # the daemons' pod logs, in the order they started
    code: int  # `prober analyze --pod-logs` of them
    summaries: list[dict[str, Any]]  # what it wrote, one per daemon
    killed: float  # wall time of the kill


@pytest.fixture(scope="module")
def evicted(tmp_path_factory: pytest.TempPathFactory) -> Evicted:
    folder = tmp_path_factory.mktemp("evict")
    options = LabOptions(
        platform="gcp", scenario="evict", time_scale=0.05, shutdowns=2, tolerance=TOLERANCE
    )
    result = asyncio.run(run_lab(options, folder / "lab", say=None))
    logs = daemon_logs(result.out / "logs")
    out = folder / "analysis"
    code = main(["analyze", "--pod-logs", *map(str, logs), "--out", str(out)])
    summaries = [json.loads(p.read_text()) for p in sorted(out.rglob("summary.json"))]
    killed = json.loads((result.out / "killed.json").read_text())["wall"]
    return Evicted(result, logs, code, summaries, killed)


def test_each_shutdown_is_seen_its_true_t0_inside_every_bound(evicted: Evicted) -> None:
    assert evicted.result.problems == ()
    assert {r.truth.hostname for r in evicted.result.results} == {"master-0", "master-1"}


def test_both_daemons_saw_the_window_the_kill_fell_in(evicted: Evicted) -> None:
    """The second from its late answers."""
    assert [r.truth.hostname for r in evicted.result.results].count("master-0") == 2


def test_each_daemon_leaves_its_own_pod_log(evicted: Evicted) -> None:
    assert [p.name for p in evicted.logs] == ["prober-run.stdout.log", "prober-run-2.stdout.log"]


def test_the_pod_logs_analyze_as_one_run_per_daemon_with_every_window(evicted: Evicted) -> None:
    assert evicted.code in (0, 1)  # a verdict may fail; bad input may not
    assert len(evicted.summaries) == 2
    assert len([w["host"] for s in evicted.summaries for w in s["windows"]]) == 3


def test_the_killed_run_ends_abruptly_at_its_last_whole_record(evicted: Evicted) -> None:
    """No later than the kill; the replacement stopped through its stop path."""
    abrupt = [s["ended"] for s in evicted.summaries if s["ended"]["abruptly"]]
    assert len(abrupt) == 1
    last = parse_rfc3339(abrupt[0]["ts"])
    assert last <= evicted.killed
    print(f"killed run: last whole record {evicted.killed - last:.3f} s before the kill")
    assert [s["ended"]["abruptly"] for s in evicted.summaries].count(False) == 1
