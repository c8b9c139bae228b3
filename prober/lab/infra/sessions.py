"""What an LB recorded of each client connection it carried (HAProxy's session log, a NAT's
conntrack log): the client's address, and the one its server saw; `judges.watchpairs` joins
the daemon's watches to the servers' by them."""

from __future__ import annotations

from dataclasses import dataclass

# How a pair was made: the client's own address, HAProxy's session log, conntrack's log of
# a NAT's flows, their timing.
ADDRESS, LOG, NAT, TIME = "address", "haproxy-log", "conntrack", "time"


@dataclass(frozen=True, slots=True)
class Session:
    """One client connection as an LB's own record has it (wall time): HAProxy's session
    log, or the conntrack log of a NAT (`lab.infra.kernel.conntrack`)."""

    wall: float
    client: str  # "ip:port" the client came from
    backend: str  # "ip:port" the server sees the client as: HAProxy's own, a NAT's
    server: str  # the backend server's name: the apiserver's hostname
    way: str = LOG
