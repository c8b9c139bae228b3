"""The watch streams' JUnit tests, from summary sections: each test's outcome per case, the
exact one-line messages of a failure, localhost skipped, and the phase of each end."""

from __future__ import annotations

from typing import Any

import pytest

from prober.core.budgets import PLATFORMS
from prober.core.models import ClosedBy, WatchLimits, Window
from prober.core.phase import ShutdownPhase
from prober.core.watch import WatchEnd, watch_limits
from prober.report.results.watches import end_phase
from prober.report.verdicts.verdicts import Status
from prober.report.verdicts.watch_verdicts import (
    Limit,
    RunContext,
    WatchAllowed,
    judge_watches,
    limits,
)
from tests.core.test_watch import STREAM

ALLOWED = WatchAllowed()  # client-go's: 5 s and 15 s


def entry(lb: str = "internal-lb", **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "stream": f"kube-api-http2-{lb}-watch", "lb": lb, "protocol": "http2",
        "established": 4, "doomed": 0, "doomed_at": [], "ends": {"closed": 3},
        "reestablish": {"count": 3, "p50": 0.2, "p99": 0.9, "max": 1.0},
        "blind": [], "blind_seconds": 0.0, "unrestored": None,
    }  # fmt: skip
    return {**base, **more}


def section(*entries: dict[str, Any], writes: int = 100) -> dict[str, Any]:
    return {"blind_deadline": 3.0, "heartbeat": {"writes": writes, "failed": 0},
            "streams": list(entries)}  # fmt: skip


def statuses(sec: dict[str, Any]) -> list[str]:
    return [v.status.value for v in judge_watches(sec, ALLOWED)]


@pytest.mark.parametrize(
    ("stream", "writes", "expected"),
    [
        pytest.param(entry(), 100, ["passed", "passed", "passed"], id="healthy"),
        pytest.param(entry(ends={}, reestablish={"count": 0, "p50": None, "p99": None,
                     "max": None}), 100, ["skipped", "passed", "passed"], id="nothing-ended"),
        pytest.param(entry(ends={"stopped": 1}), 100, ["skipped", "passed", "passed"],
                     id="only-the-daemon's-stop"),
        pytest.param(entry(reestablish={"count": 3, "p50": 0.2, "p99": 5.9, "max": 6.0}), 100,
                     ["failed", "passed", "passed"], id="slow-re-establish"),
        pytest.param(entry(unrestored=7.5), 100, ["failed", "passed", "passed"],
                     id="never-re-established"),
        pytest.param(entry(unrestored=0.5), 100, ["passed", "passed", "passed"],
                     id="re-establishing-as-the-run-ended"),
        pytest.param(entry(doomed=1, doomed_at=[{"t": 3.0, "server": "a", "elapsed": 1.5}]), 100,
                     ["passed", "failed", "passed"], id="doomed"),
        pytest.param(entry(blind=[[1.0, 2.0], [10.0, 40.5]], blind_seconds=31.5), 100,
                     ["passed", "passed", "failed"], id="blind-past-the-ping-timeout"),
        pytest.param(entry(blind=[[10.0, 25.0]], blind_seconds=15.0), 100,
                     ["passed", "passed", "passed"], id="blind-at-the-allowed-value"),
        pytest.param(entry(), 0, ["passed", "passed", "skipped"], id="no-heartbeat"),
        pytest.param(entry("localhost", doomed=2), 100, ["skipped"] * 3, id="localhost"),
    ],
)  # fmt: skip
def test_each_watch_test_per_case(stream: dict[str, Any], writes: int, expected: list[str]) -> None:
    assert statuses(section(stream, writes=writes)) == expected


def test_failures_say_what_happened_in_one_line() -> None:
    failing = entry(
        reestablish={"count": 3, "p50": 0.2, "p99": 5.9, "max": 6.0},
        doomed=1,
        doomed_at=[{"t": 3.0, "server": "apiserver-a", "elapsed": 1.5}],
        blind=[[10.0, 40.5]],
    )
    verdicts = judge_watches(section(failing), ALLOWED)
    assert [v.name for v in verdicts] == [
        "[sig-api-machinery] load-balancer/internal-lb protocol/http2 watch should "
        "re-establish within its limit",
        "[sig-api-machinery] load-balancer/internal-lb protocol/http2 watch should not land "
        "on a shutting-down apiserver",
        "[sig-api-machinery] load-balancer/internal-lb protocol/http2 watch should not be "
        "blind longer than its limit",
    ]
    assert [v.message for v in verdicts] == [
        "kube-api-http2-internal-lb-watch: a watch took 6.00 s to re-establish after it ended "
        "(p50 0.20 s, p99 5.90 s over 3); allowed 5.00 s (client-go's)",
        "kube-api-http2-internal-lb-watch: a watch established at 3.00 s on apiserver "
        "apiserver-a, which was already shutting down (1.50 s after its /readyz went false)",
        "kube-api-http2-internal-lb-watch: blind for 30.50 s from 10.00 s to 40.50 s (the "
        "heartbeat unseen past the blind threshold); allowed 15.00 s (client-go's)",
    ]
    assert all(v.status is Status.FAILED for v in verdicts)
    assert [v.observed for v in verdicts] == [6.0, 1.0, 30.5]


def test_no_watches_section_gives_no_watch_tests() -> None:
    assert judge_watches(None, ALLOWED) == []
    assert judge_watches(section(), ALLOWED) == []


def window(host: str, t0: float, delay: float, end_t: float) -> Window:
    return Window(host, None, delay, t0, t0, t0 - 0.1, t0 + 0.1, ClosedBy.RECOVERED, end_t, ())


@pytest.mark.parametrize(
    ("t", "started", "server", "phase"),
    [
        (5.0, 1.0, "a", ShutdownPhase.BEFORE),  # before a's T0
        (12.0, 1.0, "a", ShutdownPhase.DELAY_EARLY),
        (19.0, 1.0, "a", ShutdownPhase.DELAY_LATE),
        (20.5, 1.0, "a", ShutdownPhase.AFTER),  # cut as it stopped
        (20.5, 1.0, "b", ShutdownPhase.BEFORE),  # another server, ready
        (90.0, 40.0, "a", ShutdownPhase.BEFORE),  # on a back after its window
        (20.5, 1.0, None, ShutdownPhase.BEFORE),  # no header: no server to place
    ],
)
def test_an_end_is_placed_in_its_servers_shutdown(
    t: float, started: float, server: str | None, phase: ShutdownPhase
) -> None:
    end = WatchEnd(t, STREAM, started, "closed", server)
    assert end_phase(end, [window("a", 10.0, 10.0, 25.0)]) is phase


# A shutdown of apiserver-a: T0 at 10 s, a 30 s delay, its window closed at 50 s.
WINDOW = {"host": "apiserver-a", "t0": 10.0, "t0_lo": 9.9, "t0_hi": 10.1, "delay": 30.0,
          "end_t": 50.0}  # fmt: skip


@pytest.mark.parametrize(
    ("platform", "status", "starts"),
    [
        # aws's NLB resets the flows of a server it takes out, and the client of an HTTP/1.1
        # watch, which sends nothing, hears nothing of it: predicted, so by design
        ("aws", Status.BY_DESIGN, "kube-api-http1-external-lb-watch: by design: blind for"),
        # gcp's LBs keep flows: a watch blind as its server still served is no design of theirs
        ("gcp", Status.FAILED, "kube-api-http1-external-lb-watch: blind for"),
    ],
)
def test_a_watch_still_blind_at_the_runs_end_is_judged_and_says_why(
    platform: str, status: Status, starts: str
) -> None:
    blind = entry(
        "external-lb", stream="kube-api-http1-external-lb-watch", protocol="http1",
        ends={"stopped": 1}, blind=[[12.8, 60.0]], blind_at_end=True, unrestored=None,
        reestablish={"count": 0, "p50": None, "p99": None, "max": None},
    )  # fmt: skip
    run = RunContext([WINDOW], PLATFORMS[platform])  # type: ignore[list-item]
    reestablish, _, verdict = judge_watches(section(blind), ALLOWED, run)
    assert reestablish.status is Status.SKIPPED
    assert reestablish.message == (
        "no watch end reached the client during the run; a watch was blind from 12.80 s to the "
        "run's end, an end the client never learnt of, which the blindness test judges"
    )
    assert verdict.status is status
    assert verdict.message.startswith(starts)
    assert (
        "blind for 47.20 s from 12.80 s to the run's end at 60.00 s, still blind then (the "
        "heartbeat unseen past the blind threshold): it began while apiserver apiserver-a "
        "still served, as the LB took it out; the LB cut the watch's flow (cause lb-reset) "
        "without a word the client heard: an HTTP/1.1 watch sends nothing, so only TCP "
        "keepalive finds a dead flow; allowed 15.00 s (client-go's)"
    ) in verdict.message


def test_the_limits_are_the_runs_own_unless_given() -> None:
    # a run whose timers were scaled by 0.1 and 0.15 (the lab's): its limits scale with them
    assert watch_limits(0.04, 0.75) == WatchLimits(1.0, 1.0)  # at 0.05: the floor
    assert watch_limits(0.08, 2.25) == WatchLimits(1.0, 2.25)
    assert watch_limits(0.8, 15.0) == WatchLimits(5.0, 15.0)  # client-go's own
    sec = section(entry(reestablish={"count": 3, "p50": 0.2, "p99": 0.9, "max": 1.0}))
    sec["limits"] = {"reestablish": 0.5, "blind": 2.25}
    floor = "at least 1 s for the requests of a re-watch, which do not scale"
    assert limits(WatchAllowed(), sec) == (
        Limit(0.5, f"client-go's 5 s, scaled as this run's reflector backoff, {floor}"),
        Limit(2.25, f"client-go's 15 s, scaled as this run's HTTP/2 ping timeout, {floor}"),
    )
    [reestablish, *_] = judge_watches(sec, WatchAllowed())
    assert reestablish.status is Status.FAILED  # 1 s against 0.5 s
    assert limits(WatchAllowed(blind=20.0), sec)[1] == Limit(20.0, "set by --watch-blind-within")
    assert limits(WatchAllowed(), section(entry())) == (
        Limit(5.0, "client-go's"),
        Limit(15.0, "client-go's"),
    )


@pytest.mark.parametrize(
    ("platform", "lb", "landed", "opened", "status"),
    [
        # aws's NLB takes up to 30 s (two 10 s checks, the last timing out) to stop routing
        # new connections: a re-watch that lands 2 s after T0 is what its settings predict
        ("aws", "external-lb", 12.0, 12.0, Status.BY_DESIGN),
        # past its worst case: the LB routed too long
        ("aws", "external-lb", 41.0, 41.0, Status.FAILED),
        # ... and it resets kept flows: a kept connection is no excuse
        ("aws", "external-lb", 41.0, 1.0, Status.FAILED),
        # gcp's LBs keep flows: a re-watch on a connection opened before T0 stays on its
        # server until the server closes it, whatever the LB's checks say
        ("gcp", "internal-lb", 39.0, 1.0, Status.BY_DESIGN),
        ("aws", "service-network", 39.0, 1.0, Status.BY_DESIGN),  # conntrack keeps it too
        ("gcp", "internal-lb", 39.0, 38.0, Status.FAILED),  # a new connection, routed late
        ("gcp", "internal-lb", 39.0, None, Status.FAILED),  # not known
        (None, "external-lb", 12.0, 12.0, Status.FAILED),  # no profile: nothing predicts it
        # sent 0.3 s before T0's lower bound, landed after it: judged where it landed
        ("aws", "external-lb", 10.2, 9.6, Status.BY_DESIGN),
    ],
)
def test_a_watch_landing_as_its_lb_settings_predict_is_by_design(
    platform: str | None, lb: str, landed: float, opened: float | None, status: Status
) -> None:
    doomed = entry(
        lb, doomed=1, stream=f"kube-api-http2-{lb}-watch",
        doomed_at=[{"t": min(landed, opened or landed), "landed": landed,
                    "server": "apiserver-a", "elapsed": landed - 10.0, "opened": opened}],
    )  # fmt: skip
    profile = None if platform is None else PLATFORMS[platform]
    run = RunContext([WINDOW], profile)  # type: ignore[list-item]
    _, verdict, _ = judge_watches(section(doomed), ALLOWED, run)
    assert verdict.status is status
    if (platform, landed) == ("aws", 12.0):
        assert verdict.message == (
            "kube-api-http2-external-lb-watch: by design: a watch established at 12.00 s on "
            "apiserver apiserver-a, which was already shutting down (2.00 s after its /readyz "
            "went false); on aws this LB may route new connections to a server up to 30.00 s "
            "after its /readyz went false (its worst case to stop routing), and a watch sent "
            "then lands there: predicted within its detection"
        )
    if (platform, lb, status) == ("gcp", "internal-lb", Status.BY_DESIGN):
        assert verdict.message.endswith(
            "on gcp this LB keeps established flows on their server, and the watch went on a "
            "connection opened at 1.00 s, before that server's T0: predicted until the server "
            "closes it"
        )
