"""The daemon evicted in the middle of a shutdown window (SIGKILL, as a drain's eviction past
its grace period) and replaced by a new one with a new event log: every shutdown window is
still in what a CI gather step collects, the daemons' pod logs, read by `prober analyze
--pod-logs`."""

from __future__ import annotations

import json
from pathlib import Path

from prober.cli import main
from prober.core.models import parse_rfc3339
from prober.lab.infra.daemons import daemon_logs
from prober.lab.infra.options import TOLERANCE
from prober.lab.run import LabOptions, run_lab


async def test_an_evicted_daemon_loses_no_shutdown_window(tmp_path: Path) -> None:
    options = LabOptions(
        platform="gcp", scenario="evict", time_scale=0.05, shutdowns=2, tolerance=TOLERANCE
    )
    result = await run_lab(options, tmp_path / "lab", say=None)
    assert result.problems == ()  # each shutdown seen, its true T0 inside every bound
    hosts = {r.truth.hostname for r in result.results}
    assert hosts == {"master-0", "master-1"}
    # The first window spans the kill: both daemons saw it, the second from its late answers.
    assert [r.truth.hostname for r in result.results].count("master-0") == 2

    logs = daemon_logs(result.out / "logs")
    assert [p.name for p in logs] == ["prober-run.stdout.log", "prober-run-2.stdout.log"]
    out = tmp_path / "analysis"
    assert main(["analyze", "--pod-logs", *map(str, logs), "--out", str(out)]) in (0, 1)
    summaries = [json.loads(p.read_text()) for p in sorted(out.rglob("summary.json"))]
    assert len(summaries) == 2  # one per daemon, each its own run
    windows = [w["host"] for s in summaries for w in s["windows"]]
    assert len(windows) == 3
    # The killed run says so, at its last whole record, which no later than the kill; the
    # replacement stopped through its stop path at the lab's end.
    killed = json.loads((result.out / "killed.json").read_text())["wall"]
    abrupt = [s["ended"] for s in summaries if s["ended"]["abruptly"]]
    assert len(abrupt) == 1
    assert parse_rfc3339(abrupt[0]["ts"]) <= killed
    print(f"killed run: last whole record {killed - parse_rfc3339(abrupt[0]['ts']):.3f} s "
          "before the kill")  # fmt: skip
    assert [s["ended"]["abruptly"] for s in summaries].count(False) == 1
