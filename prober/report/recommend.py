"""A data-driven shutdown-delay-duration per platform.

The apiserver flags connections accepted after 80 % of its shutdown delay as late, and it stops
serving when the delay ends. OpenShift sized GCP's delay as `worst late arrival / 0.8 + buffer`
(cluster-kube-apiserver-operator's `observe_termination_duration.go`: late requests seen at
67 s -> 67 / 0.8 + 10 = 93.75 -> 95 s). We apply the
same rule to the measured history: worst late arrival = the P99 of the reaction over the
platform's LBs and protocols, taken separately for new and for reused connections, plus a
buffer (10 s, as GCP's), rounded up to 5 s. Only usable history (enough runs) counts.

While the history is thin (no usable key for a platform), the platform's own LB settings are
the prior (`core.budgets`): the slowest LB's worst case to stop routing new connections stands
in for the worst late arrival, and the recommendation says so. Once history is usable it
decides, and a P99 over that worst case is named: an LB slower than its settings promise.

New connections measure the LB itself: each is routed afresh, so their reaction is how long the
LB took to stop choosing the apiserver; that is the delay's job. Reused connections stay on the
apiserver they were opened to whatever the LB decides, until the apiserver closes them (HTTP/2
GOAWAY, HTTP/1.1 `Connection: close` once the delay ends), so their number says how long clients
on kept-alive connections keep arriving late, which a longer delay only partly helps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prober.core.budgets import DEFAULT_SHUTDOWN_DELAY, PLATFORMS
from prober.core.models import LB, Connection
from prober.core.phase import LATE_FRACTION
from prober.report.budget_verdicts import budget_of
from prober.report.threshold_rows import Entry
from prober.report.thresholds import ALL_PLATFORMS, Thresholds

DEFAULT_BUFFER = 10.0
STEP = 5.0


@dataclass(frozen=True, slots=True)
class Part:
    """The recommendation from one connection mode's worst reaction."""

    entry: Entry  # the LB x protocol whose P99 reaction is the worst
    delay: float


@dataclass(frozen=True, slots=True)
class Prior:
    """The recommendation from the platform's LB settings: what stands in while the history
    is thin. `budget` is the slowest LB's worst case to stop routing new connections."""

    lb: LB
    budget: float
    how: str  # the settings that give it, in words
    delay: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    platform: str
    today: float
    today_source: str
    new: Part | None
    reused: Part | None
    why: str
    prior: Prior | None = None  # None: a platform the LB table does not know

    @property
    def delay(self) -> float | None:
        """What is recommended: the history's, or the prior's while the history is thin."""
        if self.new is not None:
            return self.new.delay
        return None if self.prior is None else self.prior.delay


def delay_for(worst_late: float, buffer: float = DEFAULT_BUFFER) -> float:
    """The smallest multiple of 5 s with 80 % of it at least the worst late arrival, plus buffer."""
    return math.ceil((max(worst_late, 0.0) / LATE_FRACTION + buffer) / STEP - 1e-9) * STEP


def today(platform: str) -> tuple[float, str]:
    """OpenShift's shutdown delay for the platform (cluster-kube-apiserver-operator)."""
    known = PLATFORMS.get(platform)
    if known is None or known.shutdown_delay == DEFAULT_SHUTDOWN_DELAY:
        return DEFAULT_SHUTDOWN_DELAY, "OpenShift's default"
    return known.shutdown_delay, f"OpenShift's {platform.upper()} value"


def prior(platform: str, buffer: float = DEFAULT_BUFFER) -> Prior | None:
    """What the platform's LB settings ask for: the slowest LB's worst case to stop routing
    new connections, as the worst late arrival; None for a platform the table lacks."""
    known = PLATFORMS.get(platform)
    if known is None:
        return None
    budgets = [(*budget_of(known, p.lb, Connection.NEW), p.lb) for p in known.lbs]
    budget, how, lb = max(budgets, key=lambda b: b[0])
    return Prior(lb, budget, how, delay_for(budget, buffer))


def recommend(thresholds: Thresholds, buffer: float = DEFAULT_BUFFER) -> list[Recommendation]:
    platforms = list(thresholds.platforms)
    if any(e.platform == ALL_PLATFORMS for e in thresholds.entries):
        platforms.append(ALL_PLATFORMS)
    out = []
    for platform in platforms:
        parts = {c: _part(thresholds, platform, c, buffer) for c in Connection}
        current, source = today(platform)
        new, reused = parts[Connection.NEW], parts[Connection.REUSED]
        settings = prior(platform, buffer)
        why = (
            _thin(thresholds, platform, settings)
            if new is None
            else _why(current, new, reused, settings)
        )
        out.append(Recommendation(platform, current, source, new, reused, why, settings))
    return out


def _part(
    thresholds: Thresholds, platform: str, connection: Connection, buffer: float
) -> Part | None:
    usable = [
        e
        for e in thresholds.entries
        if e.platform == platform
        and e.metric == "reaction"
        and e.connection is connection
        and e.usable
    ]
    if not usable:
        return None
    worst = max(usable, key=lambda e: e.p99)
    return Part(worst, delay_for(worst.p99, buffer))


def _thin(thresholds: Thresholds, platform: str, settings: Prior | None) -> str:
    runs = max((e.runs for e in thresholds.entries if e.platform == platform), default=0)
    thin = f"not enough history: at most {runs} runs per key, fewer than the thresholds' minimum"
    if settings is None:
        return f"{thin}; no LB settings known for {platform!r} to stand in"
    return (
        f"{thin}; from the LB settings instead, until the history is usable: the slowest "
        f"LB, {settings.lb}, stops routing to a not-ready apiserver within "
        f"{settings.budget:g} s at worst ({settings.how}), which needs {settings.delay:.0f} s"
    )


def _why(current: float, new: Part, reused: Part | None, settings: Prior | None) -> str:
    e = new.entry
    worst = f"P99 new-connection reaction {e.p99:.1f} s ({e.lb} {e.protocol}, {e.runs} runs)"
    if new.delay < current:
        why = (
            f"{worst} needs {new.delay:.0f} s: today's {current:.0f} s makes every apiserver "
            f"shutdown {current - new.delay:.0f} s longer than the LBs need"
        )
    elif new.delay > current:
        why = (
            f"{worst} does not fit today's {current:.0f} s: requests still arrive after 80 % of "
            f"it ({LATE_FRACTION * current:.0f} s), where the apiserver calls them late, with "
            "less than the buffer left before it stops serving"
        )
    else:
        why = f"{worst}: today's value is what the data asks for"
    if settings is not None and e.p99 > settings.budget:
        why += (
            f"; over the {settings.budget:g} s its LB settings promise at worst ({settings.lb}):"
            " an LB is slower than its health checks say"
        )
    if reused is not None and reused.delay > new.delay:
        why += (
            f"; reused connections stay on the old apiserver longer (P99 {reused.entry.p99:.1f} s"
            f", {reused.delay:.0f} s to cover), until it closes them"
        )
    return why
