"""The node-loss judge on rows made by hand: what a silent node may and may not give; how
long a lost node stays gone; what the heartbeat says of the watches through it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from prober.core.models import LB, Connection
from prober.core.streamkind import KindStreamId
from prober.core.watch import WATCH, Heartbeat, WatchAttempt, WatchEnd
from prober.lab.infra.daemons import REQUEST_TIMEOUT, http2_dead_after
from prober.lab.infra.lbstate import ServerEvent
from prober.lab.infra.truth import LbTruth
from prober.lab.judges.lossblind import (
    HeartbeatLoss,
    Watched,
    WatchLoss,
    heartbeat_loss,
    per_protocol,
    watch_losses,
)
from prober.lab.judges.nodeloss import LossRow, NodeLoss, problems
from prober.lab.scenarios.playbook import outage

DOWN = [ServerEvent(103.0, "master-0", False, "Layer4 timeout")]
LBS = {
    LB.EXTERNAL: LbTruth(LB.EXTERNAL, DOWN, reset_on_down=True),
    LB.INTERNAL: LbTruth(LB.INTERNAL, DOWN, reset_on_down=False),
    LB.LOCALHOST: LbTruth(LB.LOCALHOST, (), reset_on_down=False, reaches=frozenset({"master-0"})),
}


def row(lb: LB, connection: Connection, errors: dict[str, int], last: float | None) -> LossRow:
    failures = sum(errors.values())
    truth = None if lb is LB.LOCALHOST else 3.0
    first = None if last is None else 0.1
    return LossRow(lb, "http1", connection, failures, errors, first, last, truth, failures, 0.5)


def judged(*rows: LossRow) -> list[str]:
    direct = row(LB.LOCALHOST, Connection.NEW, {"timeout": 3}, 2.0)
    loss = NodeLoss("master-0", 100.0, 110.0, (direct, *rows))
    return problems(loss, [], LBS, tolerance=0.1)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (row(LB.EXTERNAL, Connection.NEW, {"timeout": 2}, 1.0), []),
        (row(LB.EXTERNAL, Connection.REUSED, {"timeout": 1, "connection_reset": 4}, 2.0), []),
        (
            row(LB.INTERNAL, Connection.REUSED, {"connection_reset": 1}, 2.0),
            ["master-0 internal-lb http1 reused: a silent node should give timeout, got "
             "1 connection_reset"],
        ),
        (
            row(LB.EXTERNAL, Connection.NEW, {"connect_refused": 2, "timeout": 1}, 1.0),
            ["master-0 external-lb http1 new: a silent node should give timeout, got "
             "2 connect_refused"],
        ),
        (
            row(LB.INTERNAL, Connection.NEW, {"timeout": 1}, 3.2),
            ["master-0 internal-lb http1 new: a request sent 3.200 s after the loss failed, "
             "after the LB had marked the node down at 3.000 s"],
        ),
        (row(LB.INTERNAL, Connection.NEW, {"timeout": 1}, 3.05), []),  # within the tolerance
    ],
)  # fmt: skip
def test_each_rule(case: LossRow, expected: list[str]) -> None:
    assert judged(case) == expected


def test_an_invented_window_and_a_silent_direct_path_are_problems() -> None:
    quiet = row(LB.LOCALHOST, Connection.REUSED, {}, None)
    loss = NodeLoss("master-0", 100.0, 110.0, (quiet,))
    window = SimpleNamespace(host="apiserver-x")
    assert problems(loss, [window], LBS, tolerance=0.1) == [  # type: ignore[list-item]
        "a graceful shutdown window was invented for a node that vanished: host apiserver-x",
        "master-0: nothing failed on the direct path to the vanished node",
    ]


@pytest.mark.parametrize("scale", [0.05, 0.2, 25 / 95, 1.0])
def test_a_lost_node_stays_gone_past_the_request_timeout_and_the_http2_health_check(
    scale: float,
) -> None:
    assert outage(scale) >= REQUEST_TIMEOUT + 2.0
    assert outage(scale) >= http2_dead_after(scale) + 2.0


def test_the_http2_health_check_is_client_gos_on_the_time_scale() -> None:
    assert http2_dead_after(1.0) == 45.0  # 30 s read-idle, then 15 s for the ping's answer
    assert http2_dead_after(0.1) == 4.5
    assert http2_dead_after(0.01) == 0.75  # the floors: 0.5 s and 0.25 s


def stream(name: str) -> KindStreamId:
    return KindStreamId.parse(f"kube-api-{name}-watch", WATCH)


H2, H1 = stream("http2-localhost"), stream("http1-internal-lb")
FAR = stream("http1-external-lb")  # an LB whose truth says it never reaches master-0


def test_watch_blindness_through_a_loss_is_read_from_the_blind_spells_and_the_ends() -> None:
    records = [
        Heartbeat(9.0, 9.01, 5),
        WatchEnd(10.0, FAR, started=0.0, how="ping"),  # not through the lost node
        Heartbeat(10.5, None, None, "TimeoutError"),  # the writer's own outage, 10.5-15.2
        WatchEnd(12.3, H2, started=0.0, how="ping"),
        WatchAttempt(12.3, H2, "watch", "failed"),
        Heartbeat(15.2, 15.25, 7),
        WatchAttempt(17.0, H2, "watch", "ok", dur=0.5),
        Heartbeat(21.0, 21.02, 9),  # after the node was back: not the loss's
    ]
    blind = {
        H2.name: [(5.0, 6.0), (15.95, 17.5)],  # the first began before the loss
        H1.name: [(15.95, 22.0), (20.6, 21.0)],  # the second began after it, past blind_after
    }
    watched = Watched((FAR, H1, H2), records, blind, blind_after=0.5)
    lbs = {
        LB.INTERNAL: LbTruth(LB.INTERNAL, DOWN, reset_on_down=False),
        LB.LOCALHOST: LbTruth(LB.LOCALHOST, (), reset_on_down=False, reaches=frozenset({"m0"})),
        LB.EXTERNAL: LbTruth(LB.EXTERNAL, DOWN, reset_on_down=True, reaches=frozenset({"m1"})),
    }
    span = (10.0, 20.0)
    assert watch_losses("m0", span, watched, lbs) == (
        WatchLoss(LB.INTERNAL, "http1", 6.05, 1, 5.95, None, None, None),
        WatchLoss(LB.LOCALHOST, "http2", 1.55, 1, 5.95, 2.3, "ping", 7.5),
    )
    assert heartbeat_loss(span, watched) == HeartbeatLoss(writes=2, failed=1, unacknowledged=5.25)
    lines = per_protocol(watch_losses("m0", span, watched, lbs))
    assert lines == [
        "http1: blind up to 6.050 s (internal-lb), first noticed 5.950 s, no watch ended"
        " after the loss",
        "http2: blind up to 1.550 s (localhost), first noticed 5.950 s, first watch ended"
        " 2.300 s after the loss",
    ]
