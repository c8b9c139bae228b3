"""Each platform's shutdown window and load balancers, as the clouds and the operator set them.

A profile is data: how long the apiserver delays its shutdown (cluster-kube-apiserver-operator's
per-platform values) and, per LB, how it health-checks `/readyz` and what it does to established
connections once a target is unhealthy (OpenShift installer / MCO settings). `prober lab` turns a
profile into HAProxy configurations; `scaled` shrinks every duration so a run fits a demo.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from prober.core.models import LB

DEFAULT_PROXY_SYNC_DELAY = 2.0  # kube-proxy / OVN reprogramming after an endpoint change


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """An LB's `/readyz` probe, in HAProxy's terms."""

    interval: float
    timeout: float
    fall: int  # consecutive failures before the target is marked down
    rise: int  # consecutive successes before it is marked up again
    tls: bool = True  # HTTPS to the apiserver port; False: plain HTTP to the health port
    fastinter: float | None = None  # interval while a state change is in progress

    def scaled(self, factor: float) -> HealthCheck:
        fast = None if self.fastinter is None else self.fastinter * factor
        return dataclasses.replace(
            self, interval=self.interval * factor, timeout=self.timeout * factor, fastinter=fast
        )

    @property
    def worst_detection(self) -> float:
        """Longest time from `/readyz` failing to the target being marked down."""
        step = self.fastinter if self.fastinter is not None else self.interval
        return self.interval + (self.fall - 1) * step + self.timeout


@dataclass(frozen=True, slots=True)
class LBProfile:
    lb: LB
    check: HealthCheck | None  # None: no health check, membership is managed (service network)
    reset_on_down: bool = False  # reset established connections when a target goes down
    slowstart: float | None = None
    sync_delay: float = 0.0  # managed membership: removal takes effect after this

    def scaled(self, factor: float) -> LBProfile:
        check = None if self.check is None else self.check.scaled(factor)
        slow = None if self.slowstart is None else self.slowstart * factor
        return dataclasses.replace(
            self, check=check, slowstart=slow, sync_delay=self.sync_delay * factor
        )


@dataclass(frozen=True, slots=True)
class Platform:
    name: str
    shutdown_delay: float
    graceful_termination: float
    lbs: tuple[LBProfile, ...]
    time_scale: float = 1.0
    watch_grace: float = 0.0  # --shutdown-watch-termination-grace-period (upstream: 0 s)

    def scaled(self, factor: float) -> Platform:
        return dataclasses.replace(
            self,
            shutdown_delay=self.shutdown_delay * factor,
            graceful_termination=self.graceful_termination * factor,
            lbs=tuple(lb.scaled(factor) for lb in self.lbs),
            time_scale=self.time_scale * factor,
            watch_grace=self.watch_grace * factor,
        )

    def lb(self, kind: LB) -> LBProfile:
        for profile in self.lbs:
            if profile.lb is kind:
                return profile
        raise KeyError(f"platform {self.name} has no {kind}")

    def with_lb(self, profile: LBProfile) -> Platform:
        lbs = tuple(profile if p.lb is profile.lb else p for p in self.lbs)
        return dataclasses.replace(self, lbs=lbs)


def _service_network(sync_delay: float) -> LBProfile:
    # No health check: the apiserver removes its own endpoint at shutdown start; each node's
    # proxy reprograms after its sync delay; conntrack keeps established flows on the old target.
    return LBProfile(LB.SERVICE_NETWORK, check=None, sync_delay=sync_delay)


def _cloud(
    check: HealthCheck, *, reset: bool, external: HealthCheck | None = None
) -> tuple[LBProfile, ...]:
    return (
        LBProfile(LB.EXTERNAL, external or check, reset_on_down=reset),
        LBProfile(LB.INTERNAL, check, reset_on_down=reset),
    )


def build_platforms(sync_delay: float = DEFAULT_PROXY_SYNC_DELAY) -> dict[str, Platform]:
    aws = HealthCheck(interval=10, timeout=10, fall=2, rise=2)
    gcp = HealthCheck(interval=2, timeout=2, fall=3, rise=3)
    gcp_external = dataclasses.replace(gcp, tls=False)  # HTTP :6080 /readyz
    azure = HealthCheck(interval=5, timeout=5, fall=2, rise=2)
    # Bare metal: the MCO's HAProxy on the masters, newer template.
    metal = HealthCheck(interval=5, timeout=10, fall=2, rise=3, fastinter=2)
    # Platform none: a user-provided HAProxy as OpenShift's UPI documentation configures it.
    none = HealthCheck(interval=10, timeout=10, fall=2, rise=3)
    svc = _service_network(sync_delay)
    metal_lbs = tuple(dataclasses.replace(p, slowstart=60.0) for p in _cloud(metal, reset=True))
    return {
        "aws": Platform("aws", 129, 194, (*_cloud(aws, reset=True), svc)),
        "gcp": Platform("gcp", 95, 160, (*_cloud(gcp, reset=False, external=gcp_external), svc)),
        "azure": Platform("azure", 70, 135, (*_cloud(azure, reset=False), svc)),
        "metal": Platform("metal", 70, 135, (*metal_lbs, svc)),
        "none": Platform("none", 70, 135, (*_cloud(none, reset=False), svc)),
    }


PLATFORMS = build_platforms()


def slow_lb(platform: Platform, kind: LB = LB.EXTERNAL) -> Platform:
    """The `slow-lb` scenario: one LB whose health check needs longer than the shutdown delay
    to mark a target down, so requests reach a server that has stopped serving."""
    profile = platform.lb(kind)
    assert profile.check is not None
    interval = platform.shutdown_delay * 0.6
    slow = dataclasses.replace(
        profile.check, interval=interval, timeout=interval, fall=3, fastinter=None
    )
    return platform.with_lb(dataclasses.replace(profile, check=slow, reset_on_down=False))
