"""`prober run` from parsed arguments to exit code: load the configuration, discover the
cluster if asked, run the daemon. Bad input (a `ConfigError`, `ClusterError` or `DaemonError`,
all `UserError`s) is printed by `prober.cli`: one line on stderr and exit 2."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from prober.common.logs import configure_logging
from prober.config import (
    Config,
    ConfigError,
    Credentials,
    load_config,
    service_account,
    with_discovered,
)
from prober.daemon.app import Daemon

if TYPE_CHECKING:
    from prober.k8s.discovery import HostDecoder


def run_command(config_path: str | None, flags: Mapping[str, object]) -> int:
    config = load_config(config_path, flags=flags)
    configure_logging(config.log_format, config.log_level)
    return _run_on_uvloop(_run(config))


async def _run(config: Config) -> int:
    hosts = None
    if config.discovers:
        config, hosts = await discover(config)
    return await Daemon(config, hosts=hosts).run()


async def discover(config: Config) -> tuple[Config, HostDecoder]:
    """Targets and platform from the Infrastructure object, node names from the Leases. A
    config that names its targets and its platform needs nothing of the Infrastructure
    (configured ones win): it is not read, and the cluster is asked for node names only (a
    cluster that is not OpenShift, the lab's apiservers)."""
    # The kubernetes client costs 0.2 s and tens of MB: only load it when discovery is asked.
    from prober.k8s.cluster import ClusterAccess, Infrastructure  # noqa: PLC0415
    from prober.k8s.discovery import HostDecoder, discover_targets  # noqa: PLC0415

    access = await asyncio.to_thread(ClusterAccess.connect, config.in_cluster, config.kubeconfig)
    if config.targets and config.platform:
        infrastructure = Infrastructure(None, None, None)
    else:
        infrastructure = await asyncio.to_thread(access.infrastructure)
    targets = discover_targets(infrastructure, localhost=config.localhost)
    discovered = Credentials(ca_file=access.ca_file)  # the CA the kubeconfig trusts
    resolved = with_discovered(
        config, targets, infrastructure.platform, discovered, *service_account(config)
    )
    if not resolved.targets:
        raise ConfigError("targets: none configured and none discovered")
    hosts = HostDecoder(access, renew_interval=config.identity_renew_interval)
    await hosts.refresh()
    structlog.get_logger("prober.daemon").info(
        "discovered",
        platform=resolved.platform_name,
        targets=[f"{t.lb}={t.url}" for t in resolved.targets],
        apiservers=hosts.known(),
    )
    return resolved, hosts


def _run_on_uvloop(main: Coroutine[Any, Any, int]) -> int:
    """uvloop: the same asyncio API on libuv, with its own TLS layer, costs about a third less
    CPU per sample (`bench/daemon_cpu.py`)."""
    # libuv's thread pool runs the name lookups of new connections; its default of 4 threads
    # sits idle nearly always (lookups take microseconds from /etc/hosts or a node-local
    # resolver). Two keep one slow lookup from holding up the rest.
    os.environ.setdefault("UV_THREADPOOL_SIZE", "2")
    import uvloop  # noqa: PLC0415

    return uvloop.run(main)
