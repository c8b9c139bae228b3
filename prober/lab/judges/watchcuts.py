"""What a lab run's cluster knows of its watches' paths, for the watch check: how a client's
connection shows at its server (HAProxy's sessions, the NATs' flows; every other path keeps
the address), and where the lab cut a path itself (`watchcheck.Cut`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from prober.core.header import apiserver_id
from prober.core.models import LB
from prober.lab.infra.haproxy import HaproxyLB
from prober.lab.infra.sessions import Session
from prober.lab.infra.truth import LbTruth
from prober.lab.judges.watchcheck import Cut
from prober.lab.judges.watchpairs import Joins

if TYPE_CHECKING:
    from prober.lab.infra.cluster import LabCluster


def joins(cluster: LabCluster) -> Joins:
    """HAProxy's sessions and the NATs' flows, per LB."""
    sessions: dict[LB, list[Session]] = {}
    transit: list[list[Session]] = []
    for kind, lb in cluster.lbs.items():
        if isinstance(lb, HaproxyLB):
            sessions.setdefault(kind, []).extend(lb.sessions)
    for log in cluster.nat_logs:  # in the order a flow meets them
        transit.append([])
        log.sessions(sessions, transit[-1])
    proxies = frozenset(kind for kind, lb in cluster.lbs.items() if isinstance(lb, HaproxyLB))
    return Joins(sessions, proxies, transit)


def cuts(cluster: LabCluster, lbs: Mapping[LB, LbTruth]) -> list[Cut]:
    """Each node the lab made vanish, each apiserver it killed, and each time an LB that
    resets a server's flows as it marks it down (AWS's NLB, HAProxy's `on-marked-down
    shutdown-sessions`) marked one down. A node's paths come back an outage's length after
    the node does: a connection with data in flight waits for TCP's next retransmission,
    whose wait doubled through the outage."""
    found = [
        Cut(o.lost, apiserver_id(o.hostname), f"{o.hostname}'s node lost",
            until=None if o.back is None else o.back + (o.back - o.lost))
        for o in cluster.outages
    ]  # fmt: skip
    found += [
        Cut(wall, apiserver_id(hostname), f"{hostname}'s apiserver killed")
        for hostname, wall in cluster.crashes
    ]
    for kind, truth in lbs.items():
        if truth.reset_on_down:
            found += [
                Cut(e.wall, apiserver_id(e.server), f"{kind} reset its flows to {e.server}", kind)
                for e in truth.events
                if not e.up
            ]
    return found
