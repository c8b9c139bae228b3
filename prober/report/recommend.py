"""A data-driven shutdown-delay-duration per platform.

The apiserver flags connections accepted after 80 % of its shutdown delay as late, and it stops
serving when the delay ends. OpenShift sized GCP's delay as `worst late arrival / 0.8 + buffer`
(cluster-kube-apiserver-operator's `observe_termination_duration.go`: late requests seen at
67 s -> 67 / 0.8 + 10 = 93.75 -> 95 s). We apply the
same rule to the measured history: worst late arrival = the P99 of the reaction over the
platform's LBs and protocols, taken separately for new and for reused connections, plus a
buffer (10 s, as GCP's), rounded up to 5 s. Only usable history (enough runs) counts.

New connections measure the LB itself: each is routed afresh, so their reaction is how long the
LB took to stop choosing the apiserver; that is the delay's job. Reused connections stay on the
apiserver they were opened to whatever the LB decides, until the apiserver closes them (HTTP/2
GOAWAY, HTTP/1.1 `Connection: close` once the delay ends), so their number says how long clients
on kept-alive connections keep arriving late, which a longer delay only partly helps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prober.core.models import Connection
from prober.core.phase import LATE_FRACTION
from prober.report.thresholds import ALL_PLATFORMS, Entry, Thresholds

# Reference section 3 (cluster-kube-apiserver-operator), seconds.
TODAY = {"aws": 129.0, "gcp": 95.0}
TODAY_DEFAULT = 70.0
DEFAULT_BUFFER = 10.0
STEP = 5.0


@dataclass(frozen=True, slots=True)
class Part:
    """The recommendation from one connection mode's worst reaction."""

    entry: Entry  # the LB x protocol whose P99 reaction is the worst
    delay: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    platform: str
    today: float
    today_source: str
    new: Part | None
    reused: Part | None
    why: str


def delay_for(worst_late: float, buffer: float = DEFAULT_BUFFER) -> float:
    """The smallest multiple of 5 s with 80 % of it at least the worst late arrival, plus buffer."""
    return math.ceil((max(worst_late, 0.0) / LATE_FRACTION + buffer) / STEP - 1e-9) * STEP


def today(platform: str) -> tuple[float, str]:
    if platform in TODAY:
        return TODAY[platform], f"OpenShift's {platform.upper()} value"
    return TODAY_DEFAULT, "OpenShift's default"


def recommend(thresholds: Thresholds, buffer: float = DEFAULT_BUFFER) -> list[Recommendation]:
    platforms = list(thresholds.platforms)
    if any(e.platform == ALL_PLATFORMS for e in thresholds.entries):
        platforms.append(ALL_PLATFORMS)
    out = []
    for platform in platforms:
        parts = {c: _part(thresholds, platform, c, buffer) for c in Connection}
        current, source = today(platform)
        new, reused = parts[Connection.NEW], parts[Connection.REUSED]
        why = _why(thresholds, platform, current, new, reused)
        out.append(Recommendation(platform, current, source, new, reused, why))
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


def _why(
    thresholds: Thresholds, platform: str, current: float, new: Part | None, reused: Part | None
) -> str:
    if new is None:
        runs = max((e.runs for e in thresholds.entries if e.platform == platform), default=0)
        return (
            f"not enough history: at most {runs} runs per key, fewer than the thresholds' minimum"
        )
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
    if reused is not None and reused.delay > new.delay:
        why += (
            f"; reused connections stay on the old apiserver longer (P99 {reused.entry.p99:.1f} s"
            f", {reused.delay:.0f} s to cover), until it closes them"
        )
    return why
