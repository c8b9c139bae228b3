"""What of the lab could outlive it: network namespaces anywhere on the machine, and the
host's own addresses and nftables ruleset (which the lab must never touch)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


def network_namespaces() -> set[str]:
    """Every network namespace some process is in or holds a descriptor of (`net:[inode]`).
    An anonymous namespace lives exactly as long as one of those exists."""
    found: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        links = [proc / "ns" / "net", *proc.glob("task/*/ns/net"), *proc.glob("fd/*")]
        for link in links:
            try:
                target = os.readlink(link)
            except OSError:
                continue  # gone meanwhile, or not ours to read
            if target.startswith("net:["):
                found.add(target)
    return found


@dataclass(frozen=True)
class HostNetwork:
    """This namespace's links with their addresses, and its nftables ruleset."""

    addresses: frozenset[tuple[str, str]]
    ruleset: str

    @classmethod
    def now(cls) -> HostNetwork:
        links = json.loads(_run("ip", "-j", "addr"))
        addresses = frozenset(
            (link["ifname"], info.get("local", ""))
            for link in links
            for info in link.get("addr_info", [{}]) or [{}]
        )
        return cls(addresses, _run("nft", "list", "ruleset"))


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
