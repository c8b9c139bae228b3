"""Namespaces held by a descriptor: what runs in them, what they see, and that they go."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from prober.lab.infra.kernel import nftables
from prober.lab.infra.kernel.netns import Namespace, NamespaceError
from prober.lab.infra.kernel.nftables import Dispatch
from tests.lab.kernel.leftovers import network_namespaces


@pytest.fixture
def ns() -> Iterator[Namespace]:
    space = Namespace("test")
    yield space
    space.close()


async def test_a_namespace_is_its_own_network_and_goes_when_closed() -> None:
    before = network_namespaces()
    space = Namespace("test")
    assert network_namespaces() - before  # a new one, held by our descriptor
    links = await space.run("ip", "-o", "link")
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
    space.close()
    assert network_namespaces() <= before
    with pytest.raises(NamespaceError, match=r"^netns test: already closed$"):
        space.enter(["true"])


async def test_a_socket_made_inside_cannot_reach_this_namespace(ns: Namespace) -> None:
    with socket.socket() as here:
        here.bind(("127.0.0.1", 0))
        here.listen()
        port = here.getsockname()[1]
        await ns.run("ip", "link", "set", "lo", "up")
        inside = ns.socket()
        with inside, pytest.raises(ConnectionRefusedError):
            inside.connect(("127.0.0.1", port))  # its own loopback, where nothing listens


async def test_a_failing_command_names_the_namespace_and_the_command(ns: Namespace) -> None:
    with pytest.raises(NamespaceError, match=r"^netns test: ip link set nothing up: exit 1: "):
        await ns.run("ip", "link", "set", "nothing", "up")


@pytest.mark.parametrize(
    "script",
    [
        Dispatch("lb", "prerouting", "198.19.0.1", 6443, 6443, 7).script(["198.18.1.2"] * 3),
        Dispatch("svc", "output", "198.19.1.1", 443, 6443, 7).script(["198.18.1.2"]),
        Dispatch("svc", "output", "198.19.1.1", 443, 6443, 7).script([]),
        nftables.invalid_flows(),
        nftables.blackhole(),
    ],
    ids=["lb", "service", "no-endpoints", "invalid", "blackhole"],
)
async def test_every_script_is_one_nft_accepts(ns: Namespace, script: str) -> None:
    await ns.run("nft", "-f", "-", stdin=script)
    await ns.run("nft", "-f", "-", stdin=script)  # and again: a new set replaces the old one
    assert "table ip" in await ns.run("nft", "list", "ruleset")


async def test_a_new_backend_set_replaces_the_old_in_one_transaction(ns: Namespace) -> None:
    dispatch = Dispatch("lb", "prerouting", "198.19.0.1", 6443, 6443, 0x10)
    await ns.run("nft", "-f", "-", stdin=dispatch.script(["198.18.1.2", "198.18.2.2"]))
    await ns.run("nft", "-f", "-", stdin=dispatch.script(["198.18.2.2"]))
    rules = await ns.run("nft", "list", "chain", "ip", "lb", "dispatch")
    assert "198.18.1.2" not in rules
    assert "mod 1 seed 0x10 map { 0 : 198.18.2.2 . 6443 }" in rules


def test_the_descriptor_is_not_inherited(ns: Namespace) -> None:
    fd = int(ns.path.rsplit("/", 1)[1])
    assert not os.get_inheritable(fd)
