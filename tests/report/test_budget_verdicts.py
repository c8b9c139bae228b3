"""The first-run verdicts: each LB against its own settings (`core.budgets`), no history."""

from __future__ import annotations

from typing import Any

import pytest

from prober.core.budgets import PLATFORMS, Flows
from prober.core.models import LB, Connection, Protocol, StreamId
from prober.report.verdicts.budget_verdicts import budget_of, delay_of, judge_budgets
from prober.report.verdicts.verdicts import Status

AWS, GCP = PLATFORMS["aws"], PLATFORMS["gcp"]


def _summary(
    stream: StreamId,
    reactions: list[tuple[float, float | None, float | None]],
    platform: str = "aws",
    delay: float = 129.0,
) -> dict[str, Any]:
    key = {"lb": str(stream.lb), "protocol": str(stream.protocol),
           "connection": str(stream.connection)}  # fmt: skip
    windows = []
    for n, (reaction, lo, hi) in enumerate(reactions):
        ws = {"stream": stream.name, **key, "late": 3, "reaction": reaction, "failures": 0,
              "reaction_lo": lo, "reaction_hi": hi}  # fmt: skip
        windows.append({"host": f"h{n}", "node": f"m{n}", "delay": delay, "t0": 10.0 + 100 * n,
                        "t0_lo": 9.9, "t0_hi": 10.1, "streams": [ws]})  # fmt: skip
    return {"platform": platform, "windows": windows, "streams": [],
            "worst": [{**key, "reaction": 0.0, "disruption_seconds": 0.0}]}  # fmt: skip


def stream(lb: LB = LB.EXTERNAL, connection: Connection = Connection.NEW) -> StreamId:
    return StreamId("kube-api", Protocol.HTTP1, lb, connection)


def test_the_table_gives_the_budgets_the_platforms_document() -> None:
    """Interval x unhealthy threshold + timeout: 30 s on AWS, 8 s on GCP, 15 s on Azure."""
    worst = {name: p.lb(LB.EXTERNAL).stop_routing for name, p in PLATFORMS.items()}
    assert (worst["aws"], worst["gcp"], worst["azure"]) == (30, 8, 15)
    assert PLATFORMS["aws"].lb(LB.INTERNAL).add_back == 30  # 10 s x 2 healthy + 10 s
    assert PLATFORMS["gcp"].lb(LB.INTERNAL).add_back == 8
    assert PLATFORMS["metal"].lb(LB.INTERNAL).stop_routing == 5 + 2 + 10  # fastinter 2 s
    flows = {name: p.lb(LB.INTERNAL).flows for name, p in PLATFORMS.items()}
    assert flows == {"aws": Flows.RESET, "gcp": Flows.KEPT, "azure": Flows.KEPT,
                     "metal": Flows.RESET, "none": Flows.KEPT}  # fmt: skip
    assert AWS.lb(LB.SERVICE_NETWORK).flows is Flows.CONNTRACK


@pytest.mark.parametrize(
    ("platform", "lb", "connection", "budget"),
    [
        (AWS, LB.EXTERNAL, Connection.NEW, 30.0),
        (AWS, LB.EXTERNAL, Connection.REUSED, 30.0),  # it resets kept connections
        (GCP, LB.INTERNAL, Connection.NEW, 8.0),
        (GCP, LB.INTERNAL, Connection.REUSED, 160.0),  # kept until the server closes them
        (AWS, LB.SERVICE_NETWORK, Connection.NEW, 2.0),  # the proxies' sync delay
        (AWS, LB.SERVICE_NETWORK, Connection.REUSED, 194.0),  # conntrack keeps them
    ],
)
def test_a_kept_connections_budget_follows_what_the_lb_does_to_flows(
    platform, lb, connection, budget
) -> None:
    assert budget_of(platform, lb, connection)[0] == budget


NAME = (
    "[sig-api-machinery] load-balancer/external-lb protocol/http1 connection/new should stop "
    "routing to a shutting-down apiserver within its health-check budget"
)
SAID = "budget 30.00 s on aws (interval 10.00 s, 2 unhealthy checks, timeout 10.00 s)"
TEXT = (
    "kube-api-http1-external-lb-new-connections: apiserver h0 still got requests {} s {} after "
    "its /readyz went false (T0 10.00 s, delay 129.00 s; report.html#window-1)"
)


@pytest.mark.parametrize(
    ("reactions", "status", "message"),
    [
        ([(28.4, 28.1, 28.7)], Status.PASSED, TEXT.format("28.40", "[28.10, 28.70]")
         + f"; within the {SAID}"),
        # the bound spans the budget: only a lower bound over it blames the LB
        ([(29.9, 29.5, 30.4)], Status.PASSED, TEXT.format("29.90", "[29.50, 30.40]")
         + f"; within the {SAID}"),
        ([(31.0, 30.2, 31.3)], Status.FAILED, TEXT.format("31.00", "[30.20, 31.30]")
         + f": its lower bound is over the {SAID}"),
        ([(45.0, 44.0, None)], Status.FAILED, TEXT.format("45.00", "[44.00, ?]")
         + f": its lower bound is over the {SAID}"),
        # no upper bound, lower bound within: not a pass
        ([(12.0, 11.8, None)], Status.SKIPPED, TEXT.format("12.00", "[11.80, ?]")
         + f": the sampling sets no upper bound; {SAID}"),
        ([], Status.PASSED, "no request reached a shutting-down apiserver after its /readyz "
         f"went false; {SAID}"),
    ],
)  # fmt: skip
def test_the_budget_test_fails_only_on_a_lower_bound_over_the_budget(
    reactions, status, message
) -> None:
    summary = _summary(stream(), reactions)
    if not reactions:  # a window in which this stream had no late request
        summary = _summary(stream(), [(0.0, None, None)])
        summary["windows"][0]["streams"][0]["reaction"] = None
    budget, _ = judge_budgets(summary, AWS)
    assert (budget.name, budget.status, budget.message) == (NAME, status, message)


COVERS = "80 % of the 129.00 s delay is 103.20 s"


@pytest.mark.parametrize(
    ("reaction", "status", "tail"),
    [
        ((28.4, 28.1, 28.7), Status.PASSED, f"; within the late mark: {COVERS}"),
        ((103.0, 102.7, 103.3), Status.FAILED, f": it may pass the late mark; {COVERS}"),
        ((110.0, 109.0, None), Status.FAILED, f": it may pass the late mark; {COVERS}"),
        ((12.0, 11.8, None), Status.SKIPPED, f": the sampling sets no upper bound; {COVERS}"),
    ],
)
def test_the_delay_covers_an_lb_whose_upper_bound_stays_before_the_late_mark(
    reaction, status, tail
) -> None:
    _, coverage = judge_budgets(_summary(stream(), [reaction]), AWS)
    assert coverage.name.endswith("connection/new should be covered by the shutdown delay")
    assert coverage.status is status
    assert coverage.message.endswith(tail)


def test_the_delay_is_the_exact_one_where_known_and_the_headers_else() -> None:
    window = _summary(stream(), [(1.0, 0.9, 1.1)], delay=6.0)["windows"][0]
    assert delay_of(window, AWS.scaled(0.05)) == (pytest.approx(6.45), 0.0)  # the lab's
    assert delay_of(window, AWS) == (6.0, 0.5)  # the table's 129 s is not this cluster's
    assert delay_of(window, None) == (6.0, 0.5)
    _, coverage = judge_budgets(_summary(stream(), [(1.0, 0.9, 1.1)], delay=6.0), AWS)
    assert "80 % of the 6.00 s delay (± 0.50 s) is 4.80 s" in coverage.message


def test_kept_connections_get_one_test_and_new_ones_two() -> None:
    kept = judge_budgets(_summary(stream(LB.INTERNAL, Connection.REUSED), [(90, 89, 91)],
                                  "gcp", 95), GCP)  # fmt: skip
    assert [v.status for v in kept] == [Status.PASSED]
    assert "it keeps established connections" in kept[0].message


def test_what_cannot_be_judged_is_skipped_with_the_reason() -> None:
    verdicts = judge_budgets(_summary(stream(), [(1.0, 0.9, 1.1)]), None)
    reason = "no LB settings known for platform 'aws'"
    assert [(v.status, v.message) for v in verdicts] == [(Status.SKIPPED, reason)] * 2


def test_localhost_is_not_named_as_an_lb_test() -> None:
    assert judge_budgets(_summary(stream(LB.LOCALHOST), [(1.0, 0.9, 1.1)]), AWS) == []


def test_a_run_without_a_shutdown_judges_nothing() -> None:
    summary = _summary(stream(), [])
    verdicts = judge_budgets(summary, AWS)
    assert {v.message for v in verdicts} == {"no kube-apiserver shut down during the run"}


def test_a_failure_says_where_to_look_and_when_and_leaves_the_failures_to_their_tests() -> None:
    # A reader of junit.xml gets the UTC time of T0, the delay and the report's anchor of the
    # window; the requests that failed in it are their causes' tests' (`report.results.causes`), and
    # the budget test, which judges the reaction, does not name them again.
    summary = _summary(stream(), [(31.0, 30.2, 31.3)])
    summary["started"] = "2026-12-05T07:00:00.000000Z"
    summary["windows"][0]["end_t"] = 60.0
    refused = {"start_t": 41.0, "end_t": 42.0, "error": "connect_refused", "samples": 7}
    reset = {"start_t": 43.0, "end_t": 43.5, "error": "connection_reset", "samples": 2}
    before = {"start_t": 5.0, "end_t": 6.0, "error": "timeout", "samples": 1}  # not in it
    summary["streams"] = [{"stream": stream().name, "lb": "external-lb", "protocol": "http1",
                           "connection": "new", "samples": 100,
                           "intervals": [refused, before, reset]}]  # fmt: skip
    budget, _ = judge_budgets(summary, AWS)
    assert budget.status is Status.FAILED
    assert budget.message == (
        "kube-api-http1-external-lb-new-connections: apiserver h0 still got requests 31.00 s "
        "[30.20, 31.30] after its /readyz went false (T0 10.00 s = 2026-12-05T07:00:10.000000Z, "
        f"delay 129.00 s; report.html#window-1): its lower bound is over the {SAID}"
    )
