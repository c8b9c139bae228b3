"""`prober recommend` on synthetic histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection, Protocol
from prober.report.history.threshold_rows import Entry
from prober.report.history.thresholds import Thresholds, to_document
from prober.report.recommend import delay_for, recommend
from prober.report.schema.jsonio import write_json


def test_the_rule_reproduces_openshifts_gcp_value() -> None:
    # The operator's GCP sizing (observe_termination_duration.go): late requests at 67 s;
    # 0.8 x delay >= 67 s plus a 10 s buffer: 95 s
    assert delay_for(67.0) == 95.0
    assert delay_for(24.0) == 40.0  # exactly on a step stays there
    assert delay_for(24.01) == 45.0
    assert delay_for(0.0) == 10.0
    assert delay_for(24.0, buffer=0.0) == 30.0


def _reaction(
    platform: str,
    lb: LB,
    protocol: Protocol,
    connection: Connection,
    p99: float,
    *,
    runs: int = 200,
) -> Entry:
    return Entry(
        platform,
        lb,
        protocol,
        connection,
        "reaction",
        p99 / 4,
        p99 / 2,
        p99 * 0.9,
        p99,
        runs,
        runs >= 100,
    )


HISTORY = [
    _reaction("aws", LB.INTERNAL, Protocol.HTTP2, Connection.NEW, 20.0),
    _reaction("aws", LB.EXTERNAL, Protocol.HTTP1, Connection.NEW, 24.0),  # worst new
    _reaction("aws", LB.EXTERNAL, Protocol.HTTP1, Connection.REUSED, 31.0),
    _reaction("gcp", LB.INTERNAL, Protocol.HTTP2, Connection.NEW, 80.0),
    _reaction("gcp", LB.INTERNAL, Protocol.HTTP2, Connection.REUSED, 10.0),
    _reaction("azure", LB.INTERNAL, Protocol.HTTP2, Connection.NEW, 30.0, runs=12),
]


def test_per_platform_recommendations_and_why_they_differ() -> None:
    by = {r.platform: r for r in recommend(Thresholds(HISTORY))}
    assert set(by) == {"aws", "azure", "gcp"}
    aws = by["aws"]
    assert (aws.new.delay, aws.new.entry.lb, aws.reused.delay, aws.today) == (
        40.0,
        LB.EXTERNAL,
        50.0,
        129.0,
    )
    assert aws.why == (
        "P99 new-connection reaction 24.0 s (external-lb http1, 200 runs) needs 40 s: today's "
        "129 s makes every apiserver shutdown 89 s longer than the LBs need; reused "
        "connections stay on the old apiserver longer (P99 31.0 s, 50 s to cover), until it "
        "closes them"
    )
    gcp = by["gcp"]
    assert (gcp.new.delay, gcp.reused.delay, gcp.today) == (110.0, 25.0, 95.0)
    assert gcp.why.startswith(
        "P99 new-connection reaction 80.0 s (internal-lb http2, 200 runs) does not fit today's "
        "95 s: requests still arrive after 80 % of it (76 s)"
    )
    azure = by["azure"]
    assert (azure.new, azure.reused, azure.today) == (None, None, 70.0)
    assert azure.why.startswith("not enough history: at most 12 runs per key")


@pytest.fixture
def thresholds_file(tmp_path: Path) -> Path:
    path = tmp_path / "thresholds.json"
    write_json(path, to_document(HISTORY))
    return path


def test_the_command_prints_a_table_and_writes_json(thresholds_file: Path, tmp_path, capsys):
    out = tmp_path / "made" / "here"
    assert main(["recommend", "--thresholds", str(thresholds_file), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (
        "shutdown-delay-duration = worst late arrival / 0.8 + 10 s buffer, rounded up to 5 s"
    )
    row = next(line for line in printed if line.startswith("aws "))
    assert row.split()[1:7] == ["24.0", "s", "(external-lb", "http1)", "40", "s"]
    assert "129 s (OpenShift's AWS value)" in row
    assert printed[-1] == f"wrote {out / 'recommendations.json'}"
    doc = json.loads((out / "recommendations.json").read_text())
    gcp = next(p for p in doc["platforms"] if p["platform"] == "gcp")
    assert gcp["new"] == {
        "p99": 80.0,
        "lb": "internal-lb",
        "protocol": "http2",
        "runs": 200,
        "delay": 110.0,
    }


def test_an_unknown_platform_or_no_reaction_history_exits_2(
    thresholds_file: Path, tmp_path: Path, capsys
) -> None:
    args = ["recommend", "--thresholds", str(thresholds_file), "--platform", "ibmcloud"]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"prober recommend: {thresholds_file}: no history for platform 'ibmcloud' "
        "(it has aws, azure, gcp)\n"
    )
    empty = tmp_path / "empty.json"
    write_json(empty, {"v": 1, "entries": []})
    assert main(["recommend", "--thresholds", str(empty)]) == 2
    assert capsys.readouterr().err == (
        f"prober recommend: {empty}: no reaction entries to recommend from\n"
    )


def test_help_has_an_example(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    assert "prober recommend --thresholds thresholds.json" in capsys.readouterr().out


def test_thin_history_falls_back_on_the_lb_settings_and_says_so() -> None:
    history = [
        _reaction("azure", LB.INTERNAL, Protocol.HTTP2, Connection.NEW, 30.0, runs=12),
        _reaction("ibmcloud", LB.INTERNAL, Protocol.HTTP2, Connection.NEW, 30.0, runs=12),
        _reaction("aws", LB.EXTERNAL, Protocol.HTTP1, Connection.NEW, 42.0),  # over 30 s
    ]
    by = {r.platform: r for r in recommend(Thresholds(history))}
    azure = by["azure"]
    # Azure's LB: interval 5 s, 2 probes, timeout 5 s: 15 s at worst; 15 / 0.8 + 10 -> 30 s.
    assert azure.new is None
    assert azure.prior is not None
    assert (azure.prior.lb, azure.prior.budget, azure.prior.delay) == (LB.EXTERNAL, 15.0, 30.0)
    assert azure.delay == 30.0
    assert azure.why == (
        "not enough history: at most 12 runs per key, fewer than the thresholds' minimum; "
        "from the LB settings instead, until the history is usable: the slowest LB, "
        "external-lb, stops routing to a not-ready apiserver within 15 s at worst (interval "
        "5.00 s, 2 unhealthy checks, timeout 5.00 s), which needs 30 s"
    )
    assert by["ibmcloud"].delay is None
    assert by["ibmcloud"].why.endswith("no LB settings known for 'ibmcloud' to stand in")
    aws = by["aws"]
    assert aws.delay == aws.new.delay == 65.0  # the history decides once it is usable
    assert "over the 30 s its LB settings promise at worst (external-lb)" in aws.why


def test_the_document_carries_the_prior_and_what_is_recommended(tmp_path: Path) -> None:
    path = tmp_path / "thresholds.json"
    write_json(path, to_document(HISTORY))
    assert main(["recommend", "--thresholds", str(path), "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "recommendations.json").read_text())
    by = {p["platform"]: p for p in doc["platforms"]}
    assert by["azure"]["prior"] == {"lb": "external-lb", "budget": 15.0, "delay": 30.0}
    assert by["azure"]["recommended"] == 30.0
    assert by["aws"]["recommended"] == by["aws"]["new"]["delay"] == 40.0
