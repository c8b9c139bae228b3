"""The lab's network: a client, a router holding the cloud LBs, and one namespace per master.

```
client 198.18.0.2 ──── 198.18.0.1 router 198.18.1.1 ──── 198.18.1.2 master-0
  (the daemon;            (VIPs 198.19.0.x on lo;  198.18.2.1 ──── 198.18.2.2 master-1
   kube-proxy's DNAT       the LBs' DNAT, their     ...
   of the ClusterIP)       health checkers)
```

Every address is from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarking; every
link joins two of the lab's own namespaces, and no namespace has a route anywhere else. The
router forwards and NATs; the masters' replies go back through it, so the LBs keep the
client's address (client IP preservation) and see the whole flow, as a pass-through LB does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prober.core.models import LB
from prober.lab.infra.kernel import nftables
from prober.lab.infra.kernel.netns import Namespace

RANGE = "198.18.0.0/15"
CLIENT, ROUTER_CLIENT_SIDE = "198.18.0.2", "198.18.0.1"
VIPS = {LB.EXTERNAL: "198.19.0.1", LB.INTERNAL: "198.19.0.2"}
CLUSTER_IP = "198.19.1.1"  # the `kubernetes` Service in the default namespace
ETCD = "198.19.2.1"  # the lab's etcd, on the router's loopback
SERVICE_PORT = 443
API_PORT, HEALTH_PORT = 6443, 6080

# Per namespace that tracks connections: only a packet of a flow conntrack knows is let
# through (loose 0: no flow is picked up midway, so a flow the LB removed stays removed),
# and conntrack does not judge TCP windows (be_liberal), so "invalid" means exactly that.
TRACKING = {
    "net.netfilter.nf_conntrack_tcp_loose": "0",
    "net.netfilter.nf_conntrack_tcp_be_liberal": "1",
}


def master_address(index: int) -> str:
    return f"198.18.{index + 1}.2"


def lab_addresses(masters: int) -> list[str]:
    """Every address a client may reach an apiserver at: its certificate names them all."""
    return [*VIPS.values(), CLUSTER_IP, *(master_address(i) for i in range(masters))]


def _router_side(index: int) -> str:
    return f"198.18.{index + 1}.1"


@dataclass(slots=True)
class LabNetwork:
    """The namespaces and their links; `close` drops them all."""

    masters: int
    client: Namespace | None = None
    router: Namespace | None = None
    nodes: list[Namespace] = field(default_factory=list)

    async def start(self) -> None:
        self.client = Namespace("client")
        self.router = Namespace("router")
        self.nodes = [Namespace(f"master-{i}") for i in range(self.masters)]
        router = self.router
        await self._bring_up(router)
        await router.sysctl("net.ipv4.ip_forward", "1")
        for vip in (*VIPS.values(), ETCD):
            await router.run("ip", "addr", "add", f"{vip}/32", "dev", "lo")
        await self._link(self.client, "client", ROUTER_CLIENT_SIDE, CLIENT)
        await self.client.run("ip", "route", "add", RANGE, "via", ROUTER_CLIENT_SIDE)
        for index, node in enumerate(self.nodes):
            await self._link(node, f"m{index}", _router_side(index), master_address(index))
            await node.run("ip", "route", "add", "default", "via", _router_side(index))
        for tracked in (router, self.client):
            for key, value in TRACKING.items():
                await tracked.sysctl(key, value)
        await router.run("nft", "-f", "-", stdin=nftables.invalid_flows())

    async def _bring_up(self, ns: Namespace) -> None:
        await ns.run("ip", "link", "set", "lo", "up")

    async def _link(self, ns: Namespace, name: str, router_side: str, address: str) -> None:
        """A veth pair made inside the router with its far end moved straight into `ns`:
        no link ever exists in the namespace the lab runs in."""
        assert self.router is not None
        await self._bring_up(ns)
        await self.router.run(
            "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", ns.path
        )  # fmt: skip
        await self.router.run("ip", "addr", "add", f"{router_side}/24", "dev", name)
        await self.router.run("ip", "link", "set", name, "up")
        await ns.run("ip", "addr", "add", f"{address}/24", "dev", "eth0")
        await ns.run("ip", "link", "set", "eth0", "up")

    def node(self, index: int) -> Namespace:
        return self.nodes[index]

    async def host_prober(self, index: int, hairpins: Sequence[LB]) -> Namespace:
        """Ready master `index` to run a prober: its connections tracked as the client's
        are, and each hairpin LB's VIP answered by the master itself, as GCP's guest agent
        and OpenShift's gcp-routes make a master take the VIP as its own: a request from the
        master to it never leaves the node, whatever the LB's health (`core.budgets`)."""
        node = self.nodes[index]
        for key, value in TRACKING.items():
            await node.sysctl(key, value)
        for lb in hairpins:
            local = nftables.Dispatch(
                table=f"hairpin_{lb.name.lower()}",
                hook="output",
                vip=VIPS[lb],
                port=API_PORT,
                target_port=API_PORT,
                seed=0,
            )
            await node.run("nft", "-f", "-", stdin=local.script([master_address(index)]))
        return node

    def close(self) -> None:
        for ns in (*self.nodes, self.router, self.client):
            if ns is not None:
                ns.close()
        self.nodes, self.router, self.client = [], None, None
