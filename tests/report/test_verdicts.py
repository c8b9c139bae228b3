"""Verdicts that need no history to decide."""

from __future__ import annotations

from prober.core.models import LB, Connection, Protocol, StreamId
from prober.report.verdicts import LOCALHOST_REASON, Status, judge


def summary_with_failures(lb: LB) -> dict:
    stream = StreamId("kube-api", Protocol.HTTP1, lb, Connection.NEW)
    key = {"lb": str(lb), "protocol": "http1", "connection": "new"}
    window_stream = {"stream": stream.name, **key, "late": 3, "reaction": 2.0, "failures": 4}
    return {
        "platform": "aws",
        "windows": [
            {
                "host": "h",
                "node": None,
                "t0": 1.0,
                "t0_lo": 0.9,
                "t0_hi": 1.1,
                "streams": [window_stream],
            }
        ],
        "streams": [{"stream": stream.name, **key, "disruption_seconds": 0.5, "intervals": []}],
        "worst": [{**key, "reaction": 2.0, "disruption_seconds": 0.5}],
    }


def test_failures_inside_a_window_fail_an_lb_even_without_history() -> None:
    routing = judge(summary_with_failures(LB.INTERNAL), None)[0]
    assert routing.status is Status.FAILED
    assert "4 requests failed inside the shutdown window" in routing.message


def test_localhost_has_no_lb_to_judge() -> None:
    routing = judge(summary_with_failures(LB.LOCALHOST), None)[0]
    assert (routing.status, routing.message) == (Status.SKIPPED, LOCALHOST_REASON)
