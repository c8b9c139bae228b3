"""What the lab does to its apiservers, one after another: the scenarios' playbook."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prober.lab.cluster import LabCluster

SCENARIOS = ("rollout", "crash", "slow-lb", "upgrade")
ENDPOINT_TTL = 15.0  # the kubernetes endpoint reconciler's lease, before scaling


async def play(
    cluster: LabCluster,
    scenario: str,
    shutdowns: int | None,
    say: Callable[[str], None],
    after_first_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Take the first `shutdowns` apiservers (all: None) down in turn, each back before the
    next: SIGKILL for `crash`, a graceful SIGTERM otherwise."""
    platform = cluster.platform
    for index, server in enumerate(cluster.apiservers[:shutdowns]):
        if scenario == "crash":
            say(f"{server.hostname}: SIGKILL")
            await cluster.kill(server, ENDPOINT_TTL * platform.time_scale)
            await cluster.wait_exit(server, 10)
            await cluster.until_marked_down(server.hostname)
        else:
            say(f"{server.hostname}: SIGTERM (shutdown delay {platform.shutdown_delay:.1f} s)")
            await cluster.shutdown(server)
            if index == 0 and after_first_shutdown is not None:
                await after_first_shutdown()
            await cluster.wait_exit(server, platform.graceful_termination + 30)
        say(f"{server.hostname}: restarting, waiting until every LB routes to it")
        await cluster.restart(server)
