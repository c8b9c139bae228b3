"""What each platform's load balancers promise: one table, with where each figure comes from.

Per platform, the apiserver's shutdown delay and graceful termination
(cluster-kube-apiserver-operator), and per LB how it health-checks `/readyz` and what it does
to established connections once a target is unhealthy (installer, MCO, the clouds' own
defaults). From the table, per LB, a worst case to stop routing to a backend whose `/readyz`
went false, a worst case to add one back once it passes again, and the budget of a kept
connection. `prober lab` builds its LBs from this table; `prober analyze` judges against it,
with a platform's own LB settings taken from the config where it has them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from prober.core.models import LB, CheckSettings, LBSettings

DEFAULT_PROXY_SYNC_DELAY = 2.0  # kube-proxy / OVN reprogramming after an endpoint change
# cluster-kube-apiserver-operator bindata/assets/config/defaultconfig.yaml: every platform
# the operator does not name has these.
DEFAULT_SHUTDOWN_DELAY = 70.0
DEFAULT_GRACEFUL_TERMINATION = 135.0


class Flows(StrEnum):
    """What an LB does to established connections to a target it marked down."""

    RESET = "reset"  # it resets them (AWS NLB's connection termination, HAProxy's
    # `on-marked-down shutdown-sessions`): their budget is the deregistration
    KEPT = "kept"  # they stay on the target until it closes them: the delay and the drain
    CONNTRACK = "conntrack"  # no LB: a node's conntrack keeps them, as KEPT


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """An LB's `/readyz` probe, in HAProxy's terms."""

    interval: float
    timeout: float
    fall: int  # consecutive failures before the target is marked down (unhealthy threshold)
    rise: int  # consecutive successes before it is marked up again (healthy threshold)
    tls: bool = True  # HTTPS to the apiserver port; False: plain HTTP to the health port
    fastinter: float | None = None  # interval while a state change is in progress

    def scaled(self, factor: float) -> HealthCheck:
        fast = None if self.fastinter is None else self.fastinter * factor
        return dataclasses.replace(
            self, interval=self.interval * factor, timeout=self.timeout * factor, fastinter=fast
        )

    @property
    def step(self) -> float:
        return self.fastinter if self.fastinter is not None else self.interval

    @property
    def worst_detection(self) -> float:
        """Longest time from `/readyz` failing to the target being marked down: up to an
        interval until the first failing check, `fall - 1` more, the last one timing out."""
        return self.interval + (self.fall - 1) * self.step + self.timeout

    @property
    def worst_add_back(self) -> float:
        """Longest time from `/readyz` passing to the target being marked up again."""
        return self.interval + (self.rise - 1) * self.step + self.timeout


@dataclass(frozen=True, slots=True)
class LBProfile:
    lb: LB
    check: HealthCheck | None  # None: no health check, membership is managed (service network)
    reset_on_down: bool = False  # reset established connections when a target goes down
    slowstart: float | None = None
    sync_delay: float = 0.0  # managed membership: removal takes effect after this
    # From a master, a request to this LB's address never reaches the LB: the master answers
    # it itself, whatever the LB's health (`core.samenode`). So a master-side prober's
    # requests through it measure the master's own apiserver, not the LB.
    hairpin: bool = False

    def scaled(self, factor: float) -> LBProfile:
        check = None if self.check is None else self.check.scaled(factor)
        slow = None if self.slowstart is None else self.slowstart * factor
        return dataclasses.replace(
            self, check=check, slowstart=slow, sync_delay=self.sync_delay * factor
        )

    @property
    def flows(self) -> Flows:
        if self.check is None:
            return Flows.CONNTRACK
        return Flows.RESET if self.reset_on_down else Flows.KEPT

    @property
    def stop_routing(self) -> float:
        """The worst case to stop sending new connections to a target whose `/readyz` went
        false: its health check's detection, or a managed membership's sync delay (the
        apiserver takes its own endpoint out at T0)."""
        return self.sync_delay if self.check is None else self.check.worst_detection

    @property
    def add_back(self) -> float:
        """The worst case to send new connections to a target again once it is ready."""
        return self.sync_delay if self.check is None else self.check.worst_add_back


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

    def kept_budget(self, kind: LB) -> float:
        """How long a connection made before T0 may still reach the old server through this
        LB: until the LB resets it, or, where flows are kept, until the server closes it at
        the end of its delay and drain (graceful termination)."""
        profile = self.lb(kind)
        if profile.flows is Flows.RESET:
            return profile.stop_routing
        return self.graceful_termination


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
    # installer pkg/asset/manifests/aws + docs/dev/kube-apiserver-health-check.md: NLB target
    # groups, HTTPS /readyz, 10 s interval, 10 s timeout, 2 unhealthy / 2 healthy (30 s named
    # as the removal worst case); connection termination on deregistration (on by default).
    aws = HealthCheck(interval=10, timeout=10, fall=2, rise=2)
    # installer pkg/asset/manifests/gcp + cluster-api-provider-gcp: HTTPS /readyz :6443, 2 s,
    # 2 s, 3 / 3; backends keep established flows when unhealthy.
    gcp = HealthCheck(interval=2, timeout=2, fall=3, rise=3)
    gcp_external = dataclasses.replace(gcp, tls=False)  # HTTP :6080 /readyz (installer)
    # installer pkg/asset/manifests/azure: probe HTTPS /readyz :6443, 5 s, 2 probes;
    # Azure LB leaves existing flows alone.
    azure = HealthCheck(interval=5, timeout=5, fall=2, rise=2)
    # Bare metal: the MCO's HAProxy on the masters, newer template
    # (machine-config-operator templates/master/00-master/on-prem/files/haproxy.yaml):
    # `inter 5s fastinter 2s fall 2 rise 3 slowstart 60s on-marked-down shutdown-sessions`,
    # `timeout check 10s`.
    metal = HealthCheck(interval=5, timeout=10, fall=2, rise=3, fastinter=2)
    # Platform none: a user-provided HAProxy as OpenShift's UPI documentation configures it
    # (openshift-docs modules/installation-load-balancing-user-infra.adoc).
    none = HealthCheck(interval=10, timeout=10, fall=2, rise=3)
    svc = _service_network(sync_delay)
    # GCP's passthrough LBs keep the VIP as the destination, so a backend must take the VIP as
    # its own: the guest agent routes it locally, and OpenShift's gcp-routes DNATs it to the
    # local apiserver (machine-config-operator's openshift-gcp-routes.sh and
    # cmd/apiserver-watcher/README.md). A master reaching api-int is answered by its own
    # apiserver whatever the LB's health (OCPBUGS-100298, openshift/origin #31466,
    # cluster-api-provider-gcp #1407; `../shared/reference.md` section 12). gcp-routes can
    # withdraw the internal VIP while the local apiserver is down (the apiserver-watcher's
    # downfile), which the table does not model.
    gcp_lbs = _cloud(gcp, reset=False, external=gcp_external)
    gcp_lbs = tuple(dataclasses.replace(p, hairpin=p.lb is LB.INTERNAL) for p in gcp_lbs)
    metal_lbs = tuple(dataclasses.replace(p, slowstart=60.0) for p in _cloud(metal, reset=True))
    # Delays: cluster-kube-apiserver-operator observe_termination_duration.go and
    # bindata/assets/config/defaultconfig.yaml (`../shared/reference.md` section 3).
    default = (DEFAULT_SHUTDOWN_DELAY, DEFAULT_GRACEFUL_TERMINATION)
    return {
        "aws": Platform("aws", 129, 194, (*_cloud(aws, reset=True), svc)),
        "gcp": Platform("gcp", 95, 160, (*gcp_lbs, svc)),
        "azure": Platform("azure", *default, (*_cloud(azure, reset=False), svc)),
        "metal": Platform("metal", *default, (*metal_lbs, svc)),
        "none": Platform("none", *default, (*_cloud(none, reset=False), svc)),
    }


PLATFORMS = build_platforms()


def with_settings(platform: Platform, settings: LBSettings | None) -> Platform:
    """The platform's row with a cluster's own settings laid over it."""
    if settings is None:
        return platform
    delay = settings.shutdown_delay
    grace = settings.graceful_termination
    changed = dataclasses.replace(
        platform,
        shutdown_delay=platform.shutdown_delay if delay is None else delay,
        graceful_termination=platform.graceful_termination if grace is None else grace,
    )
    for kind, check in settings.lbs.items():
        changed = changed.with_lb(_with_check(changed.lb(kind), check))
    return changed


def _with_check(profile: LBProfile, given: CheckSettings) -> LBProfile:
    reset = profile.reset_on_down
    if given.connections is not None:
        reset = Flows(given.connections) is Flows.RESET
    sync = profile.sync_delay if given.sync_delay is None else given.sync_delay
    hairpin = profile.hairpin if given.hairpin is None else given.hairpin
    if profile.check is None:
        return dataclasses.replace(profile, reset_on_down=reset, sync_delay=sync, hairpin=hairpin)
    c = profile.check
    fast = c.fastinter if given.interval in (None, c.interval) else None
    check = dataclasses.replace(
        c,
        interval=c.interval if given.interval is None else given.interval,
        timeout=c.timeout if given.timeout is None else given.timeout,
        fall=c.fall if given.unhealthy is None else given.unhealthy,
        rise=c.rise if given.healthy is None else given.healthy,
        fastinter=fast if given.fastinter is None else given.fastinter,
    )
    return dataclasses.replace(
        profile, check=check, reset_on_down=reset, sync_delay=sync, hairpin=hairpin
    )


def settings_of(platform: Platform) -> LBSettings:
    """A platform written out in full as settings (the lab gives its daemon its own)."""
    lbs = {}
    for p in platform.lbs:
        flows = str(Flows.RESET if p.reset_on_down else Flows.KEPT)
        c = p.check
        lbs[p.lb] = (
            CheckSettings(connections=flows, sync_delay=p.sync_delay, hairpin=p.hairpin)
            if c is None
            else CheckSettings(
                c.interval, c.timeout, c.fall, c.rise, flows, c.fastinter, hairpin=p.hairpin
            )
        )
    return LBSettings(platform.shutdown_delay, platform.graceful_termination, lbs)


def hairpins(platform: str, settings: LBSettings | None) -> frozenset[LB]:
    """The LBs that hairpin from a master (`LBProfile.hairpin`): the platform's row with the
    cluster's own settings laid over it; a platform with no row, only what they say."""
    row = PLATFORMS.get(platform)
    if row is not None:
        return frozenset(p.lb for p in with_settings(row, settings).lbs if p.hairpin)
    given = settings.lbs.items() if settings is not None else ()
    return frozenset(lb for lb, check in given if check.hairpin)


def slow_starts(platform: str, settings: LBSettings | None) -> frozenset[LB]:
    """The LBs that ramp a server taken back up slowly (HAProxy's `slowstart`): a fresh
    connection sent elsewhere just after such an LB took a server back is no miss of a
    balanced rotation (`core.instances`). A platform with no row: none known."""
    row = PLATFORMS.get(platform)
    if row is None:
        return frozenset()
    return frozenset(p.lb for p in with_settings(row, settings).lbs if p.slowstart)
