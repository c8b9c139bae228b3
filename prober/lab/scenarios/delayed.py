"""The `delayed-lb` scenario: a rollout behind an LB that keeps answering, slowly. A relay
in front of that one LB (`lab.infra.delayrelay`) holds every chunk, both ways, for `DELAY`
seconds while an apiserver shuts down, so every request through it, on kept and new
connections, is answered late, and no other LB's is. The relay accepts a connection itself,
so a new connection's TCP connect is not held (its `connect` stays fast); its TLS handshake,
two held round trips, and the request are. Its check: that LB's streams, and no
other's, are slow but up (`core.latency`).

The delay switches on after each SIGTERM (`OPEN_AFTER` and two quiet gaps), once the daemon
has seen the shutdown and opened its window (its first late answer comes within a quiet
sampling gap), so that no quiet answer is held; and off once the server has exited, before
its restart: the restart is still in the window (fast answers there only lower the in-window
p99), and the quiet stretch between windows stays fast.
"""

from __future__ import annotations

import asyncio
import time

from prober.core.models import LB
from prober.lab.infra.cluster import Apiserver, LabCluster
from prober.lab.infra.daemons import QUIET_INTERVAL
from prober.lab.infra.delayed import start_delayed
from prober.lab.infra.processes import ProcessGroup
from prober.lab.scenarios.playbook import Hook, Say

# Seconds each chunk is held, each way (never scaled: an answer time, not a timer). A kept
# connection's answer comes >= 2 x DELAY late, a new one's >= 4 x (TCP and TLS round trips):
# past the default floor (`slow_floor`, 1 s) and 3 x a quiet p99 under 0.4 s.
DELAY = 0.6
# After SIGTERM, the delay waits 1 s and two quiet gaps: the daemon's first late answer, which
# opens its window, comes within one gap, so no quiet answer is held.
OPEN_AFTER, OPEN_AFTER_GAPS = 1.0, 2
# Before the first shutdown, past the warm-up: this many quiet gaps, at least 8 s, so that
# every stream has the quiet answers a comparison needs (`core.latency.MIN_QUIET`, 20).
QUIET_BEFORE_GAPS, QUIET_BEFORE = 30, 8.0


def quiet_gap(time_scale: float) -> float:
    """A stream's gap at the quiet rate in the lab (`lab.infra.daemons.daemon_config`)."""
    return QUIET_INTERVAL * time_scale


async def delay_lb(cluster: LabCluster, group: ProcessGroup, lb: LB) -> None:
    """Stand the relay in front of `lb`, before the daemon reads its URL."""
    upstream = cluster.lbs[lb].address
    cluster.delayed = await start_delayed(group, lb, upstream, DELAY, cluster.enter_client)


async def sigterm_delayed(
    cluster: LabCluster, server: Apiserver, say: Say, hook: Hook | None
) -> None:
    """A graceful shutdown with the relay's delay on while the server drains."""
    relay = cluster.delayed
    assert relay is not None, "delay_lb stands it up before the first shutdown"
    platform = cluster.platform
    gap = quiet_gap(platform.time_scale)
    if not relay.spans:  # the first shutdown
        quiet = max(QUIET_BEFORE, QUIET_BEFORE_GAPS * gap)
        say(f"{quiet:.1f} s of quiet first: the answer times every window is held to")
        await asyncio.sleep(quiet)
    say(f"{server.hostname}: SIGTERM (shutdown delay {platform.shutdown_delay:.1f} s)")
    await cluster.shutdown(server)
    await asyncio.sleep(OPEN_AFTER + OPEN_AFTER_GAPS * gap)
    say(f"{server.hostname}: {relay.lb} answers {relay.delay:g} s late each way")
    relay.on(time.time())
    if hook is not None:
        await hook()
    try:
        await cluster.wait_exit(server, platform.graceful_termination + 30)
    finally:
        relay.off(time.time())
    say(f"{server.hostname}: restarting, waiting until every LB routes to it")
    await cluster.restart(server)
