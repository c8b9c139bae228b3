"""A run killed in a shutdown window, its last line torn as a kill or a lost node leaves it:
`prober analyze` gives the windows and intervals up to the last whole record, marks the run
"ended abruptly at t" in summary.json, junit.xml and report.html, and never exits 2 for the
torn line; a run that stopped is marked so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import JUnitXml, Skipped

from prober.cli import main
from prober.report.verdicts.run_verdict import WHOLE_RUN
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.rollout import NODES, streams

KILLED_AT = 100.5  # inside apiserver-bbbb's window (T0 at 89.99 s, 30 s of delay)


@pytest.mark.parametrize("torn", [False, True], ids=["whole", "torn-last-line"])
def test_a_killed_run_is_marked_ended_abruptly(tmp_path: Path, rollout_samples, torn) -> None:
    path = tmp_path / "events.jsonl"
    cut = [s for s in rollout_samples if s.end < KILLED_AT]
    live = write_daemon_log(path, run_record(streams()), cut, nodes=NODES, clean_end=False)
    last_t = max(json.loads(line).get("t", 0.0) for line in path.read_text().splitlines())
    if torn:
        with path.open("a") as log:
            log.write('{"v": 1, "kind": "sample", "t": 100.49')  # the write the kill cut
    out = tmp_path / "out"
    assert main(["analyze", str(path), "--out", str(out)]) in (0, 1)  # the LBs' verdicts
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended"]["abruptly"] is True
    assert summary["ended"]["reason"] is None
    assert summary["ended"]["t"] == pytest.approx(last_t)
    assert last_t <= KILLED_AT
    # Everything up to the last whole record: the windows the daemon closed, and the one
    # open at the kill, closed there.
    hosts = [w["host"] for w in summary["windows"]]
    assert hosts[: len(live.windows)] == [w.host for w in live.windows]
    assert hosts[-1] == "apiserver-bbbb"
    suite = next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))
    case = next(c for c in suite if c.name == WHOLE_RUN.name)
    assert isinstance(case.result[0], Skipped)
    assert case.result[0].message.startswith(f"the run ended abruptly at {last_t:.2f} s")
    properties = {p.name: p.value for p in suite.properties()}
    assert float(properties["ended_abruptly_at"]) == pytest.approx(last_t)
    assert f"the run ended abruptly at {last_t:.2f} s" in (out / "report.html").read_text()


def test_a_stopped_run_is_marked_stopped(tmp_path: Path, rollout_log) -> None:
    path, _ = rollout_log
    out = tmp_path / "out"
    main(["analyze", str(path), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended"]["abruptly"] is False
    assert "ended abruptly" not in (out / "report.html").read_text()
