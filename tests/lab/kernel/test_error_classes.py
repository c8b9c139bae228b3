"""What a client meets when a backend dies, on each platform's data path, from where the
daemon runs: the real probe through the real LBs, before their health checks react.

A pass-through LB (the kernel path) hands the client's SYN to the dead node's kernel, which
refuses it: `connect_refused`. A node that vanished answers nothing: `timeout`. HAProxy
(bare metal) accepts every connection itself and only then fails to reach the backend, so
the client never sees a refused connect.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from prober.core.models import LB, Connection, Protocol, StreamId
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.kernel import nftables
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.infra.processes import ProcessGroup
from prober.probe import Prober, ProbeTarget, TokenFile, client_context

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    # The probe's event loop runs in a thread inside the client's namespace and ends with its
    # requests: TLS transports still waiting on the server's close_notify are collected
    # unclosed then. The daemon's loop lives on and closes them; this one cannot.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

PATH = "/api/v1/namespaces/default"
# Fresh connections per check: each goes to the dead server with chance 1/3 through a flow
# hash, so that none does is (2/3)^30, about 5e-6. They all go out within a second or two,
# long before any platform's health check can mark the server down (12 s at the fastest
# here).
REQUESTS = 30


@asynccontextmanager
async def lab_cluster(tmp_path: Path, platform: str, *, kernel: bool) -> AsyncIterator[LabCluster]:
    async with ProcessGroup(tmp_path / "logs") as group:
        # Health checks three times slower than the platform's: however loaded the machine,
        # every request below goes out before an LB can react.
        slow = PLATFORMS[platform].scaled(3.0)
        cluster = LabCluster(slow, tmp_path / "cluster", group, kernel=kernel)
        try:
            await cluster.start()
            yield cluster
        finally:
            cluster.close()


async def fresh_errors(cluster: LabCluster, lb: LB, timeout: float = 5.0) -> Counter[str]:
    """REQUESTS at once on new connections through `lb`, sent where the daemon runs."""

    async def probe() -> Counter[str]:
        context = client_context(str(cluster.ca_file), Protocol.HTTP1, verify=True)
        target = ProbeTarget(
            cluster.url(lb) + PATH,
            context,
            token=TokenFile(str(cluster.token_file)),
            timeout=timeout,
            max_in_flight=REQUESTS,
        )
        stream = StreamId("kube-api", Protocol.HTTP1, lb, Connection.NEW)
        prober = Prober(stream, target, time.monotonic())
        samples = await asyncio.gather(*(prober.sample() for _ in range(REQUESTS)))
        await prober.aclose()
        return Counter(str(s.error) if s.error else "ok" for s in samples)

    network = cluster.network
    if network is None or network.client is None:
        return await probe()
    client = network.client

    def run() -> Counter[str]:
        try:
            return asyncio.run(probe())
        finally:
            gc.collect()  # its leftover sockets warn here, under this module's filter

    return await asyncio.to_thread(client.call, run)


async def kill_first(cluster: LabCluster) -> None:
    server = cluster.apiservers[0]
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    await cluster.wait_exit(server, 10)


# AWS resets a downed target's flows, GCP keeps them; Azure and none dispatch as GCP does.
@pytest.mark.parametrize("platform", ["aws", "gcp"])
async def test_a_dead_apiserver_refuses_connections_through_a_pass_through_lb(
    tmp_path: Path, platform: str
) -> None:
    async with lab_cluster(tmp_path, platform, kernel=True) as cluster:
        assert await fresh_errors(cluster, LB.EXTERNAL) == {"ok": REQUESTS}
        await kill_first(cluster)
        for lb in (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK):
            errors = await fresh_errors(cluster, lb)
            assert errors.keys() == {"ok", "connect_refused"}, (lb, errors)
        # Inside the health checks' reaction time: no LB had taken the server out yet.
        assert [e for lb in cluster.lbs.values() for e in lb.events] == []


async def test_a_vanished_node_times_out_through_a_pass_through_lb(tmp_path: Path) -> None:
    async with lab_cluster(tmp_path, "aws", kernel=True) as cluster:
        node = cluster.apiservers[0].node
        assert node is not None
        await node.run("nft", "-f", "-", stdin=nftables.blackhole())
        errors = await fresh_errors(cluster, LB.EXTERNAL, timeout=1.0)
        assert errors.keys() == {"ok", "timeout"}, errors


async def test_behind_haproxy_a_dead_apiserver_is_never_a_refused_connect(
    tmp_path: Path,
) -> None:
    async with lab_cluster(tmp_path, "metal", kernel=False) as cluster:
        await kill_first(cluster)
        errors = await fresh_errors(cluster, LB.EXTERNAL)
        print(errors)
        assert "connect_refused" not in errors
        assert errors.keys() - {"ok"}, "HAProxy hid the dead server from every request"
