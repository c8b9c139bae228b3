"""Verdicts that need no history to decide, and what the messages say of the sampling's bound."""

from __future__ import annotations

from typing import Any

import pytest

from prober.core.models import LB, Connection, Protocol, StreamId
from prober.report.format.tables import bound, bounded
from prober.report.history.threshold_rows import Entry
from prober.report.history.thresholds import Thresholds
from prober.report.results.bounds import disruption_bound
from prober.report.verdicts.verdicts import LOCALHOST_REASON, Status, judge, within

STREAM = StreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, Connection.NEW)
KEY = {"lb": "internal-lb", "protocol": "http1", "connection": "new"}
# allowed 5 s for reaction, 1 s for disruption
HISTORY = Thresholds(
    [
        Entry("aws", LB.INTERNAL, Protocol.HTTP1, Connection.NEW, metric, 1, 2, 3, p99, 150, True)
        for metric, p99 in (("reaction", 4.2), ("disruption", 0.6))
    ]
)


REFUSED = {"start_t": 1.5, "end_t": 2.0, "error": "connect_refused", "samples": 4}


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
                "delay": 0.5,  # it stopped serving from 1.4 s
                "streams": [window_stream],
            }
        ],
        "streams": [
            {"stream": stream.name, **key, "disruption_seconds": 0.5, "intervals": [REFUSED]}
        ],
        "worst": [{**key, "reaction": 2.0, "disruption_seconds": 0.5}],
    }


def test_failures_inside_a_window_fail_an_lb_even_without_history() -> None:
    routing = judge(summary_with_failures(LB.INTERNAL), None)[0]
    assert routing.status is Status.FAILED
    assert routing.message.startswith(
        "kube-api-http1-internal-lb-new-connections: 4 requests sent to a kube-apiserver that "
        "had stopped serving (cause stopped-server: connect_refused x4), apiserver h, T0 at "
        "1.00 s (report.html#window-1)"
    )
    assert routing.cause == "stopped-server"


@pytest.mark.parametrize(("felt", "status"), [(False, Status.SKIPPED), (True, Status.FAILED)])
def test_answers_every_retry_got_through_fail_no_routing_test(felt: bool, status: Status) -> None:
    # The four failures are answers with Retry-After inside the window: where client-go's
    # retries of every one got through, no client failed, and the message says so.
    summary = summary_with_failures(LB.INTERNAL)
    told = {"start_t": 1.5, "end_t": 2.0, "error": "retry_after", "samples": 4, "felt": felt}
    summary["streams"][0]["intervals"] = [told]
    routing = judge(summary, None)[0]
    assert routing.status is status
    if felt:
        assert "4 requests sent to a kube-apiserver that had stopped serving" in routing.message
        assert "(cause stopped-server: retry_after x4)" in routing.message
    else:
        assert routing.message == (
            "no thresholds file given; 4 requests inside the shutdown windows were answered "
            "with Retry-After and client-go's retries of every one got through: no client "
            "failed"
        )


def test_localhost_has_no_lb_to_judge() -> None:
    routing = judge(summary_with_failures(LB.LOCALHOST), None)[0]
    assert (routing.status, routing.message) == (Status.SKIPPED, LOCALHOST_REASON)


@pytest.mark.parametrize(
    ("lo", "hi", "words", "brackets"),
    [
        (2.1, 2.62, "true value within [2.10, 2.62] s given the sampling", "[2.10, 2.62]"),
        (
            11.76,
            None,
            "true value at least 11.76 s given the sampling, which sets no upper bound",
            "[11.76, ?]",
        ),
        (
            None,
            3.0,
            "true value at most 3.00 s given the sampling, which sets no lower bound",
            "[?, 3.00]",
        ),
        (None, None, "no bound from the sampling", "[?, ?]"),
    ],
)
def test_a_bound_in_words_and_in_brackets(lo, hi, words: str, brackets: str) -> None:
    assert within(lo, hi) == words
    assert bound(lo, hi) == brackets


@pytest.mark.parametrize(
    ("value", "lo", "hi", "text"),
    [(2.31, 2.1, 2.62, "2.31 s [2.10, 2.62]"), (11.79, 11.76, None, "11.79 s [11.76, ?]")],
)
def test_a_value_with_its_bound(value, lo, hi, text: str) -> None:
    assert bounded(value, lo, hi) == text
    assert bounded(None, lo, hi) == "-"


def _routing_summary(reaction: float, lo: float | None, hi: float | None) -> dict[str, Any]:
    ws = {"stream": STREAM.name, **KEY, "late": 3, "reaction": reaction, "failures": 0}
    ws.update(reaction_lo=lo, reaction_hi=hi, bound_by=None if hi is None else "sampling")
    window = {"host": "h", "node": "m0", "t0": 1.0, "t0_lo": 0.9, "t0_hi": 1.1, "streams": [ws]}
    worst = {**KEY, "reaction": reaction, "reaction_lo": lo, "reaction_hi": hi}
    return {
        "platform": "aws",
        "windows": [window],
        "streams": [],
        "worst": [{**worst, "disruption_seconds": 0.0}],
    }


LATE = (
    "kube-api-http1-internal-lb-new-connections: apiserver h (node m0) still got requests "
    "{} s after its /readyz went false ({}T0 1.00 s ± 0.10 s, 3 late; report.html#window-1); "
    "allowed 5 s (P99 of 150 aws runs)"
)


@pytest.mark.parametrize(
    ("reaction", "lo", "hi", "status", "message"),
    [
        (
            2.31,
            2.1,
            2.62,
            Status.PASSED,
            LATE.format("2.31", "true value within [2.10, 2.62] s given the sampling; "),
        ),
        (  # the point passes, the bound reaches past the allowed value: still passes, and says so
            4.5,
            4.2,
            6.0,
            Status.PASSED,
            LATE.format("4.50", "true value within [4.20, 6.00] s given the sampling; ")
            + "; its bound spans the allowed value: judged on the measured 4.50 s",
        ),
        (  # the point fails, the bound reaches below the allowed value: still fails
            5.5,
            4.9,
            5.7,
            Status.FAILED,
            LATE.format("5.50", "true value within [4.90, 5.70] s given the sampling; ")
            + "; its bound spans the allowed value: judged on the measured 5.50 s",
        ),
        (
            7.0,
            6.8,
            None,
            Status.FAILED,
            LATE.format(
                "7.00",
                "true value at least 6.80 s given the sampling, which sets no upper bound; ",
            ),
        ),
    ],
)
def test_routing_messages_state_the_bound_and_verdicts_judge_the_point(
    reaction: float, lo: float, hi: float | None, status: Status, message: str
) -> None:
    routing = judge(_routing_summary(reaction, lo, hi), HISTORY)[0]
    assert (routing.status, routing.observed, routing.allowed) == (status, reaction, 5.0)
    assert routing.message == message
    assert routing.details == ((message,) if status is Status.FAILED else ())


def test_a_v1_summary_has_no_bound_to_state() -> None:
    summary = _routing_summary(2.31, 2.1, 2.62)
    for entry in (summary["windows"][0]["streams"][0], summary["worst"][0]):
        for name in ("reaction_lo", "reaction_hi", "bound_by"):
            entry.pop(name, None)
    routing = judge(summary, HISTORY)[0]
    assert routing.message == LATE.format("2.31", "")


def _interval(start: float, end: float, edges: tuple[float | None, ...]) -> dict[str, Any]:
    start_lo, start_hi, end_lo, end_hi = edges
    return {
        "start_t": start,
        "end_t": end,
        "start_lo": start_lo,
        "start_hi": start_hi,
        "end_lo": end_lo,
        "end_hi": end_hi,
        "start_ts": f"2026-12-05T07:00:{start:06.3f}Z",
        "end_ts": f"2026-12-05T07:00:{end:06.3f}Z",
        "error": "connect_refused",
        "detail": "refused",
        "samples": 4,
    }


def _availability(intervals: list[dict[str, Any]]) -> Any:
    seconds = sum(i["end_t"] - i["start_t"] for i in intervals)
    stream = {"stream": STREAM.name, **KEY, "disruption_seconds": seconds, "intervals": intervals}
    summary = {"platform": "aws", "windows": [], "streams": [stream], "worst": []}
    [verdict] = judge(summary, HISTORY)
    return verdict


def test_availability_messages_state_the_bound_of_the_disruption() -> None:
    verdict = _availability(
        [
            _interval(10.0, 11.0, (9.75, 10.02, 10.75, 11.02)),
            _interval(20.0, 20.5, (19.75, 20.02, 20.25, 20.52)),
        ]
    )
    assert verdict.status is Status.FAILED  # 1.5 s against 1 s: the point decides
    message = (
        "kube-api-http1-internal-lb-new-connections: 1.50 s (true value within [0.96, 2.04] s "
        "given the sampling) of disruption a client felt in 2 intervals (cause unattributed: "
        "connect_refused x2); "
        "allowed 1 s (P99 of 150 aws runs)"
    )
    assert verdict.message == message
    assert verdict.details == (
        message,
        "connect_refused from 10.00 s [9.75, 10.02] to 11.00 s [10.75, 11.02] (1.00 s, true "
        "value within [0.73, 1.27] s given the sampling, 4 failed requests, "
        "2026-12-05T07:00:10.000Z to 2026-12-05T07:00:11.000Z, "
        "report.html#kube-api-http1-internal-lb-new-connections-interval-1): refused",
        "connect_refused from 20.00 s [19.75, 20.02] to 20.50 s [20.25, 20.52] (0.50 s, true "
        "value within [0.23, 0.77] s given the sampling, 4 failed requests, "
        "2026-12-05T07:00:20.000Z to 2026-12-05T07:00:20.500Z, "
        "report.html#kube-api-http1-internal-lb-new-connections-interval-2): refused",
    )


def test_an_unbounded_edge_leaves_the_disruption_unbounded_above() -> None:
    one = [_interval(10.0, 10.5, (None, 10.02, 10.0, 10.52))]
    assert disruption_bound(one) == (0.0, None)  # one failed request: at least 0 s
    verdict = _availability(one)
    assert verdict.status is Status.PASSED
    assert verdict.message.startswith(
        "kube-api-http1-internal-lb-new-connections: 0.50 s (true value at least 0.00 s given "
        "the sampling, which sets no upper bound) of disruption a client felt in 1 interval"
    )


def test_no_intervals_or_a_v1_summary_give_no_disruption_bound() -> None:
    assert disruption_bound([]) is None  # a failure shorter than the gap may have gone unseen
    v1 = _interval(10.0, 11.5, (9.75, 10.02, 11.25, 11.52))
    for name in ("start_lo", "start_hi", "end_lo", "end_hi"):
        del v1[name]
    assert disruption_bound([v1]) is None
    assert _availability([v1]).details[1] == (
        "connect_refused from 10.00 s to 11.50 s (1.50 s, 4 failed requests, "
        "2026-12-05T07:00:10.000Z to 2026-12-05T07:00:11.500Z, "
        "report.html#kube-api-http1-internal-lb-new-connections-interval-1): refused"
    )
    assert "(true value" not in _availability([v1]).message


def test_availability_judges_what_a_client_felt_and_states_the_raw_figure() -> None:
    # 1.5 s raw, over the allowed 1 s; the 1 s interval of 429s was retried through by every
    # answer in it, so a client felt 0.5 s: the test passes, the raw figure is in its message.
    told = {**_interval(10.0, 11.0, (9.75, 10.02, 10.75, 11.02)), "error": "retry_after"}
    told["felt"] = False
    refused = {**_interval(20.0, 20.5, (19.75, 20.02, 20.25, 20.52)), "felt": True}
    stream = {
        "stream": STREAM.name,
        **KEY,
        "disruption_seconds": 1.5,
        "felt_disruption_seconds": 0.5,
        "intervals": [told, refused],
    }
    retried = {"answers": 4, "succeeded": 4, "felt": 0, "unresolved": 0, "max_waited": 1.2,
               "felt_disruption_seconds": 0.5}  # fmt: skip
    summary = {"platform": "aws", "windows": [], "streams": [stream], "worst": [],
               "retry_after": {STREAM.name: retried}}  # fmt: skip
    [verdict] = judge(summary, HISTORY)
    assert verdict.status is Status.PASSED
    assert (verdict.observed, verdict.allowed) == (0.5, 1.0)
    assert verdict.message == (
        "kube-api-http1-internal-lb-new-connections: 0.50 s (true value within [0.23, 0.77] s "
        "given the sampling) of disruption a client felt in 1 interval (cause unattributed: "
        "connect_refused x1); "
        "raw 1.50 s, as origin counts it: 4 answers with Retry-After, 4 retried through, "
        "0 felt, 0 unresolved; allowed 1 s (P99 of 150 aws runs)"
    )
