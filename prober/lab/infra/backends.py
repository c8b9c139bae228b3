"""The apiserver a lab runs, a choice (`prober lab --apiserver`): the fake (`fakeapiserver`), the
fast and faultable stand-in, or upstream's own kube-apiserver (`lab.infra.upstream`). The cluster
knows one seam: what a host's start runs, when it is ready, what its truth is written from,
which etcd it needs, and whether the service network follows the apiservers' own endpoint
reconciler (upstream's) or the lab's stand-in for it (the fake's)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from prober.core.durations import format_go_duration
from prober.core.header import apiserver_id
from prober.lab.infra import upstream
from prober.lab.infra.certs import ServerCertificate
from prober.lab.infra.etcd import LabEtcd
from prober.lab.infra.kernel.netns import Namespace
from prober.lab.infra.kernel.topology import master_address
from prober.lab.infra.platforms import Platform
from prober.lab.infra.processes import LineHandler, ManagedProcess, announces

BACKENDS = ("fake", "upstream")
# kube-apiserver's periods, scaled with the run: bookmarks, etcd compaction (the fake's)
BOOKMARK_INTERVAL, COMPACTION_INTERVAL = 60.0, 300.0
SYNTHETIC_WATCHES = 2000  # informer watches each fake apiserver holds (`apiserver.watches`)
# How long a fake apiserver's post-start hooks keep /readyz failing after it listens, before
# scaling. Not a measured figure: long enough that listening, the identity Lease's first
# write and readiness going true are distinct instants at every scale the lab runs (a T1
# taken from the wrong one shows), short beside every LB's add-back, which it delays.
POST_START_HOOKS = 5.0


def _cache_init(platform: Platform) -> tuple[str, ...]:
    """A restarted server's watch cache initializes while its post-start hooks run: LIST and
    WATCH meanwhile get 429 (KEP-4568), which only clients that reach it before /readyz does
    (localhost) meet, as in a cluster."""
    return ("--watch-cache-init-duration",
            format_go_duration(POST_START_HOOKS * platform.time_scale))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    ready: Callable[[str], bool]  # the stdout line that says it serves, ready
    env: dict[str, str] | None = None
    on_line: LineHandler | None = None


@dataclass(slots=True)
class Apiserver:
    """One host's apiserver, as the cluster starts it again and again (`starts`)."""

    hostname: str
    port: int
    plain_port: int
    workdir: Path
    address: str = "127.0.0.1"
    node: Namespace | None = None  # the kernel path: the master's own network namespace
    process: ManagedProcess | None = None
    starts: int = 0

    @property
    def ident(self) -> str:
        return apiserver_id(self.hostname)

    @property
    def truth_path(self) -> Path:
        return self.workdir / "truth.jsonl"


class Cluster(Protocol):
    """What a backend reads of the cluster it runs in (`lab.infra.cluster.LabCluster`)."""

    @property
    def platform(self) -> Platform: ...
    @property
    def workdir(self) -> Path: ...
    @property
    def apiservers(self) -> Sequence[Apiserver]: ...
    @property
    def etcd(self) -> LabEtcd | None: ...
    @property
    def cert(self) -> ServerCertificate: ...
    @property
    def token(self) -> str: ...
    @property
    def token_file(self) -> Path: ...
    @property
    def goaway_chance(self) -> float: ...
    @property
    def restart_flags(self) -> tuple[str, ...]: ...
    @property
    def start_flags(self) -> tuple[str, ...]: ...
    @property
    def identity_renew(self) -> float: ...


class ApiserverBackend(Protocol):
    name: ClassVar[str]
    etcd: Path | None  # its etcd's binary; None: Debian's
    plain_health: bool  # it answers /readyz on a plain-HTTP port too (GCP's external check)
    endpoints: bool  # it keeps `default/kubernetes` itself; the service network follows
    counts_refusals: bool  # its truth counts the requests it refused while it drained
    informer: Path | None  # client-go's informer to run beside the daemon (`lab.judges.informers`)

    def prepare(self, cluster: Cluster) -> None: ...

    def launch(self, cluster: Cluster, server: Apiserver) -> Launch: ...


class Fake:
    name: ClassVar[str] = "fake"
    etcd: Path | None = None
    plain_health = True
    endpoints = False
    counts_refusals = True
    informer: Path | None = None

    def prepare(self, cluster: Cluster) -> None:
        pass

    def launch(self, cluster: Cluster, server: Apiserver) -> Launch:
        platform = cluster.platform
        argv = [
            sys.executable, "-m", "prober.fakeapiserver",
            "--bind-address", server.address,
            "--port", str(server.port),
            "--plain-port", str(server.plain_port),
            "--cert", str(cluster.cert.cert),
            "--key", str(cluster.cert.key),
            "--hostname", server.hostname,
            "--shutdown-delay-duration", format_go_duration(platform.shutdown_delay),
            "--token-file", str(cluster.token_file),
            "--audit-log", str(server.workdir / "audit.log"),
            "--truth", str(server.truth_path),
            "--goaway-chance", str(cluster.goaway_chance),
            "--post-start-hooks-duration",
            format_go_duration(POST_START_HOOKS * platform.time_scale),
            *self._storage_flags(cluster),
            *(cluster.restart_flags if server.starts > 1 else ()),
            *(_cache_init(platform) if server.starts > 1 else ()),
            *cluster.start_flags,
        ]  # fmt: skip
        return Launch(argv, announces("ready"))

    @staticmethod
    def _storage_flags(cluster: Cluster) -> list[str]:
        """etcd, and kube-apiserver's periods on the run's time scale."""
        assert cluster.etcd is not None
        scale = cluster.platform.time_scale

        def period(seconds: float) -> str:
            return format_go_duration(seconds * scale)

        grace = format_go_duration(cluster.platform.watch_grace)  # scaled with the platform
        return [
            "--etcd-servers", cluster.etcd.endpoint,
            "--synthetic-watches", str(SYNTHETIC_WATCHES),
            "--watch-bookmark-interval", period(BOOKMARK_INTERVAL),
            "--etcd-compaction-interval", period(COMPACTION_INTERVAL),
            "--identity-lease-renew-interval", format_go_duration(cluster.identity_renew),
            "--shutdown-watch-termination-grace-period", grace,
            # the drain's floor of 200 per second, scaled with the grace period
            "--watch-drain-min-qps", f"{200.0 / scale:g}",
        ]  # fmt: skip


class Upstream:
    """kube-apiserver v1.37.2 (`make upstream`), each in a UTS namespace of its own so that
    its hostname, and so its APIServerID and identity Lease, is its host's."""

    name: ClassVar[str] = "upstream"
    plain_health = False
    endpoints = True
    counts_refusals = False  # upstream audits no 429, and says nothing of them

    def __init__(self) -> None:
        self.binaries = upstream.binaries()
        self.etcd: Path | None = self.binaries.etcd
        self.informer: Path | None = self.binaries.informer

    def prepare(self, cluster: Cluster) -> None:
        upstream.token_file(cluster.workdir / "tokens.csv", [(cluster.token, "prober")])
        upstream.audit_policy(cluster.workdir / "audit-policy.yaml")

    def launch(self, cluster: Cluster, server: Apiserver) -> Launch:
        assert cluster.etcd is not None
        platform = cluster.platform
        instance = upstream.Instance(
            etcd=f"http://{cluster.etcd.endpoint}",
            bind=server.address,
            advertise=master_address(cluster.apiservers.index(server)),
            port=server.port,
            cert=cluster.cert.cert,
            key=cluster.cert.key,
            tokens=cluster.workdir / "tokens.csv",
            audit_policy=cluster.workdir / "audit-policy.yaml",
            audit_log=server.workdir / "audit.log",
            shutdown_delay=platform.shutdown_delay,
            watch_grace=platform.watch_grace,
            # The lab's default, 0, as the fake's: a GOAWAY moves a kept connection at
            # random, which the truth of a kept connection does not model.
            goaway_chance=cluster.goaway_chance,
        )
        argv = upstream.with_hostname(
            server.hostname, upstream.kube_apiserver_argv(self.binaries.kube_apiserver, instance)
        )
        truth = upstream.TruthWriter(
            server.truth_path, server.hostname, platform.shutdown_delay, server.port
        )
        return Launch(
            argv, announces(upstream.READY), upstream.lease_env(cluster.identity_renew),
            truth,
        )  # fmt: skip


def backend(name: str) -> ApiserverBackend:
    """The backend of that name; an upstream one only where its binaries are built."""
    if name == "upstream":
        return Upstream()
    return Fake()
