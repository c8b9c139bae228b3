"""One cause per failed request (`report.results.causes`), the test each cause belongs to, and the
reset test that reports what the platform predicts as origin reports a known flake."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from prober.core.budgets import PLATFORMS
from prober.core.models import LB
from prober.report.documents.junit import junit_xml
from prober.report.results.causes import Cause, Owner, decide, owner
from prober.report.verdicts.counts import counts_text
from prober.report.verdicts.identity import Case
from prober.report.verdicts.judging import counts_entry
from prober.report.verdicts.reset_verdicts import judge_resets
from prober.report.verdicts.verdicts import Status, judge

# T0 at 10 s (bound 9.9-10.1), a 20 s delay: the server serves until 29.9 s at the earliest.
WINDOW = {"host": "h", "node": "master-0", "t0": 10.0, "t0_lo": 9.9, "t0_hi": 10.1,
          "delay": 20.0, "end_t": 40.0, "streams": []}  # fmt: skip


def interval(start: float, error: str, **more: Any) -> dict[str, Any]:
    return {"start_t": start, "end_t": start + 0.5, "error": error, "samples": 2, **more}


@pytest.mark.parametrize(
    ("entry", "lb", "cause"),
    [
        # after the delay's earliest end: the LB sent it to a server that had stopped
        (interval(30.0, "connect_refused"), LB.EXTERNAL, Cause.STOPPED_SERVER),
        (interval(29.9, "connection_reset"), LB.EXTERNAL, Cause.STOPPED_SERVER),
        (interval(35.0, "retry_after"), LB.INTERNAL, Cause.STOPPED_SERVER),
        # a reset while the server still served: the LB's
        (interval(10.8, "connection_reset"), LB.EXTERNAL, Cause.LB_RESET),
        # ... but localhost has no LB to reset anything
        (interval(10.8, "connection_reset"), LB.LOCALHOST, Cause.UNATTRIBUTED),
        # a timeout inside the window while the server served: nothing ties it
        (interval(12.0, "timeout"), LB.INTERNAL, Cause.UNATTRIBUTED),
        # outside every window
        (interval(5.0, "connection_reset"), LB.EXTERNAL, Cause.UNATTRIBUTED),
        (interval(50.0, "goaway"), LB.INTERNAL, Cause.SERVER_CLOSED),
        # answered by a restarted process too young to serve
        (interval(41.0, "http_5xx", early=2), LB.EXTERNAL, Cause.EARLY),
        # every answer with Retry-After retried through: no failure at all
        (interval(30.0, "retry_after", felt=False), LB.EXTERNAL, Cause.RETRY_AFTER),
    ],
)
def test_each_interval_gets_one_cause(entry: Any, lb: LB, cause: Cause) -> None:
    assert decide(entry, lb, [WINDOW]) is cause  # type: ignore[list-item]


def test_each_cause_has_one_test_and_localhost_has_only_availability() -> None:
    assert owner(Cause.STOPPED_SERVER, LB.EXTERNAL) is Owner.ROUTING
    assert owner(Cause.LB_RESET, LB.INTERNAL) is Owner.RESETS
    assert owner(Cause.EARLY, LB.EXTERNAL) is Owner.EARLY
    assert owner(Cause.UNATTRIBUTED, LB.EXTERNAL) is Owner.AVAILABILITY
    assert owner(Cause.SERVER_CLOSED, LB.EXTERNAL) is Owner.AVAILABILITY
    assert owner(Cause.STOPPED_SERVER, LB.LOCALHOST) is Owner.AVAILABILITY
    assert owner(Cause.RETRY_AFTER, LB.LOCALHOST) is Owner.NONE


def summary(platform: str, *intervals: dict[str, Any]) -> dict[str, Any]:
    stream = "kube-api-http2-external-lb-reused-connections"
    key = {"lb": "external-lb", "protocol": "http2", "connection": "reused"}
    return {
        "platform": platform,
        "started": "2026-12-06T00:00:00Z",
        "windows": [WINDOW],
        "streams": [
            {
                "stream": stream,
                **key,
                "samples": 100,
                "disruption_seconds": 1.0,
                "intervals": list(intervals),
            }
        ],
        "worst": [{**key, "reaction": 1.0, "disruption_seconds": 1.0}],
    }


NAME = Case.NO_RESETS.format(lb=LB.EXTERNAL)


@pytest.mark.parametrize(
    ("platform", "start", "status", "starts"),
    [
        # aws's NLB resets the flows of a server it deregisters: at its detection, by design
        ("aws", 10.8, Status.BY_DESIGN, "by design: 2 requests reset by the LB as it took"),
        # metal's HAProxy resets them too, at its detection (17 s at worst): later, failed
        ("metal", 29.5, Status.FAILED, "2 requests reset later than its detection could explain"),
        # gcp's LBs keep flows: any reset fails
        ("gcp", 10.8, Status.FAILED, "2 requests reset by the LB as it took a still-serving"),
    ],
)
def test_resets_the_platform_predicts_are_by_design(
    platform: str, start: float, status: Status, starts: str
) -> None:
    profile = PLATFORMS[platform]
    entry = summary(platform, interval(start, "connection_reset"))
    [verdict] = judge_resets(entry, profile)  # type: ignore[arg-type]
    assert (verdict.name, verdict.status, verdict.cause) == (NAME, status, "lb-reset")
    assert verdict.message.startswith(starts), verdict.message
    assert "cause lb-reset" in verdict.message


def test_a_reset_is_judged_by_the_reset_test_alone_and_counted_as_junit_counts() -> None:
    s = summary("aws", interval(10.8, "connection_reset"))
    verdicts = judge(s, None) + judge_resets(s, PLATFORMS["aws"])  # type: ignore[arg-type]
    failing = [v for v in verdicts if v.status in (Status.FAILED, Status.BY_DESIGN)]
    assert [v.name for v in failing] == [NAME]
    routing, available = verdicts[0], verdicts[1]
    assert routing.status is Status.SKIPPED  # no history, and nothing of its cause failed
    assert available.status is Status.SKIPPED
    # junit.xml: the test by design fails and then passes under one name
    root = ET.fromstring(junit_xml(verdicts, {}))
    cases = [c for c in root.iter("testcase") if c.get("name") == NAME]
    assert [c[0].tag if len(c) else "" for c in cases] == ["failure", "system-out"]
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "1", "2")
    assert counts_text(verdicts) == (
        "4 tests, 1 failed, 1 passed, 2 skipped (1 of the failed by design, each passed again)"
    )
    assert counts_entry(verdicts) == {
        "tests": 4, "failed": 1, "passed": 1, "skipped": 2, "by_design": 1,
    }  # fmt: skip
