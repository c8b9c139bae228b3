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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.budgets import DEFAULT_SHUTDOWN_DELAY, PLATFORMS
from prober.core.models import LB, Connection
from prober.core.phase import LATE_FRACTION
from prober.report.format.tables import table
from prober.report.history.threshold_rows import ALL_PLATFORMS, Entry
from prober.report.history.thresholds import Thresholds, load_thresholds
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import write_json
from prober.report.schema.types import RecommendationPart, RecommendationsDocument
from prober.report.verdicts.budget_verdicts import budget_of

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


def recommend_command(
    thresholds_path: Path,
    *,
    platform: str | None,
    buffer: float,
    out: Path | None,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    thresholds = load_thresholds(thresholds_path)
    if not any(e.metric == "reaction" for e in thresholds.entries):
        raise BadInput(f"{thresholds_path}: no reaction entries to recommend from")
    found = recommend(thresholds, buffer)
    if platform is not None:
        found = [r for r in found if r.platform == platform.lower()]
        if not found:
            raise BadInput(
                f"{thresholds_path}: no history for platform {platform!r} (it has "
                f"{', '.join(thresholds.platforms) or 'nothing'})"
            )
    written = None
    if out is not None:
        written = out / "recommendations.json"
        with writing(written):
            out.mkdir(parents=True, exist_ok=True)
            write_json(written, _recommend_document(found, buffer))
    rows = [
        [
            r.platform,
            _p99(r.new),
            _delay(r.new)
            if r.new is not None or r.prior is None
            else f"{r.prior.delay:.0f} s (LB settings)",
            _p99(r.reused),
            _delay(r.reused),
            f"{r.today:.0f} s ({r.today_source})",
        ]
        for r in found
    ]
    headers = [
        "platform",
        "P99 reaction, new",
        "recommended",
        "P99 reaction, reused",
        "recommended (reused)",
        "today",
    ]
    print(
        f"shutdown-delay-duration = worst late arrival / 0.8 + {buffer:g} s buffer, "
        "rounded up to 5 s",
        file=stdout,
    )
    print("\n".join(table(headers, rows)), file=stdout)
    for r in found:
        print(f"{r.platform}: {r.why}", file=stdout)
    if written is not None:
        print(f"\nwrote {written}", file=stdout)
    return ExitCode.OK


def _p99(part: Part | None) -> str:
    if part is None:
        return "-"
    return f"{part.entry.p99:.1f} s ({part.entry.lb} {part.entry.protocol})"


def _delay(part: Part | None) -> str:
    return "-" if part is None else f"{part.delay:.0f} s"


def _recommend_document(found: Sequence[Recommendation], buffer: float) -> RecommendationsDocument:
    def part(p: Part | None) -> RecommendationPart | None:
        if p is None:
            return None
        e = p.entry
        return {
            "p99": e.p99,
            "lb": e.lb.value,
            "protocol": e.protocol.value,
            "runs": e.runs,
            "delay": p.delay,
        }

    return {
        "v": 1,
        "rule": "delay >= p99 reaction / 0.8 + buffer, rounded up to 5 s",
        "buffer": buffer,
        "platforms": [
            {
                "platform": r.platform,
                "today": r.today,
                "new": part(r.new),
                "reused": part(r.reused),
                "prior": None
                if r.prior is None
                else {
                    "lb": r.prior.lb.value,
                    "budget": r.prior.budget,
                    "delay": r.prior.delay,
                },
                "recommended": r.delay,
                "why": r.why,
            }
            for r in found
        ],
    }
