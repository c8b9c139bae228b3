"""Crashes in the lab: fake apiservers as processes behind real HAProxy (AWS's LBs at 1/20 of
their real timings), the real daemon probing the internal LB and localhost. An apiserver is
frozen with requests in flight and killed, an HAProxy is killed; both come back. The daemon
must go on, classify what it saw, and record every sample, which each apiserver's audit log
confirms from the other side."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from prober.core.models import LB
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.infra.processes import ProcessGroup
from tests.reliability.harness import Account, FaultDaemon, failed_audit_ids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

CRASH_CLASSES = {"connect_refused", "connection_reset"}
FROZEN = 0.3  # seconds an apiserver is stopped before it is killed: requests pile up on it


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LabCluster]:
    platform = PLATFORMS["aws"].scaled(0.05)
    async with ProcessGroup(tmp_path / "logs") as group:
        lab = LabCluster(platform, tmp_path / "cluster", group, servers=2)
        try:
            await lab.start()
            yield lab
        finally:
            lab.close()


def daemon_for(cluster: LabCluster, fault: str, events: Path) -> FaultDaemon:
    targets = [(str(lb), cluster.url(lb)) for lb in (LB.INTERNAL, LB.LOCALHOST)]
    args = (
        f"--ca-file={cluster.ca_file}",
        f"--token-file={cluster.token_file}",
        "--interval=50ms",  # 8 streams: 320 samples a second, as in the other faults
        "--quiet-interval=0",
        "--timeout=5s",
    )
    return FaultDaemon(fault, events, targets, *args)


def with_server_view(account: Account, cluster: LabCluster, events: Path) -> Account:
    """What the apiservers' audit logs say they answered, held against the daemon's count."""
    audited: set[str] = set()
    for server in cluster.apiservers:
        path = server.workdir / "audit.log"
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("userAgent", "").startswith("prober/"):
                audited.add(event["auditID"])
    account.server_seen = len(audited)
    account.reached = len(failed_audit_ids(events) & audited)
    return account


async def test_an_apiserver_killed_mid_request_and_restarted(
    cluster: LabCluster, tmp_path: Path, report
) -> None:
    events = tmp_path / "events.jsonl"
    server = cluster.apiservers[0]  # the one localhost reaches
    assert server.process is not None
    async with daemon_for(cluster, "apiserver_sigkill", events) as daemon:
        server.process.send_signal(signal.SIGSTOP)  # requests sent now wait on it
        frozen = await daemon.total("prober_requests_total")
        await asyncio.sleep(FROZEN)  # how long the fault lasts, not a wait for a condition
        await cluster.kill(server, endpoint_ttl=0.5)
        await cluster.wait_exit(server, 10)
        await daemon.wait_for_total("prober_requests_total", frozen + 100, "samples after the kill")
        await cluster.restart(server)
        await daemon.wait_for_total(
            "prober_requests_total",
            await daemon.total("prober_requests_total", lb="localhost", result="success") + 40,
            "localhost to answer again",
            lb="localhost",
            result="success",
        )
        account = await daemon.stop(
            "frozen 0.3 s then SIGKILL: in-flight requests reset, new ones refused "
            "(localhost) or closed by HAProxy in the handshake; back after the restart"
        )
    report(with_server_view(account, cluster, events))
    assert set(account.failures) <= CRASH_CLASSES
    assert account.failures["connection_reset"] > 0
    in_flight_at_kill = [s for s in account.failed if s.dur >= FROZEN * 0.9]
    assert in_flight_at_kill, "no request was in flight when the apiserver was killed"


async def test_an_lb_killed_and_restarted(cluster: LabCluster, tmp_path: Path, report) -> None:
    events = tmp_path / "events.jsonl"
    lb = cluster.lbs[LB.INTERNAL]
    async with daemon_for(cluster, "haproxy_sigkill", events) as daemon:
        await lb.kill()
        await daemon.wait_for_total(
            "prober_requests_total", 40, "refused connections", result="connect_refused"
        )
        await lb.restart(cluster.group)
        now = await daemon.total("prober_requests_total", lb="internal-lb", result="success")
        await daemon.wait_for_total(
            "prober_requests_total",
            now + 40,
            "the LB to route again",
            lb="internal-lb",
            result="success",
        )
        account = await daemon.stop(
            "SIGKILL: kept connections reset, new ones refused until it is back on its port"
        )
    report(with_server_view(account, cluster, events))
    assert set(account.failures) <= CRASH_CLASSES
    assert {s.lb for s in account.failed} == {LB.INTERNAL}  # localhost never noticed
