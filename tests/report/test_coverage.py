"""Proof of completeness from a recorded log: the daemon's own pipeline and writer count the
ticks of the standard rollout (`daemonlog`, a fake clock), and `prober analyze` reports them
in summary.json and judges them in junit.xml. A paused daemon (no request of any stream for
three seconds inside the first window, the missed ticks skipped as `behind`) fails the test
"should have sampled each shutdown window without a gap" with the gap's length and place."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from prober.cli import main
from prober.core.coverage import GAP_LIMIT
from prober.report.verdicts.identity import Case
from tests.report.daemonlog import START, run_record, write_daemon_log
from tests.report.rollout import NODES, rollout, streams

GAP = 0.25  # the rollout's every stream sends a request every 0.25 s
PAUSE = (40.0, 43.0)  # inside the first window (T0 30 s): the daemon stopped, then went on
SAMPLED = Case.SAMPLED.format(lb="internal-lb", protocol="http1", connection="new")


def analyze(
    tmp_path: Path, *, paused: bool, schedule: float | None = GAP
) -> tuple[dict, dict, str]:
    samples = rollout(end=140.0).samples()  # two of its shutdowns
    skips = []
    if paused:  # each stream's ticks in the pause skipped as the scheduler woke at its end
        missed = Counter(s.stream for s in samples if PAUSE[0] < s.t < PAUSE[1])
        samples = [s for s in samples if not PAUSE[0] < s.t < PAUSE[1]]
        skips = [(PAUSE[1], stream, missed[stream.name]) for stream in streams()]
    log = tmp_path / "events.jsonl"
    write_daemon_log(
        log, run_record(streams()), samples, nodes=NODES, schedule=schedule, skips=skips
    )
    out = tmp_path / "out"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        main(["analyze", str(log), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    cases = {
        case.name: case for suite in JUnitXml.fromfile(str(out / "junit.xml")) for case in suite
    }
    return summary, cases, printed.getvalue()


def test_a_whole_run_is_covered_and_passes(tmp_path: Path) -> None:
    summary, cases, _ = analyze(tmp_path, paused=False)
    section = summary["coverage"]
    assert section["limit_factor"] == GAP_LIMIT
    for total in section["streams"]:  # every tick sent, every request counted
        assert total["due"] == total["started"] == total["counted"] > 0
        assert total["skipped"] == 0
    assert [w["host"] for w in section["windows"]] == [w["host"] for w in summary["windows"]]
    for window in section["windows"]:
        assert len(window["streams"]) == len(streams())
        for stream in window["streams"]:
            assert stream["taken"] == stream["due"] > 0
            assert stream["share"] == 1.0
            assert stream["gap"] == pytest.approx(GAP)
            assert stream["within"] is True
    assert cases[SAMPLED].is_passed
    (verdict,) = [v for v in summary["verdicts"] if v["name"] == SAMPLED]
    assert verdict["message"].startswith("every window sampled within the limit; worst: ")
    assert (verdict["observed"], verdict["allowed"]) == pytest.approx((GAP, GAP_LIMIT * GAP))


def test_a_paused_daemon_fails_with_the_gaps_length_and_place(tmp_path: Path) -> None:
    summary, cases, printed = analyze(tmp_path, paused=True)
    first = summary["coverage"]["windows"][0]
    mine = next(s for s in first["streams"] if s["stream"].startswith("kube-api-http1-internal"))
    assert mine["skipped"] == 11  # 40.25 s .. 42.75 s
    assert mine["taken"] == mine["due"] - 11
    assert mine["gap"] == pytest.approx(3.0)  # from the last send before the pause to the next
    assert (mine["gap_start"], mine["gap_end"]) == pytest.approx(PAUSE)
    assert mine["within"] is False
    (failure,) = cases[SAMPLED].result
    assert isinstance(failure, Failure)
    start, end = f"{mine['gap_start']:.3f}", f"{mine['gap_end']:.3f}"
    assert f"a 3.000 s gap from {start} s to {end} s run time" in failure.message
    assert f"({START[:11]}10:00:{mine['gap_start']:09.6f}Z" in failure.message  # wall time
    assert "shutdown window of master-0 #1 (apiserver apiserver-aaaa, T0 " in failure.message
    assert f"limit 1.000 s: {GAP_LIMIT:g} x the scheduled 0.250 s" in failure.message
    row = (  # printed per window and stream
        f"master-0 #1  internal-lb  http1     new         {mine['due']}  {mine['taken']}  "
    )
    assert row in printed
    assert "3.000 s    40.000..43.000 s  1.000 s  NO" in printed
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count('<tr class="failed">') == len(streams())  # the first window's rows
    [later] = summary["coverage"]["windows"][1:]  # the other window was whole
    assert [s["within"] for s in later["streams"]] == [True] * len(streams())


def test_a_log_before_coverage_has_none_and_no_such_test(tmp_path: Path) -> None:
    summary, cases, printed = analyze(tmp_path, paused=False, schedule=None)
    assert "coverage per shutdown window" not in printed
    assert "coverage" not in summary
    assert "windows" in summary  # analysed as ever
    assert not [name for name in cases if "should have sampled" in name]
