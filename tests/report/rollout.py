"""The standard synthetic run of these tests: three apiservers restarted one after another
behind an internal and an external LB, eight streams, one of which the LB keeps routing to
a stopped server (so it fails)."""

from __future__ import annotations

from prober.core.models import LB, Connection, Protocol, StreamId
from tests.report.scenario import Scenario, Shutdown, StreamPlan

HOSTS = ("apiserver-aaaa", "apiserver-bbbb", "apiserver-cccc")
NODES = {"apiserver-aaaa": "master-0", "apiserver-bbbb": "master-1", "apiserver-cccc": "master-2"}
SWITCH = {  # seconds after T0 each (lb, connection) still routes to the old server
    (LB.INTERNAL, Connection.NEW): 3.0,
    (LB.INTERNAL, Connection.REUSED): 12.0,
    (LB.EXTERNAL, Connection.NEW): 8.0,
    (LB.EXTERNAL, Connection.REUSED): 23.0,  # past the 20 s delay: 3 s of refused connections
}


def streams() -> list[StreamId]:
    return [
        StreamId("kube-api", protocol, lb, connection)
        for lb in (LB.INTERNAL, LB.EXTERNAL)
        for protocol in Protocol
        for connection in Connection
    ]


def rollout(end: float = 200.0) -> Scenario:
    plans = tuple(
        StreamPlan(s, SWITCH[(s.lb, s.connection)], phase=0.03 * i) for i, s in enumerate(streams())
    )
    shutdowns = (Shutdown(HOSTS[0], 30.0), Shutdown(HOSTS[1], 90.0), Shutdown(HOSTS[2], 150.0))
    return Scenario(HOSTS, shutdowns, plans, end)
