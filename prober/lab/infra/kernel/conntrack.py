"""Each new flow through a NAT of the kernel path, as conntrack records it: the join between
a client's connection and the address its apiserver sees (`lab.judges.watchpairs`).

A pass-through LB (the router's DNAT) and the service network (the client's own DNAT) keep the
client's address, but not always its port: two of the client's connections from one source
port to two VIPs (Linux shares a source port between destinations) DNATed to one apiserver
would be one flow there, and conntrack moves the second to another source port. Its event log
of each new flow, `conntrack -E -e NEW`, holds both tuples: the client's, and the one the
server answers (`reply`), whose destination is the peer the apiserver records. One log runs
in each namespace that NATs (the router for the LBs, the client for the service network);
a flow the log lost under load falls back to the client's own address, then to time.

Each log also keeps the flows sent to an apiserver itself (`transit`), since any NAT moves
the port of a flow whose answer would clash with one it made: the router's, of the flows the
client's NAT sent on or localhost sent straight; the client's own, of localhost's flow from a
port whose earlier service-network flow it DNATed to that same apiserver (seen in an aws lab
run beside two CPU burners: 48566 went out as 55193).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from prober.core.models import LB
from prober.lab.infra.kernel.netns import Namespace
from prober.lab.infra.kernel.topology import API_PORT, CLUSTER_IP, SERVICE_PORT, VIPS
from prober.lab.infra.processes import ManagedProcess, ProcessGroup
from prober.lab.infra.sessions import NAT, Session

BUFFER = 8 * 1024 * 1024  # bytes of netlink buffer: a burst of new flows must not overflow it
_EVENT = re.compile(
    r"^\[(?P<wall>\d+\.\d+)\]\s+\[NEW\] tcp\s+\d+ \d+ \S+ "
    r"src=(?P<src>\S+) dst=(?P<dst>\S+) sport=(?P<sport>\d+) dport=(?P<dport>\d+) "
    r"(?:\[UNREPLIED\] )?src=(?P<rsrc>\S+) dst=(?P<rdst>\S+) sport=\d+ dport=(?P<rdport>\d+)"
)


@dataclass(frozen=True, slots=True)
class Flow:
    wall: float
    client: str  # "ip:port" the client sent from
    to: str  # "ip:port" it sent to: a VIP, the ClusterIP, an apiserver
    server_ip: str  # who answers it
    peer: str  # "ip:port" the server sees the client as


def parse_event(line: str) -> Flow | None:
    match = _EVENT.match(line)
    if match is None:
        return None
    return Flow(
        float(match["wall"]),
        f"{match['src']}:{match['sport']}",
        f"{match['dst']}:{match['dport']}",
        match["rsrc"],
        f"{match['rdst']}:{match['rdport']}",
    )


@dataclass(slots=True)
class NatLog:
    """The flows one namespace's NAT made, kept as they come; `sessions` gives them per LB
    (by the address the client sent to), as `watchpairs.Joins` takes them."""

    name: str
    addresses: Mapping[str, LB]  # "ip:port" a client sends to -> the LB it is
    hostnames: Mapping[str, str]  # an apiserver's address -> its hostname
    # "ip:port" of each apiserver: a flow sent to one may have its port moved too (above).
    transit: frozenset[str] = frozenset()
    flows: list[Flow] = field(default_factory=list)
    process: ManagedProcess | None = None

    async def start(self, group: ProcessGroup, namespace: Namespace) -> None:
        argv = ["conntrack", "-E", "-e", "NEW", "-p", "tcp", "-o", "timestamp",
                "--buffer-size", str(BUFFER)]  # fmt: skip
        # conntrack says nothing until the first flow: there is no line to wait for, and a
        # flow before it starts listening falls back to the address (see the docstring).
        self.process = await group.start(
            f"conntrack-{self.name}", namespace.enter(argv), on_line=self._on_line
        )

    def _on_line(self, line: str) -> None:
        flow = parse_event(line)
        if flow is not None and (flow.to in self.addresses or flow.to in self.transit):
            self.flows.append(flow)

    def sessions(self, into: dict[LB, list[Session]], transit: list[Session]) -> None:
        """Add each flow as its LB's session (the client's address, the server's view), or
        as a transit one where it went to an apiserver itself."""
        for flow in self.flows:
            hostname = self.hostnames.get(flow.server_ip)
            if hostname is None:
                continue
            session = Session(flow.wall, flow.client, flow.peer, hostname, NAT)
            lb = self.addresses.get(flow.to)
            if lb is None:
                transit.append(session)
            else:
                into.setdefault(lb, []).append(session)


def nat_logs(hostnames: Mapping[str, str], masters: frozenset[str]) -> dict[str, NatLog]:
    """The kernel path's two logs, by the namespace each runs in, in the order a client's
    flow meets them: the client's (the service network's ClusterIP) and the router's (the
    LBs' VIPs), each with every apiserver's
    address (`masters`, "ip:port") as transit; `hostnames`: an apiserver's IP -> hostname."""
    vips = {f"{VIPS[lb]}:{API_PORT}": lb for lb in VIPS}
    service = {f"{CLUSTER_IP}:{SERVICE_PORT}": LB.SERVICE_NETWORK}
    return {
        "client": NatLog("client", service, hostnames, masters),
        "router": NatLog("router", vips, hostnames, masters),
    }
