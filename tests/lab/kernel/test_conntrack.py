"""conntrack's event log of a NAT's new flows, read as the join between a client's connection
and the peer its apiserver sees."""

from __future__ import annotations

from prober.core.models import LB
from prober.lab.infra.kernel.conntrack import Flow, NatLog, nat_logs, parse_event
from prober.lab.infra.sessions import NAT, Session

# A client port the service network's DNAT had to move: 49244 already carried a flow to
# master-0 through another VIP, so the server sees 45454 (seen in an aws lab run).
MOVED = (
    "[1796530152.185418]\t    [NEW] tcp      6 120 SYN_SENT src=198.18.0.2 dst=198.19.1.1 "
    "sport=49244 dport=443 [UNREPLIED] src=198.18.1.2 dst=198.18.0.2 sport=6443 dport=45454 "
)


def test_a_new_flow_gives_the_clients_address_and_the_one_the_server_sees() -> None:
    assert parse_event(MOVED) == Flow(
        1796530152.185418, "198.18.0.2:49244", "198.19.1.1:443", "198.18.1.2", "198.18.0.2:45454"
    )
    assert parse_event("conntrack v1.4.7 (conntrack-tools): 1 flow events have been shown.") is None


def test_flows_become_the_sessions_of_the_lb_they_were_sent_to() -> None:
    log = NatLog("client", {"198.19.1.1:443": LB.SERVICE_NETWORK}, {"198.18.1.2": "master-0"})
    log._on_line(MOVED)
    log._on_line(MOVED.replace("dst=198.19.1.1", "dst=198.19.9.9"))  # not an LB's address
    sessions: dict[LB, list[Session]] = {}
    transit: list[Session] = []
    log.sessions(sessions, transit)
    assert transit == []
    assert sessions == {
        LB.SERVICE_NETWORK: [
            Session(1796530152.185418, "198.18.0.2:49244", "198.18.0.2:45454", "master-0", NAT)
        ]
    }


def test_the_routers_flows_to_an_apiserver_are_transit() -> None:
    """A flow the client's own NAT sent on, or localhost's: the router may move its port."""
    router = NatLog("router", {}, {"198.18.1.2": "master-0"}, frozenset({"198.18.1.2:6443"}))
    router._on_line(MOVED.replace("dst=198.19.1.1 ", "dst=198.18.1.2 ").replace(
        "dport=443 ", "dport=6443 "))  # fmt: skip
    sessions: dict[LB, list[Session]] = {}
    transit: list[Session] = []
    router.sessions(sessions, transit)
    assert sessions == {}
    assert [(s.client, s.backend) for s in transit] == [("198.18.0.2:49244", "198.18.0.2:45454")]


# An aws lab run beside two CPU burners: the service network's DNAT took 48566 to master-0;
# 11.5 s later localhost's flow from 48566 straight to master-0 would have had the same
# answer, so the client's own NAT moved it to 55193, and the router carried it as such.
SERVICE_FLOW = (
    "[1796563151.604205]\t    [NEW] tcp      6 120 SYN_SENT src=198.18.0.2 dst=198.19.1.1 "
    "sport=48566 dport=443 [UNREPLIED] src=198.18.1.2 dst=198.18.0.2 sport=6443 dport=48566"
)
STRAIGHT_FLOW = (
    "[1796563163.069838]\t    [NEW] tcp      6 120 SYN_SENT src=198.18.0.2 dst=198.18.1.2 "
    "sport=48566 dport=6443 [UNREPLIED] src=198.18.1.2 dst=198.18.0.2 sport=6443 dport=55193"
)


def test_the_clients_own_nat_moving_a_straight_flow_is_transit() -> None:
    client = nat_logs({"198.18.1.2": "master-0"}, frozenset({"198.18.1.2:6443"}))["client"]
    client._on_line(SERVICE_FLOW)
    client._on_line(STRAIGHT_FLOW)
    sessions: dict[LB, list[Session]] = {}
    transit: list[Session] = []
    client.sessions(sessions, transit)
    assert [(s.client, s.backend) for s in sessions[LB.SERVICE_NETWORK]] == [
        ("198.18.0.2:48566", "198.18.0.2:48566")
    ]
    assert [(s.client, s.backend) for s in transit] == [("198.18.0.2:48566", "198.18.0.2:55193")]
