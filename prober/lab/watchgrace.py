"""`prober lab --compare-watch-grace 0s,25s`: the same rollout once per watch grace period.

OpenShift set a 25 s `--shutdown-watch-termination-grace-period`, reverted it, and asks again
whether to set it (cluster-kube-apiserver-operator #1846, #1862, #2200) with no figure of what
watches see. Each run here is a whole lab run (`lab.run.run_lab`) with the apiservers' grace
set to one value, given before the time scale like `--watch-grace`, under the synthetic
informer load each lab apiserver holds, so that its drain lasts as long as thousands of
informers' would. What each run measured, per LB x protocol, comes from the daemon's event log
alone (summary.json's `watches` section, `report.results.watches`): watch ends and how, doomed
re-watches, time to re-establish, blind seconds, and the LB x protocol's requests and watch
attempts answered 429. What the servers did comes from their truth logs (`lab.infra.gracetruth`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prober.core.durations import format_go_duration
from prober.core.models import LB
from prober.core.streamkind import KindStreamId
from prober.core.watch import WATCH, WatchAttempt
from prober.lab.infra.gracetruth import ServerShutdown, server_shutdowns
from prober.lab.infra.options import LabOptions
from prober.lab.registry import SCENARIOS, misplaced
from prober.lab.run import LabError, LabResult, profile_for, run_lab
from prober.report.verdicts.analysis import RunAnalysis

REFUSED = 429  # WithRetryAfter's answer once a server no longer accepts requests


@dataclass(frozen=True, slots=True)
class StreamRow:
    """One watch stream (an LB x protocol) through one run."""

    lb: str
    protocol: str
    ends: int  # established watches that ended, but for the daemon's own stop
    hows: dict[str, int]  # those ends by how (`core.watch.END_HOWS`)
    doomed: int  # re-watches established on a server already answering shutdown=true
    reestablished: int  # ends followed by an established watch
    reestablish_p50: float | None  # seconds from an end to the next established watch
    reestablish_p99: float | None
    blind: float  # seconds the heartbeat showed the stream blind
    refused_requests: int  # this LB x protocol's request samples answered 429
    refused_watches: int  # this stream's LISTs and WATCHes answered 429


@dataclass(frozen=True, slots=True)
class GraceRun:
    grace: float  # seconds, as asked: before the time scale
    scaled: float  # what the apiservers ran with
    out: Path
    rows: tuple[StreamRow, ...]
    shutdowns: tuple[ServerShutdown, ...]
    problems: tuple[str, ...]  # what `--check` fails on in this run


@dataclass(frozen=True, slots=True)
class GraceComparison:
    platform: str
    scenario: str
    time_scale: float
    shutdown_delay: float  # seconds, scaled
    runs: tuple[GraceRun, ...]


def grace_name(grace: float) -> str:
    return f"grace-{format_go_duration(grace)}"


def check_options(options: LabOptions, graces: Sequence[float]) -> None:
    if len(set(graces)) < 2:
        raise LabError("--compare-watch-grace: give at least two different durations, e.g. 0s,25s")
    wrong = misplaced(SCENARIOS[options.scenario], {"compare_watch_grace": graces})
    if wrong is not None:
        raise LabError(wrong)
    if options.watch_grace is not None:
        raise LabError("--compare-watch-grace sets the watch grace of each run: not --watch-grace")


async def compare_watch_grace(
    options: LabOptions, graces: Sequence[float], out: Path, say: object = print
) -> tuple[GraceComparison, list[LabResult]]:
    """Run the scenario once per grace, one after another, each in `out/grace-<d>/`."""
    check_options(options, graces)
    platform = profile_for(options)
    runs, results = [], []
    for grace in graces:
        mine = dataclasses.replace(options, watch_grace=grace)
        scaled = profile_for(mine).watch_grace
        if callable(say):
            say(f"watch grace {format_go_duration(grace)} ({format_go_duration(scaled)} scaled)")
        result = await run_lab(mine, out / grace_name(grace), say)
        truths = sorted((result.out / "cluster").glob("master-*/truth.jsonl"))
        runs.append(
            GraceRun(
                grace=grace,
                scaled=scaled,
                out=result.out,
                rows=stream_rows(result.analysis),
                shutdowns=server_shutdowns(truths),
                problems=result.problems,
            )
        )
        results.append(result)
    comparison = GraceComparison(
        platform=options.platform,
        scenario=options.scenario,
        time_scale=platform.time_scale,
        shutdown_delay=platform.shutdown_delay,
        runs=tuple(runs),
    )
    return comparison, results


def stream_rows(analysis: RunAnalysis) -> tuple[StreamRow, ...]:
    """Every watch stream the run record names, in LB x protocol order, from the summary's
    watches section, the watch attempts and the request samples answered 429."""
    names = analysis.log.run.streams_of(WATCH)
    streams = sorted((KindStreamId.parse(n, WATCH) for n in names), key=lambda s: s.key)
    section = analysis.summary.get("watches", {})
    entries = {e["stream"]: e for e in section.get("streams", [])}
    samples: Counter[tuple[LB, str]] = Counter(
        (s.lb, str(s.protocol)) for s in analysis.log.samples if s.status == REFUSED and not s.held
    )
    attempts: Counter[str] = Counter(
        r.stream
        for r in analysis.replay.of_kind(WATCH)
        if isinstance(r, WatchAttempt) and r.status == REFUSED
    )
    rows = []
    for stream in streams:
        entry = entries.get(stream.name, {})
        hows = {how: n for how, n in entry.get("ends", {}).items() if how != "stopped"}
        again = entry.get("reestablish", {})
        rows.append(
            StreamRow(
                lb=str(stream.lb),
                protocol=str(stream.protocol),
                ends=sum(hows.values()),
                hows=hows,
                doomed=entry.get("doomed", 0),
                reestablished=again.get("count", 0),
                reestablish_p50=again.get("p50"),
                reestablish_p99=again.get("p99"),
                blind=entry.get("blind_seconds", 0.0),
                refused_requests=samples[(stream.lb, str(stream.protocol))],
                refused_watches=attempts[stream.name],
            )
        )
    return tuple(rows)


def to_json(comparison: GraceComparison) -> dict[str, Any]:
    document = dataclasses.asdict(comparison)
    for run in document["runs"]:
        run["out"] = str(run["out"])
        run["problems"] = list(run["problems"])
    return {"v": 1, **document}
