"""The other edge in summary.json and JUnit: add-back against each LB's worst, early routing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import JUnitXml

from prober.cli import main
from prober.core.budgets import PLATFORMS
from prober.core.instances import AddBack, Instance
from prober.core.models import LB, ErrorClass, Protocol, Sample
from prober.report.results.restarts import OVER, UNDECIDED, WITHIN, restarts_section
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.early_verdicts import edges_line, judge_early
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict
from tests.factories import OTHER, STREAM, sample
from tests.report.daemonlog import run_record, write_daemon_log

AWS = PLATFORMS["aws"]  # every LB's worst add-back: 10 s x 2 checks + a 10 s timeout = 30 s


def back(lb: LB, seconds: float | None, lo: float | None, hi: float | None, early: int = 0):
    return AddBack("kube-api", lb, None if seconds is None else 1.0, None, None, seconds, lo, hi,
                   early)  # fmt: skip


def instance(*lbs: AddBack, start: int = 2) -> Instance:
    return Instance("apiserver-a", "master-0", start, "h2", 10.0, 12.0, 11.0, 13.0,
                    "lease-first-write", "internal-lb answer", lbs, sum(b.early for b in lbs),
                    True)  # fmt: skip


@pytest.mark.parametrize(
    ("seconds", "lo", "hi", "verdict"),
    [
        (20.0, 18.0, 25.0, WITHIN),  # the whole bound inside the LB's worst
        (35.0, 31.0, 36.0, OVER),  # the whole bound past it
        (29.0, 27.0, 33.0, UNDECIDED),  # the bound straddles it
        (None, None, None, None),  # not taken back
    ],
)
def test_each_add_back_is_held_to_the_lbs_worst(seconds, lo, hi, verdict) -> None:
    section = restarts_section([instance(back(LB.EXTERNAL, seconds, lo, hi))], AWS)
    assert section is not None
    [entry] = section["instances"][0]["lbs"]
    assert (entry["budget"], entry["verdict"]) == (30.0, verdict)


def test_per_lb_the_slowest_add_back_and_what_lies_past_the_worst() -> None:
    instances = [
        instance(back(LB.EXTERNAL, 20.0, 18.0, 25.0), start=2),
        instance(back(LB.EXTERNAL, 35.0, 31.0, 36.0), start=3),
    ]
    section = restarts_section(instances, AWS)
    assert section is not None
    [lb] = section["lbs"]
    assert (lb["taken_back"], lb["worst"], lb["over"], lb["undecided"]) == (2, 35.0, 1, 0)
    assert lb["text"] == (
        "external-lb took back 2 of 2 restarts; slowest 35.00 s [31.00, 36.00] after T1 "
        "(worst add-back 30.00 s); 1 past its worst, 0 may be; 0 early failures"
    )
    assert section["instances"][0]["label"] == "master-0 #2"


def test_a_run_without_restarts_has_no_section() -> None:
    assert restarts_section([], AWS) is None


def summary_with(*lbs: AddBack) -> SummaryDocument:
    section = restarts_section([instance(*lbs)], AWS)
    assert section is not None
    return {"platform": "aws", "restarts": section}  # type: ignore[typeddict-item]


def test_the_early_test_fails_passes_or_skips_per_lb() -> None:
    summary = summary_with(
        back(LB.EXTERNAL, 1.0, 0.0, 2.0, early=3),
        back(LB.INTERNAL, 1.0, 0.0, 2.0),
        back(LB.SERVICE_NETWORK, None, None, None),
    )
    verdicts = {v.name: v for v in judge_early(summary)}
    status = {lb: verdicts[Case.BEFORE_IT_CAN_SERVE.format(lb=lb)].status for lb in
              (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK)}  # fmt: skip
    assert status == {
        LB.EXTERNAL: Status.FAILED,
        LB.INTERNAL: Status.PASSED,
        LB.SERVICE_NETWORK: Status.SKIPPED,
    }
    failed = verdicts[Case.BEFORE_IT_CAN_SERVE.format(lb=LB.EXTERNAL)]
    assert failed.message.startswith(
        "3 requests answered by a restarted kube-apiserver before it could serve (cause early): "
        "it sent them in the apiserver's first seconds after /readyz went true: external-lb "
        "took back 1 of 1 restarts"
    )


def test_one_line_says_which_edge_broke() -> None:
    early = Verdict(CaseId(Case.BEFORE_IT_CAN_SERVE, LB.EXTERNAL), None, Status.FAILED, "")
    key = (LB.INTERNAL, Protocol.HTTP1, "new")
    routing = Verdict(CaseId.of(Case.ROUTING, key), None, Status.FAILED, "")
    assert edges_line([]) == "edges: nothing failed at either edge of a restart"
    assert edges_line([early]) == (
        "edges: add-back edge (readyz true too early): routed before it could serve: external-lb"
    )
    assert edges_line([routing, early]).startswith(
        "edges: shutdown edge (readyz false): 1 LB tests failed; add-back edge"
    )


def early_run() -> list[Sample]:
    """A and B answer through both LBs; A shuts down, and is back answering 500s awhile."""
    out: list[Sample] = []
    for i in range(40):
        out += [sample(i * 0.5, host="A"), sample(i * 0.5 + 0.1, host="B", stream=OTHER)]
    out += [sample(20.0 + i * 0.5, host="A", late=True, elapsed=i * 0.5, delay=20.0)
            for i in range(4)]  # fmt: skip
    out += [sample(22.0 + i * 0.25, host="B") for i in range(40)]
    error = {"error": ErrorClass.HTTP_5XX, "status": 500, "host": "A"}
    out += [sample(32.0 + i * 0.5, **error) for i in range(4)]
    out += [sample(32.1 + i * 0.5, stream=OTHER, **error) for i in range(4)]
    out += [sample(40.0 + i * 0.5, host="A") for i in range(10)]
    return out


def test_the_event_log_alone_rebuilds_the_add_back_and_the_early_failures(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    live = write_daemon_log(log, run_record([STREAM, OTHER]), early_run())
    [restarted] = live.instances
    assert restarted.early == 8
    out = tmp_path / "out"
    assert main(["analyze", str(log), "--out", str(out)]) == 1
    doc = json.loads((out / "summary.json").read_text())
    [entry] = doc["restarts"]["instances"]
    assert (entry["label"], entry["early"]) == ("A #2", 8)
    assert {b["lb"]: b["early"] for b in entry["lbs"]} == {"external-lb": 4, "internal-lb": 4}
    assert entry["t1_lo_by"] == "old-instance"
    cases = {c.name: c for c in next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))}
    for lb in ("external-lb", "internal-lb"):
        assert cases[Case.BEFORE_IT_CAN_SERVE.format(lb=lb)].result  # failed
    # The early failures are the restart's, not the shutdown window's.
    assert all(s["failures"] == 0 for w in doc["windows"] for s in w["streams"])
