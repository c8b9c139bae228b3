"""`prober run` as the lab starts it: a child process with its configuration, ready once it
listens and every stream has sampled; and where each daemon's stdout (its pod log) lands."""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prober.config import Config
from prober.core.budgets import settings_of
from prober.core.clientgo import scaled, timer
from prober.core.durations import format_go_duration
from prober.core.instances import DEFAULT_EARLY_FOR
from prober.core.models import LB, LBSettings
from prober.lab.infra.options import LabOptions
from prober.lab.infra.platforms import PLATFORMS, as_built
from prober.lab.infra.processes import ManagedProcess, ProcessGroup, Tee

if TYPE_CHECKING:
    from prober.lab.infra.cluster import Apiserver, LabCluster

READY_TIMEOUT = 60.0
REQUEST_TIMEOUT = 5.0  # the daemon's per-request timeout in the lab, never scaled
QUIET_INTERVAL, SETTLE = Config().quiet_interval, Config().settle  # the daemon's defaults
DAEMON = "prober-run"
Enter = Callable[[list[str]], list[str]]  # argv to argv run where the prober runs


async def start_daemon(
    group: ProcessGroup,
    name: str,
    config_path: Path,
    tee: Tee | None = None,
    *,
    nice: int = 0,
    enter: Enter | None = None,
) -> tuple[ManagedProcess, int]:
    """`prober run` with this configuration, once it listens: the process and its port.
    `nice`: below the cluster's processes, as a pod with a small CPU request is; `enter`:
    into the client's namespace (the kernel path), where its port is."""
    argv = [sys.executable, "-m", "prober", "run", "--config", str(config_path)]
    if nice:
        argv = ["nice", "-n", str(nice), *argv]  # nice execs: the pid stays the daemon's
    if enter is not None:
        argv = enter(argv)  # nsenter execs too
    daemon = await group.start(name, argv, tee=tee)
    line = await daemon.wait_for_line(lambda line: '"listening"' in line, READY_TIMEOUT)
    return daemon, int(json.loads(line)["port"])


async def wait_ready(daemon: ManagedProcess) -> None:
    """Until every stream of the daemon has sampled (its `ready` log line)."""
    await daemon.wait_for_line(lambda line: '"ready"' in line, READY_TIMEOUT)


def daemon_logs(log_dir: Path) -> list[Path]:
    """Every daemon's stdout, in the order they ran: the pod logs a gather step collects."""
    found = sorted(log_dir.glob(f"{DAEMON}*.stdout.log"))
    return sorted(found, key=lambda p: (len(p.name), p.name))  # prober-run before prober-run-2


# The daemon's own watch timers (seconds), each with the floor it keeps on a small time scale,
# so that the heartbeat does not flood the servers and the blind threshold stays above noise;
# upstream's it scales itself (config `time_scale`, `core.clientgo.TIMERS`).
_AS_SHIPPED = Config()
WATCH_CONSTANTS = {
    "heartbeat_interval": (_AS_SHIPPED.heartbeat_interval, 0.2),
    "watch_blind_after": (_AS_SHIPPED.watch_blind_after, 0.5),
}


def watch_settings(scale: float) -> dict[str, object]:
    """The watch timers on the run's time scale, as the daemon's configuration takes them."""
    ours = {
        key: f"{scaled(value, floor, scale) * 1000:.0f}ms"
        for key, (value, floor) in WATCH_CONSTANTS.items()
    }
    return {**ours, "time_scale": scale}


def http2_dead_after(scale: float) -> float:
    """How long a silent HTTP/2 connection lives on the run's time scale: client-go pings
    after the read-idle timeout and drops the connection when the ping's timeout passes."""
    return timer("http2_read_idle_timeout", scale) + timer("http2_ping_timeout", scale)


def settings_config(settings: LBSettings) -> dict[str, object]:
    """The `lb_settings` key as a config file spells it."""
    spelled: dict[str, object] = {}
    for name in ("shutdown_delay", "graceful_termination"):
        value = getattr(settings, name)
        if value is not None:
            spelled[name] = format_go_duration(value)
    for lb, check in settings.lbs.items():
        fields: dict[str, object] = {}
        for name in ("interval", "timeout", "fastinter", "sync_delay"):
            if (value := getattr(check, name)) is not None:
                fields[name] = format_go_duration(value)
        for name in ("unhealthy", "healthy", "connections", "hairpin"):
            if (value := getattr(check, name)) is not None:
                fields[name] = value
        spelled[str(lb)] = fields
    return spelled


def daemon_config(
    cluster: LabCluster,
    options: LabOptions,
    event_log: Path,
    *,
    lbs: Sequence[LB] | None = None,
    stdout: str = "all",
    quiet_floor: float = 0.0,
    default_workers: int = 2,
    on: Apiserver | None = None,
    heartbeat: str = DAEMON,
) -> dict[str, object]:
    """`quiet_floor` and `default_workers` apply where the options say nothing; `on`: the
    master the daemon runs on (its node, its localhost), else the client's stand-in;
    `heartbeat`: its heartbeat Lease's name, its own (two writers of one Lease conflict)."""
    lbs = [*cluster.lbs, LB.LOCALHOST] if lbs is None else lbs
    scale = cluster.platform.time_scale
    quiet = options.quiet_interval
    if quiet is None:
        quiet = max(QUIET_INTERVAL * scale, quiet_floor)
    workers = options.workers or default_workers
    return {
        "platform": options.platform,
        "interval": options.interval,
        # Adaptive sampling at the daemon's defaults, shrunk with every other duration.
        "quiet_interval": f"{quiet * 1000:.0f}ms",
        "settle": f"{SETTLE * scale * 1000:.0f}ms",
        # A restarted apiserver's failures this long after its T1 are early, at this scale.
        "early_for": f"{DEFAULT_EARLY_FOR * scale * 1000:.0f}ms",
        "workers": workers,
        "timeout": f"{REQUEST_TIMEOUT:g}s",
        "listen": "127.0.0.1:0",
        "event_log": str(event_log),
        "event_log_stdout": stdout,  # what a gather step collects: judged after an eviction
        "summary_interval": "10s",
        "labels": {"job": f"lab-{options.scenario}"},
        "heartbeat": f"default/{heartbeat}",
        # The apiservers' nodes from their identity Leases, as in a cluster.
        "kubeconfig": str(cluster.kubeconfig()),
        **({} if on is None else {"node": on.hostname}),
        **watch_settings(scale),
        # What the platform's LBs promise, at this scale: the slow LB of `slow-lb` is judged
        # by its platform's settings, which it breaks.
        "lb_settings": settings_config(
            settings_of(as_built(PLATFORMS[options.platform].scaled(scale)))
        ),
        "targets": [
            {
                "name": "kube-api",
                "lb": str(lb),
                "url": cluster.url(lb, on),
                "ca_file": str(cluster.ca_file),
                "token_file": str(cluster.token_file),
            }
            for lb in lbs
        ],
    }


def snapshot_metrics(cluster: LabCluster, port: int, path: Path) -> None:
    """GET /metrics from the daemon's loopback, which is the client namespace's."""
    sock = cluster.client_socket()
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.sock = sock
    try:
        connection.request("GET", "/metrics")
        path.write_bytes(connection.getresponse().read())
    finally:
        connection.close()
