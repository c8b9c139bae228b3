"""Same-node results in `prober analyze`'s outputs: apart from the LBs', and no LB's verdict
(`report.results.samenode`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB
from prober.report.analyze import analyze_runs
from prober.report.documents.run_text import describe
from prober.report.verdicts.analysis import RunAnalysis
from prober.report.verdicts.verdicts import Status
from tests.report.daemonlog import run_record, write_daemon_log
from tests.support.hairpin import DELAY, NODES, ON_MASTER, STREAMS, hairpin_run


@pytest.fixture
def hairpin_log(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    run = dataclasses.replace(run_record(STREAMS, platform="gcp"), node="master-0")
    write_daemon_log(path, run, hairpin_run(), nodes=NODES, placement=ON_MASTER)
    return path


def analysis_of(path: Path) -> RunAnalysis:
    (analysis,), _ = analyze_runs([path])
    return analysis


def test_the_lbs_results_hold_nothing_of_the_same_node_requests(hairpin_log: Path) -> None:
    analysis = analysis_of(hairpin_log)
    assert analysis.warnings == []  # the replay agrees with what the daemon logged
    s = analysis.summary
    assert s["apiservers"] == NODES
    worst = {(w["lb"], w["connection"]): w for w in s["worst"]}
    # Charged to the LB, master-0's own answers would say the internal LB routed to it for
    # the whole delay; here the internal LB has no reaction and no disruption at all.
    assert worst[("internal-lb", "new")]["reaction"] is None
    assert worst[("internal-lb", "new")]["disruption_seconds"] == 0
    assert worst[("localhost", "new")]["reaction"] == pytest.approx(DELAY, abs=0.6)
    ilb = next(e for e in s["streams"] if e["lb"] == "internal-lb")
    assert ilb["same_node"] == ilb["samples"] == 300
    elb = next(e for e in s["streams"] if e["lb"] == "external-lb")
    assert 0 < elb["same_node"] < elb["samples"]
    section = s["same_node"]
    assert (section["node"], section["hairpins"]) == ("master-0", ["internal-lb"])
    (window,) = section["windows"]
    reacted = {ws["lb"]: ws["reaction"] for ws in window["streams"]}
    assert reacted["internal-lb"] == pytest.approx(DELAY, abs=0.6)  # until it stopped listening
    (same_ilb,) = [e for e in section["streams"] if e["lb"] == "internal-lb"]
    assert same_ilb["disruption_seconds"] == pytest.approx(2.0, abs=0.2)  # refused while down


def test_an_lb_only_the_node_answered_gets_no_verdict_of_the_lbs(hairpin_log: Path) -> None:
    verdicts = analysis_of(hairpin_log).verdicts
    internal = [v for v in verdicts if v.key is not None and v.key[0] is LB.INTERNAL]
    assert len(internal) == 5  # routing, availability, budget, delay coverage, answer times
    for verdict in internal:
        assert verdict.status is Status.SKIPPED, verdict.name
        assert verdict.message.startswith(
            "every request through internal-lb reached the prober's own node master-0's "
            "apiserver (a hairpin)"
        )
    external = [v for v in verdicts if v.key is not None and v.key[0] is LB.EXTERNAL]
    assert {v.status for v in external if "budget" in v.name} == {Status.PASSED}


def test_the_outputs_show_the_same_node_requests_apart(hairpin_log: Path, tmp_path: Path) -> None:
    text = "\n".join(describe(analysis_of(hairpin_log)))
    assert "same-node: requests that reached the prober's own node master-0's apiserver" in text
    assert "internal-lb hairpins from it" in text
    out = tmp_path / "out"
    main(["analyze", str(hairpin_log), "--out", str(out)])
    html = (out / "report.html").read_text()
    assert '<h2 id="same-node">Same-node requests</h2>' in html
    assert "internal-lb hairpins from it" in html
    summary = json.loads((out / "summary.json").read_text())
    assert all(not w.get("same_node") for w in summary["windows"])  # never the LB's


def test_a_prober_that_knows_no_node_has_no_same_node_results(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    write_daemon_log(path, run_record(STREAMS, platform="gcp"), hairpin_run(), nodes=NODES)
    s = analysis_of(path).summary
    assert s["same_node"] == {"node": None, "hairpins": [], "windows": [], "streams": []}
    worst = {(w["lb"], w["connection"]): w for w in s["worst"]}
    assert worst[("internal-lb", "new")]["reaction"] == pytest.approx(DELAY, abs=0.6)
    assert "same-node" not in "\n".join(describe(analysis_of(path)))
