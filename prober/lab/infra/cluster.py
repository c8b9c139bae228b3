"""A stand-in cluster on one machine: fake kube-apiservers behind a platform's LBs.

Each apiserver is a real process (`python -m prober.fakeapiserver`) on fixed ports, so a
restart comes back where the LBs expect it, with the same hostname and so the same APIServerID.
Each health-checked LB is its own HAProxy; the service network is HAProxy without checks whose
membership the lab changes the way the endpoint reconciler and kube-proxy would: out when the
apiserver starts shutting down (after the proxy sync delay), back in once it is ready again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from prober.core.clientgo import timer
from prober.core.models import LB
from prober.lab.infra.backends import Apiserver, ApiserverBackend, Fake
from prober.lab.infra.certs import LabCA, ServerCertificate
from prober.lab.infra.delayed import DelayedLB
from prober.lab.infra.endpoints import Follower
from prober.lab.infra.etcd import LabEtcd
from prober.lab.infra.haproxy import Backend, HaproxyLB, free_port
from prober.lab.infra.kernel import nftables
from prober.lab.infra.kernel.checker import Target
from prober.lab.infra.kernel.conntrack import NatLog, nat_logs
from prober.lab.infra.kernel.lbs import KernelService, kernel_lb
from prober.lab.infra.kernel.netns import Namespace
from prober.lab.infra.kernel.topology import (
    API_PORT,
    ETCD,
    HEALTH_PORT,
    LabNetwork,
    lab_addresses,
)
from prober.lab.infra.kernel.topology import master_address as address
from prober.lab.infra.lbstate import LabLB, Outage
from prober.lab.infra.platforms import PROXY_SYNC_AT, LBProfile, Platform
from prober.lab.infra.processes import ProcessError, ProcessGroup

READY_TIMEOUT = 60.0  # seconds from a start to ready: upstream's 2-4 s, a busy machine's more
TOKEN = "prober-lab-token"  # a lab secret; the daemon must never print it


@dataclass(slots=True)
class LabCluster:
    platform: Platform
    workdir: Path
    group: ProcessGroup
    servers: int = 3
    goaway_chance: float = 0.0
    apiservers: list[Apiserver] = field(default_factory=list)
    kernel: bool = False  # the kernel data path (`lab.infra.kernel`) instead of HAProxy
    lbs: dict[LB, LabLB] = field(default_factory=dict)
    network: LabNetwork | None = None
    etcd: LabEtcd | None = None
    ca_file: Path = Path()
    token_file: Path = Path()
    crashes: list[tuple[str, float]] = field(default_factory=list)  # (hostname, SIGKILL wall)
    outages: list[Outage] = field(default_factory=list)  # each node that vanished
    nat_logs: list[NatLog] = field(default_factory=list)  # the kernel path's NATs' flows
    restart_flags: tuple[str, ...] = ()  # apiserver flags for every start after a host's first
    start_flags: tuple[str, ...] = ()  # apiserver flags for every start (the scenario's)
    backend: ApiserverBackend = field(default_factory=Fake)  # its apiservers (`lab.infra.backends`)
    delayed: DelayedLB | None = None  # delayed-lb: the relay standing in for one LB's address
    _cert: ServerCertificate | None = None
    _sockets: tempfile.TemporaryDirectory[str] | None = None
    _pending: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        ca = LabCA(self.workdir / "pki")
        self.ca_file = ca.ca_cert
        self.token_file = self.workdir / "token"
        self.token_file.write_text(TOKEN + "\n")
        names = ["localhost", "127.0.0.1", "api.lab.test", "api-int.lab.test"]
        names += lab_addresses(self.servers)
        self._cert = ca.issue("apiserver", names)
        self.backend.prepare(self)
        if self.kernel:
            self.network = LabNetwork(self.servers)
            await self.network.start()
        await self._start_etcd()
        for index in range(self.servers):
            hostname = f"master-{index}"
            workdir = self.workdir / hostname
            if self.network is not None:
                node = self.network.node(index)
                server = Apiserver(hostname, API_PORT, HEALTH_PORT, workdir, address(index), node)
            else:
                server = Apiserver(hostname, free_port(), free_port(), workdir)
            server.workdir.mkdir(parents=True, exist_ok=True)
            self.apiservers.append(server)
        if self.network is not None:
            await self._log_nats(self.network)
        await asyncio.gather(*(self._launch(s) for s in self.apiservers))
        for profile in self.platform.lbs:
            self.lbs[profile.lb] = self._make_lb(profile)
        await asyncio.gather(*(lb.start(self.group) for lb in self.lbs.values()))
        await asyncio.gather(*(self._wait_serving(s, since=0.0) for s in self.apiservers))
        if self.backend.endpoints:
            await self._follow_endpoints()

    @property
    def cert(self) -> ServerCertificate:
        assert self._cert is not None, "issued as the cluster starts"
        return self._cert

    @property
    def token(self) -> str:
        return TOKEN

    async def _follow_endpoints(self) -> None:
        """The service network after the apiservers' own endpoint reconciler
        (`lab.infra.endpoints`), from where the prober runs, at the proxies' sync delay."""
        urls = [f"https://{s.address}:{s.port}" for s in self.apiservers]
        argv = [sys.executable, "-m", "prober.lab.infra.endpoints", str(self.ca_file),
                str(self.token_file), *urls]  # fmt: skip
        hostnames = {address(i): s.hostname for i, s in enumerate(self.apiservers)}
        sync = self.platform.lb(LB.SERVICE_NETWORK).sync_delay * PROXY_SYNC_AT
        follower = Follower(hostnames, sync, self._after, self._serving)
        process = await self.group.start("endpoints", self.enter_client(argv), on_line=follower)
        await process.wait_for_line(lambda line: '"ready"' in line, READY_TIMEOUT)

    async def _serving(self, hostname: str, serving: bool) -> None:
        await self.lbs[LB.SERVICE_NETWORK].set_serving(hostname, serving)

    async def _start_etcd(self) -> None:
        data = self.workdir / "etcd"
        binary = self.backend.etcd
        if self.network is not None:
            self.etcd = LabEtcd(data, ETCD, self.network.router, binary=binary)
        else:
            self.etcd = LabEtcd(data, binary=binary)
        await self.etcd.start(self.group)

    async def _log_nats(self, network: LabNetwork) -> None:
        """conntrack's log of each NAT's new flows: the router's LBs, the client's
        service network (`lab.infra.kernel.conntrack`)."""
        assert network.router is not None
        assert network.client is not None
        hostnames = {s.address: s.hostname for s in self.apiservers}
        masters = frozenset(f"{s.address}:{s.port}" for s in self.apiservers)
        logs = nat_logs(hostnames, masters)
        for namespace, log in ((network.client, logs["client"]), (network.router, logs["router"])):
            await log.start(self.group, namespace)
            self.nat_logs.append(log)

    def _make_lb(self, profile: LBProfile) -> LabLB:
        if profile.check is not None and not self.backend.plain_health:
            # No plain-HTTP /readyz to check (GCP's external LB's): over TLS instead.
            profile = replace(profile, check=replace(profile.check, tls=True))
        if self.network is not None:
            targets = [Target(s.hostname, s.address, s.port, s.plain_port) for s in self.apiservers]
            return kernel_lb(profile, self.network, targets, self.workdir)
        backends = [Backend(s.hostname, s.port, s.plain_port) for s in self.apiservers]
        if self._sockets is None:
            self._sockets = tempfile.TemporaryDirectory(prefix="prober-lab-")
        return HaproxyLB(profile, backends, self.workdir, Path(self._sockets.name))

    def enter_client(self, argv: list[str]) -> list[str]:
        """`argv` run where the prober runs: the client namespace, or here."""
        if self.network is None or self.network.client is None:
            return argv
        return self.network.client.enter(argv)

    def client_socket(self) -> socket.socket:
        """A socket where the prober runs (its metrics port is on that loopback)."""
        if self.network is None or self.network.client is None:
            return socket.socket()
        return self.network.client.socket()

    def url(self, lb: LB, on: Apiserver | None = None) -> str:
        """Where a prober reaches this LB; localhost: `on`'s apiserver (the client's
        stand-in is master-0's)."""
        if lb is LB.LOCALHOST:
            local = on or self.apiservers[0]
            return f"https://{local.address}:{local.port}"
        relay = self.delayed
        host, port = relay.address if relay is not None and relay.lb is lb else self.lbs[lb].address
        return f"https://{host}:{port}"

    def kubeconfig(self, lb: LB = LB.SERVICE_NETWORK) -> Path:
        """A kubeconfig through `lb`: the daemons', through the service network as a pod's
        is, what they read the identity Leases with (`k8s.discovery.HostDecoder`); the
        reference informers', one per LB (`lab.judges.informers`)."""
        name = "kubeconfig" if lb is LB.SERVICE_NETWORK else f"kubeconfig-{lb}"
        path = self.workdir / name
        if not path.exists():
            path.write_text(kubeconfig(self.url(lb), self.ca_file, TOKEN), encoding="utf-8")
        return path

    async def host_prober(self, server: Apiserver) -> Namespace:
        """Ready a master's network to run a prober on it (the kernel path): its hairpin LBs
        answered by itself, the service network programmed there too."""
        if self.network is None or server.node is None:
            raise ProcessError("a prober runs on a master only on the kernel path")
        hairpins = [p.lb for p in self.platform.lbs if p.hairpin]
        node = await self.network.host_prober(self.apiservers.index(server), hairpins)
        service = self.lbs.get(LB.SERVICE_NETWORK)
        if isinstance(service, KernelService):
            await service.also_on(node)
        return node

    async def _launch(self, server: Apiserver) -> None:
        server.starts += 1
        launch = self.backend.launch(self, server)
        argv = launch.argv
        name = f"{server.hostname}-{server.starts}"
        if server.node is not None:
            argv = server.node.enter(argv)
        # Tearing the lab down is not a shutdown to measure: stop apiservers with SIGKILL.
        server.process = await self.group.start(
            name, argv, env=launch.env, on_line=launch.on_line, stop_signal=signal.SIGKILL
        )
        # Ready, not only listening: an LB that started checking a server before its hooks
        # finished would take it out and back in before the run began.
        await server.process.wait_for_line(launch.ready, READY_TIMEOUT)

    @property
    def identity_renew(self) -> float:
        """How often each apiserver renews its identity Lease, on the run's time scale."""
        return timer("identity_renew_interval", self.platform.time_scale)

    async def _wait_serving(self, server: Apiserver, since: float) -> None:
        """Until every health-checked LB routes to the server again."""
        waits = []
        for lb in self.lbs.values():
            if lb.profile.check is None:
                continue
            state = await lb.server_up()
            if not state.get(server.hostname, False):
                timeout = 3 * lb.profile.check.worst_detection + 10
                waits.append(lb.wait_for(server.hostname, up=True, timeout=timeout, since=since))
        await asyncio.gather(*waits)

    async def until_marked_down(self, hostname: str) -> None:
        """After a crash, what the LBs need to notice: their health checks failing."""
        waits = []
        for lb in self.lbs.values():
            check = lb.profile.check
            if check is not None:
                timeout = 3 * check.worst_detection + 10
                waits.append(lb.wait_for(hostname, up=False, timeout=timeout))
        await asyncio.gather(*waits)

    async def shutdown(self, server: Apiserver) -> float:
        """Graceful termination, as the kubelet does it: SIGTERM. Returns the wall time."""
        assert server.process is not None
        sent = time.time()
        server.process.send_signal(signal.SIGTERM)
        sync = self.platform.lb(LB.SERVICE_NETWORK).sync_delay * PROXY_SYNC_AT
        self._stand_in(sync, server, serving=False)
        return sent

    async def kill(self, server: Apiserver, endpoint_ttl: float) -> float:
        """A crash: SIGKILL, and the endpoint lingers until its reconciler lease expires."""
        assert server.process is not None
        sent = time.time()
        server.process.send_signal(signal.SIGKILL)
        self.crashes.append((server.hostname, sent))
        self._stand_in(endpoint_ttl, server, serving=False)
        return sent

    async def wait_exit(self, server: Apiserver, timeout: float) -> int:
        assert server.process is not None
        return await server.process.wait(timeout)

    async def restart(self, server: Apiserver) -> None:
        """Start the server again and wait until every LB routes to it. Its endpoint is back
        as upstream's endpoint reconciler puts it: once its /readyz is true (`_launch` waits
        for that), picked up by the proxies after their sync delay, whatever the LBs do."""
        since = time.time()
        await self._launch(server)
        await asyncio.gather(self._wait_serving(server, since), self._endpoint_back(server))

    async def _endpoint_back(self, server: Apiserver) -> None:
        if self.backend.endpoints:
            return  # its own reconciler puts it back (`_follow_endpoints`)
        await asyncio.sleep(self.platform.lb(LB.SERVICE_NETWORK).sync_delay)
        await self.lbs[LB.SERVICE_NETWORK].set_serving(server.hostname, True)

    async def lose(self, server: Apiserver, endpoint_ttl: float) -> float:
        """The node vanishes (the kernel path): its namespace drops every packet, in and out;
        the apiserver runs on, unaware. Its endpoint lingers until its lease expires."""
        if server.node is None:
            raise ProcessError("a node can vanish only on the kernel path")
        await server.node.run("nft", "-f", "-", stdin=nftables.blackhole())
        lost = time.time()
        self.outages.append(Outage(server.hostname, lost))
        self._stand_in(endpoint_ttl, server, serving=False)
        return lost

    async def restore(self, server: Apiserver) -> None:
        """The node is back: packets flow again; wait until every LB routes to it."""
        assert server.node is not None
        since = time.time()
        await server.node.run("nft", "-f", "-", stdin=nftables.delete_table("node_loss"))
        for outage in self.outages:
            if outage.hostname == server.hostname and outage.back is None:
                outage.back = since
        await self._back(server, since)

    async def _back(self, server: Apiserver, since: float) -> None:
        """A node back from a loss: its endpoint returns at the reconciler's next pass, after
        the LBs found it healthy again."""
        await self._wait_serving(server, since)
        await self._endpoint_back(server)

    def _stand_in(self, delay: float, server: Apiserver, *, serving: bool) -> None:
        """The fake's endpoint reconciler and proxies: the server's endpoint in or out of
        the service network `delay` seconds on. An apiserver that keeps its endpoint itself
        needs none."""
        if not self.backend.endpoints:
            self._after(delay, lambda: self._serving(server.hostname, serving))

    def _after(self, delay: float, action: Callable[[], Awaitable[None]]) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            await action()

        task = asyncio.create_task(later(), name=f"lab-after-{delay:.1f}s")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def close(self) -> None:
        """Remove what the cluster keeps outside its work directory: the admin sockets, the
        network namespaces (with every link, address and nftables table in them). A change
        still scheduled (an interrupted run settles none) is cancelled: it would meet a
        namespace already gone."""
        for task in self._pending:
            task.cancel()
        if self._sockets is not None:
            self._sockets.cleanup()
            self._sockets = None
        if self.network is not None:
            self.network.close()
            self.network = None

    async def settle(self) -> None:
        """Wait for scheduled membership changes; their failures surface here."""
        if self._pending:
            await asyncio.gather(*self._pending)


def kubeconfig(server: str, ca_file: Path, token: str) -> str:
    """A kubeconfig document (JSON is YAML) for one server, CA and bearer token. The CA's
    path is absolute: a reader resolves a relative one against the kubeconfig's folder."""
    cluster = {"server": server, "certificate-authority": str(ca_file.absolute())}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "lab", "cluster": cluster}],
            "users": [{"name": "prober", "user": {"token": token}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "prober"}}],
            "current-context": "lab",
        },
        indent=2,
    ) + "\n"  # fmt: skip


__all__ = ["Apiserver", "LabCluster", "ProcessError"]
