"""The configuration of `prober run` once it is loaded and valid: plain frozen data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from prober.core.clientgo import BackoffPolicy, timer
from prober.core.latency import DEFAULT_SLOW_FLOOR
from prober.core.models import LB, Connection, LBSettings, Protocol, StreamId

DEFAULT_PATH = "/api/v1/namespaces/default"  # what openshift/origin's samplers GET
WATCH_CACHE_QUERY = "resourceVersion=0"  # served from the watch cache, not read from etcd
DEFAULT_TARGET_NAME = "kube-api"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Target:
    """One URL behind one load balancer; every protocol x connection mode probes it."""

    name: str
    lb: LB
    url: str  # scheme://host:port, no path
    ca_file: str | None = None  # None: the system trust store
    token_file: str | None = None  # None: no Authorization header
    server_name: str | None = None  # SNI and verification name, when not the URL's host


@dataclass(frozen=True, slots=True)
class Config:
    targets: tuple[Target, ...] = ()
    platform: str = ""  # "": not configured (discovered, or "unknown")
    interval: float = 0.1  # per worker, while a shutdown window is open
    quiet_interval: float = 1.0  # per stream, while none is (0: always `interval`)
    settle: float = 30.0  # back to quiet this long after the last window or failure
    early_for: float = 90.0  # `core.instances.DEFAULT_EARLY_FOR`
    workers: int = 2
    timeout: float = 5.0
    # Witness bursts (`core.burst`): at most this many burst requests in flight at once over
    # every LB (0: none); and how much faster than the window rate an LB's new-connection
    # streams sample while its reaction is open (`core.pace`; 1, the default: no faster. Each
    # fresh connection costs the prober a TLS handshake of CPU, ~3 ms here: a faster rate
    # delays the bursts behind it, and bench/core_precision.py measured wider bounds with
    # 1.5 than with 1).
    burst_parallel: int = 8
    rise: float = 1.0
    protocols: tuple[Protocol, ...] = (Protocol.HTTP1, Protocol.HTTP2)
    connections: tuple[Connection, ...] = (Connection.NEW, Connection.REUSED)
    path: str = DEFAULT_PATH
    # False: every request asks for `resourceVersion=0`, which the apiserver's watch cache
    # answers, as origin's samplers do; true: a quorum read from etcd, so an etcd leader
    # change shows as failed requests that are no LB's doing.
    consistent_reads: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    # Loopback unless told: the metrics and probes are no one else's business by default, and
    # the deploy binds the pod's own address explicitly (behind its kube-rbac-proxy).
    listen: tuple[str, int] = ("127.0.0.1", 9090)
    event_log: str | None = None
    event_log_max_size: int = 32 * MIB
    # Earlier runs' logs, moved aside at start (`daemon.retention`): at most this many
    # directories of at most this many bytes together; the newest is kept whatever its size.
    event_log_keep_runs: int = 5
    event_log_keep_size: int = 512 * MIB
    # The event log's records on stdout too, for CI's pod logs: `all` of them, or `compact`
    # (what was measured: windows, intervals, pace changes, summaries; no samples), or `off`.
    event_log_stdout: str = "off"
    summary_interval: float = 60.0
    duration: float | None = None  # None: until SIGTERM
    drain_timeout: float = 5.0
    ca_file: str | None = None  # default for targets that name none
    token_file: str | None = None  # default for targets that name none
    insecure_skip_tls_verify: bool = False
    in_cluster: bool = False
    kubeconfig: str | None = None
    localhost: bool = False  # with discovery: also probe https://localhost:6443
    # The node this prober runs on (the downward API's spec.nodeName, PROBER_NODE): a sample
    # its own node's apiserver answered through an LB is same-node (`core.samenode`).
    node: str | None = None
    log_format: str = "json"
    log_level: str = "info"
    # Watch streams (`daemon.watches.kind`): one per LB x protocol on the heartbeat Lease, run as
    # client-go's reflector does; every constant client-go's by default.
    # How they sync: "watch-list" (client-go 1.35's default, KEP-3157), "list" or "off".
    watches: str = "watch-list"
    heartbeat: str = ""  # NAMESPACE/NAME; "": $POD_NAMESPACE/$POD_NAME, else default/prober-<host>
    heartbeat_interval: float = 1.0
    watch_blind_after: float = 2.0  # a heartbeat unseen this long after its write: blind
    # A stream's in-window p99 answer time past 3 x its quiet p99 and this is slow but up
    # (`core.latency.slow_but_up`).
    slow_floor: float = DEFAULT_SLOW_FLOOR
    lb_settings: LBSettings | None = None  # None: the platform's row of `core.budgets`
    # The lab's: upstream's timers (`core.clientgo.TIMERS`) multiplied by this; 1 in a cluster.
    time_scale: float = 1.0

    @property
    def watch_min_timeout(self) -> float:
        """A watch's timeoutSeconds lies in [this, 2x this), as client-go's reflector's."""
        return timer("watch_min_timeout", self.time_scale)

    @property
    def watch_list_stall(self) -> float:
        """A watch-list whose end marker has not come this long after its request stalls."""
        return timer("watch_list_stall", self.time_scale)

    @property
    def watch_backoff(self) -> BackoffPolicy:
        """client-go's reflector backoff between failed rounds."""
        return BackoffPolicy(
            initial=timer("watch_backoff_initial", self.time_scale),
            cap=timer("watch_backoff_cap", self.time_scale),
            reset_after=timer("watch_backoff_reset", self.time_scale),
        )

    @property
    def http2_read_idle_timeout(self) -> float:
        return timer("http2_read_idle_timeout", self.time_scale)

    @property
    def http2_ping_timeout(self) -> float:
        return timer("http2_ping_timeout", self.time_scale)

    @property
    def watch_max_event(self) -> int:
        """A watch event past this ends the watch: a guard of the daemon's memory."""
        return 4 * MIB

    @property
    def identity_renew_interval(self) -> float:
        """The apiservers' identity Lease renew interval: a renewTime less than this after the
        read that showed the old holder is the new holder's first (`k8s.holders`)."""
        return timer("identity_renew_interval", self.time_scale)

    @property
    def node_refresh(self) -> float:
        """How often the identity Leases are re-read: every six renewals, a minute."""
        return 6 * self.identity_renew_interval

    @property
    def identity_refresh_fast(self) -> float:
        """How often the Leases are read while an apiserver restarts: a third of the renew
        interval, at most a second, so the read before a new holder's first write comes
        close enough to it."""
        return min(1.0, self.identity_renew_interval / 3)

    @property
    def request_path(self) -> str:
        """The path and query each request sends."""
        if self.consistent_reads:
            return self.path
        return self.path + ("&" if "?" in self.path else "?") + WATCH_CACHE_QUERY

    @property
    def discovers(self) -> bool:
        """Whether the cluster is asked for targets, platform and node names."""
        return self.in_cluster or self.kubeconfig is not None

    @property
    def constant_labels(self) -> dict[str, str]:
        """Labels on every metric: the platform, then the configured ones."""
        return {"platform": self.platform_name, **self.labels}

    @property
    def platform_name(self) -> str:
        return self.platform or "unknown"

    def streams(self) -> tuple[StreamId, ...]:
        return tuple(
            StreamId(target.name, protocol, target.lb, connection)
            for target in self.targets
            for protocol in self.protocols
            for connection in self.connections
        )

    def target_of(self, stream: StreamId) -> Target:
        for target in self.targets:
            if (target.name, target.lb) == (stream.target, stream.lb):
                return target
        raise KeyError(stream.name)


@dataclass(frozen=True, slots=True)
class Credentials:
    """A CA file and a token file that a source offers to targets naming none."""

    ca_file: str | None = None
    token_file: str | None = None


def with_credentials(config: Config, *defaults: Credentials) -> Config:
    """The one precedence rule for each target's CA and token file, most specific first: the
    target's own (`targets[].ca_file`); the top-level setting (`ca_file` in the file,
    `PROBER_CA_FILE` or `--ca-file`, the later source winning as for every key); then the
    first of `defaults` that has one, in the order given: what discovery read from the
    kubeconfig, then the pod's service account. A default never overrides a setting."""
    top = Credentials(config.ca_file, config.token_file)

    def first(own: str | None, pick: str) -> str | None:
        offered = (getattr(source, pick) for source in (top, *defaults))
        return own or next((value for value in offered if value), None)

    targets = tuple(
        dataclasses.replace(
            t, ca_file=first(t.ca_file, "ca_file"), token_file=first(t.token_file, "token_file")
        )
        for t in config.targets
    )
    return dataclasses.replace(config, targets=targets)


def with_discovered(
    config: Config,
    targets: tuple[Target, ...],
    platform: str | None,
    *defaults: Credentials,
) -> Config:
    """The config once the cluster told us its targets and platform. Configured targets and
    a configured platform win; every target gets its CA and token by `with_credentials`."""
    chosen = dataclasses.replace(
        config,
        targets=config.targets or targets,
        platform=config.platform or platform or "",
    )
    return with_credentials(chosen, *defaults)
