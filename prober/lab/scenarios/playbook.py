"""What the lab does to its apiservers, one after another: the scenarios' playbook, one
take-down step per way an apiserver goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from prober.core.durations import format_go_duration
from prober.lab.infra.cluster import Apiserver, LabCluster
from prober.lab.infra.daemons import REQUEST_TIMEOUT, http2_dead_after
from prober.lab.infra.gracetruth import server_shutdowns
from prober.lab.infra.instances import read_instances

ENDPOINT_TTL = 15.0  # the kubernetes endpoint reconciler's lease, before scaling
OUTAGE = REQUEST_TIMEOUT + 2.0  # node-loss: the least time a node stays gone
OUTLAST = 2.0  # node-loss: seconds a node stays gone past the HTTP/2 health check's verdict
CLOSE_WINDOW = 2.0  # after the last restart: its first answers close the server's window
RETRY_AFTER = 5.0  # the apiserver's Retry-After on its 429s: upstream's, never scaled
# early-ready: how long a restarted apiserver's /readyz says ok before it can serve, before
# scaling. Past every platform's worst add-back (AWS NLB: 10 s x 2 checks + a 10 s timeout),
# so that every LB takes it back and sends it requests it cannot serve, as the bug's did.
EARLY_FOR = 60.0
# early-ready: seconds (never scaled) the next shutdown waits after the instance serves, so
# that requests it answered, not its early failures, bound the next shutdown's T0 from below.
SERVED_BEFORE_NEXT = 1.0
EARLY_ANSWERS = ("500", "403", "hang")


def early_flags(seconds: float, answer: str) -> tuple[str, ...]:
    """The apiserver flags of a restart in the early-ready mode (`LabCluster.restart_flags`)."""
    return ("--early-ready-duration", format_go_duration(seconds), "--early-ready-answer", answer)


def outage(time_scale: float) -> float:
    """How long a lost node stays gone: past the daemon's request timeout, so that a request
    sent as the node vanished hangs until it (a SYN's retransmissions would reach a node back
    sooner), and past client-go's HTTP/2 health check (read-idle, then the ping's timeout),
    so that a watch on a silent HTTP/2 connection is dropped while the node is still gone
    and the heartbeat measures how long each protocol's watches were blind."""
    return max(OUTAGE, http2_dead_after(time_scale) + OUTLAST)


Say = Callable[[str], None]
Hook = Callable[[], Awaitable[None]]
# What a scenario does to one apiserver: take it down and bring it back, every LB routing to
# it again before the next; the hook runs once the first shutdown began (`--evict`).
TakeDown = Callable[[LabCluster, Apiserver, Say, Hook | None], Awaitable[None]]


async def play(
    cluster: LabCluster,
    take_down: TakeDown,
    shutdowns: int | None,
    say: Say,
    after_first_shutdown: Hook | None = None,
) -> None:
    """Take the first `shutdowns` apiservers (all: None) down in turn, each back before the
    next."""
    for index, server in enumerate(cluster.apiservers[:shutdowns]):
        await take_down(cluster, server, say, after_first_shutdown if index == 0 else None)


async def sigterm(cluster: LabCluster, server: Apiserver, say: Say, hook: Hook | None) -> None:
    """A graceful shutdown, as a rollout makes it: the shutdown delay, then the exit."""
    platform = cluster.platform
    say(f"{server.hostname}: SIGTERM (shutdown delay {platform.shutdown_delay:.1f} s)")
    await cluster.shutdown(server)
    if hook is not None:
        await hook()
    await cluster.wait_exit(server, platform.graceful_termination + 30)
    say(f"{server.hostname}: restarting, waiting until every LB routes to it")
    await cluster.restart(server)


async def sigterm_early_ready(
    cluster: LabCluster, server: Apiserver, say: Say, hook: Hook | None
) -> None:
    """A graceful shutdown, and back means able to serve too: the restarted instance says
    ready before it can (`early_flags`)."""
    await sigterm(cluster, server, say, hook)
    await until_serving(server, say)


async def sigkill(cluster: LabCluster, server: Apiserver, say: Say, hook: Hook | None) -> None:
    """A crash: no delay, no drain; the LBs find out by their health checks."""
    say(f"{server.hostname}: SIGKILL")
    await cluster.kill(server, ENDPOINT_TTL * cluster.platform.time_scale)
    await cluster.wait_exit(server, 10)
    await cluster.until_marked_down(server.hostname)
    say(f"{server.hostname}: restarting, waiting until every LB routes to it")
    await cluster.restart(server)


async def vanish(cluster: LabCluster, server: Apiserver, say: Say, hook: Hook | None) -> None:
    """A node lost: every packet to and from it dropped, long enough for every client's
    timeouts (`outage`), then back."""
    scale = cluster.platform.time_scale
    gone = outage(scale)
    say(f"{server.hostname}: the node vanishes for {gone:.1f} s (every packet dropped)")
    lost = await cluster.lose(server, ENDPOINT_TTL * scale)
    await cluster.until_marked_down(server.hostname)
    await cluster.settle()  # and its endpoint gone from the service network
    await asyncio.sleep(max(0.0, lost + gone - time.time()))
    say(f"{server.hostname}: the node is back, waiting until every LB routes to it")
    await cluster.restore(server)


async def until_serving(server: Apiserver, say: Callable[[str], None]) -> None:
    """Until the restarted instance can serve, from its truth (ready, and how long after it
    serves), and a second more: the next shutdown then starts after, so that no failure has
    two causes."""
    latest = read_instances(server.truth_path)[-1]
    if latest.ready is None:
        return
    left = latest.ready + latest.early_ready - time.time()
    say(f"{server.hostname}: routed to, and it cannot serve for {max(left, 0.0):.1f} s more")
    await asyncio.sleep(max(0.0, left) + SERVED_BEFORE_NEXT)


async def wind_down(cluster: LabCluster) -> None:
    """After the scenario, before the daemon stops: long enough for the restarted server's
    first answers to close its window and, where a server answered 429 with Retry-After
    while it drained, for client-go's retry of the last of them to be sampled, so that what
    a client felt of it is known (`core.perceived`), not cut off by the run's end."""
    paths = [server.truth_path for server in cluster.apiservers]
    told = any(shutdown.refused for shutdown in server_shutdowns(paths))
    told |= not cluster.backend.counts_refusals  # upstream's may have: allow for them
    await asyncio.sleep(CLOSE_WINDOW + (RETRY_AFTER + 1.0 if told else 0.0))
