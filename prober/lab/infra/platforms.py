"""The lab's platforms: `core.budgets`' table, and the `slow-lb` scenario's change to it.

A profile is data: how long the apiserver delays its shutdown and, per LB, how it
health-checks `/readyz` and what it does to established connections once a target is
unhealthy. `prober lab` turns a profile into its LBs; `scaled` shrinks every duration so a run
fits a demo.
"""

from __future__ import annotations

import dataclasses

from prober.core.budgets import (
    DEFAULT_PROXY_SYNC_DELAY,
    PLATFORMS,
    HealthCheck,
    LBProfile,
    Platform,
    build_platforms,
)
from prober.core.models import LB

__all__ = [
    "CHECK_TIMEOUT_FLOOR",
    "DEFAULT_PROXY_SYNC_DELAY",
    "PLATFORMS",
    "PROXY_SYNC_AT",
    "SLOW_INTERVAL",
    "SYNC_DELAY_FLOOR",
    "HealthCheck",
    "LBProfile",
    "Platform",
    "as_built",
    "build_platforms",
    "slow_lb",
]


# A check's timeout, however small the time scale: at 0.05, GCP's 2 s is 0.1 s, which a
# Python checker on a busy machine misses for want of a core, taking healthy servers out
# and back (flaps) that no cloud LB would. A failing /readyz answers 500 at once, so this
# changes no shutdown's detection; a vanished node's is up to this much later.
CHECK_TIMEOUT_FLOOR = 0.5
# The service network's sync delay, likewise: at 0.05 its 2 s is 0.1 s, of which the lab's own
# nft transaction on a busy machine takes a fifth or more. The lab's proxies reprogram at
# PROXY_SYNC_AT of it (`cluster.LabCluster.shutdown`), as kube-proxy does within its worst
# case, leaving the rest to that transaction.
SYNC_DELAY_FLOOR = 0.5
PROXY_SYNC_AT = 0.75
SLOW_INTERVAL = 0.6  # the slow LB checks every 0.6 x the delay: it marks down after 2.4 x


def slow_lb(
    platform: Platform, kind: LB = LB.EXTERNAL, interval: float = SLOW_INTERVAL
) -> Platform:
    """The `slow-lb` scenario: one LB whose health check needs longer than the shutdown delay
    to mark a target down, so requests reach a server that has stopped serving. `interval`:
    its check's interval and timeout, as a fraction of the delay; it needs 3 failures."""
    profile = platform.lb(kind)
    if profile.check is None:
        raise ValueError(f"{kind} has no health check to slow down")
    interval = platform.shutdown_delay * interval
    slow = dataclasses.replace(
        profile.check, interval=interval, timeout=interval, fall=3, fastinter=None
    )
    return platform.with_lb(dataclasses.replace(profile, check=slow, reset_on_down=False))


def as_built(
    platform: Platform, floor: float = CHECK_TIMEOUT_FLOOR, sync_floor: float = SYNC_DELAY_FLOOR
) -> Platform:
    """The scaled platform as the lab builds its LBs: no check times out sooner than `floor`,
    no proxy's sync delay is shorter than `sync_floor`. The daemon's budgets come from this
    too, so that they are the LBs' own, not a tighter promise that the lab never made."""
    for profile in platform.lbs:
        check = profile.check
        if check is not None and check.timeout < floor:
            check = dataclasses.replace(check, timeout=floor)
            platform = platform.with_lb(dataclasses.replace(profile, check=check))
        elif check is None and profile.sync_delay < sync_floor:
            platform = platform.with_lb(dataclasses.replace(profile, sync_delay=sync_floor))
    return platform
