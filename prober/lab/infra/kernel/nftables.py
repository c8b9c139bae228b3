"""The kernel data path's rules, as nftables scripts: pure text, applied with `nft -f -`.

One script is one transaction: `nft` commits all of it or none, so a new backend set replaces
the old one atomically, and a flow's first packet meets either the old rule or the new one.
Only that first packet goes through a `nat` chain; conntrack carries the rest of the flow to
the backend it was given, which is how a pass-through LB and kube-proxy keep established
connections on a backend that has left the set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NAT_PRIORITY = -100  # dstnat; the output hook takes only the number
DROP_PRIORITY = -400  # before conntrack (-200): a lost node's packets never reach it


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A virtual address balanced over backends by a hash of each new flow."""

    table: str
    hook: str  # "prerouting" (an LB in the middle) or "output" (kube-proxy on the client)
    vip: str
    port: int
    target_port: int
    seed: int  # each LB hashes its own way, as two real LBs would

    def script(self, backends: Sequence[str]) -> str:
        """The whole table with this backend set, one transaction. An empty set leaves the
        address unanswered, as a Service without endpoints is: new flows get no DNAT."""
        head = [
            f"table ip {self.table} {{",
            "    chain dispatch {",
            f"        type nat hook {self.hook} priority {NAT_PRIORITY}; policy accept;",
            "    }",
            "}",
            f"flush chain ip {self.table} dispatch",
        ]
        if not backends:
            return "\n".join(head) + "\n"
        targets = ", ".join(
            f"{index} : {address} . {self.target_port}" for index, address in enumerate(backends)
        )
        rule = (
            f"add rule ip {self.table} dispatch ip daddr {self.vip} tcp dport {self.port} "
            f"dnat ip to jhash ip saddr . tcp sport mod {len(backends)} seed {self.seed:#x} "
            f"map {{ {targets} }}"
        )
        return "\n".join([*head, rule]) + "\n"


def invalid_flows(table: str = "lab") -> str:
    """A packet conntrack cannot place (its flow was removed, or it joined midway with
    `nf_conntrack_tcp_loose` 0) is answered with a reset, not forwarded: what an LB that
    terminated a target's connections does to the next packet of one of them."""
    chains = []
    for hook in ("forward", "input"):
        chains += [
            f"    chain {hook} {{",
            f"        type filter hook {hook} priority filter; policy accept;",
            "        meta l4proto tcp ct state invalid reject with tcp reset",
            "        ct state invalid drop",
            "    }",
        ]
    return "\n".join([f"table ip {table} {{", *chains, "}"]) + "\n"


def blackhole(table: str = "node_loss") -> str:
    """Every packet in and out dropped, loopback aside: a node that lost power. No RST, no
    FIN, no ICMP: the other side learns only from its own timeouts."""
    return (
        "\n".join(
            [
                f"table ip {table} {{",
                "    chain ingress {",
                f"        type filter hook prerouting priority {DROP_PRIORITY}; policy drop;",
                '        iifname "lo" accept',
                "    }",
                "    chain egress {",
                f"        type filter hook output priority {DROP_PRIORITY}; policy drop;",
                '        oifname "lo" accept',
                "    }",
                "}",
            ]
        )
        + "\n"
    )


def delete_table(table: str) -> str:
    return f"delete table ip {table}\n"
