"""Today's sampling beside the new one, in one lab run (`prober lab --control`).

A second daemon, the control, probes the same LBs through the same shutdowns with the witness
bursts and the rising rate off (`CONTROL`), and writes its own event log. Both are held
against the same truth, and the run prints, per LB x protocol x connection and per policy,
the bound's width (p50, p90), the truths inside it, and the requests per shutdown window:
what the bursts buy and what they cost, measured on one run.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from prober.core.models import LB, Window
from prober.core.stats import percentile_cont
from prober.lab.compare import Row, ShutdownResult, compare, wall_offset
from prober.lab.daemons import Enter, start_daemon, wait_ready
from prober.lab.processes import ManagedProcess, ProcessGroup
from prober.lab.truth import LbTruth, ShutdownTruth
from prober.report.analyze import analyze_runs
from prober.report.format.tables import table
from prober.report.replay.runs import RunLog

CONTROL = "control-run"  # not `prober-run*`: no pod log a gather would collect
CONTROL_CONFIG = {"burst_parallel": 0, "rise": 1}

Key = tuple[str, str, str]  # lb, protocol, connection


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """One LB x protocol x connection under one policy, over every shutdown of the run."""

    widths: tuple[float, ...]
    inside: int
    rows: int
    requests: float  # per shutdown window

    def width(self, q: float) -> float:
        return percentile_cont(list(self.widths), q) if self.widths else math.nan


def policy_rows(
    results: Sequence[ShutdownResult], log: RunLog, tolerance: float
) -> dict[Key, PolicyRow]:
    """What one daemon's bounds were worth, and cost, per LB x protocol x connection."""
    rows: dict[Key, list[Row]] = defaultdict(list)
    for result in results:
        for row in result.rows:
            if row.truth > 0 and row.measured is not None:
                rows[(str(row.lb), row.protocol, str(row.connection))].append(row)
    requests = _window_requests(log, log.windows)
    windows = max(len(log.windows), 1)
    return {
        key: PolicyRow(
            widths=tuple(r.width for r in found if r.width is not None),
            inside=sum(1 for r in found if r.outside(tolerance) is None),
            rows=len(found),
            requests=requests[key] / windows,
        )
        for key, found in sorted(rows.items())
    }


def _window_requests(log: RunLog, windows: Sequence[Window]) -> Counter[Key]:
    """Requests sent while a window was open, per key: the event log keeps every sample then
    (`core.compaction`)."""
    counts: Counter[Key] = Counter()
    spans = [(w.first_seen_t, w.end_t) for w in windows]
    for s in log.samples:
        if any(lo <= s.t <= hi for lo, hi in spans):
            counts[(str(s.lb), str(s.protocol), str(s.connection))] += 1
    return counts


HEADERS = ["lb", "protocol", "conn", "policy", "width p50", "width p90", "inside", "req/window"]


def side_by_side(new: Mapping[Key, PolicyRow], control: Mapping[Key, PolicyRow]) -> list[str]:
    """The table of both policies, the new one's row above the control's."""
    lines: list[list[str]] = []
    for key in sorted(set(new) | set(control)):
        for name, rows in (("bursts", new), ("control", control)):
            row = rows.get(key)
            if row is None:
                lines.append([*key, name, "-", "-", "-", "-"])
                continue
            lines.append(
                [
                    *key,
                    name,
                    f"{row.width(0.5):.3f}",
                    f"{row.width(0.9):.3f}",
                    f"{row.inside}/{row.rows}",
                    f"{row.requests:.0f}",
                ]
            )
    return table(HEADERS, lines)


def totals(new: Mapping[Key, PolicyRow], control: Mapping[Key, PolicyRow]) -> str:
    """Requests per window over every stream, the new policy against the control."""
    a = sum(r.requests for r in new.values())
    b = sum(r.requests for r in control.values())
    change = f"{100 * (a / b - 1):+.1f} %" if b else "-"
    return f"requests per shutdown window: bursts {a:.0f}, control {b:.0f} ({change})"


def control_event_log(out: Path) -> Path:
    return out / "control" / "events.jsonl"


async def start_control(
    config: Mapping[str, object], group: ProcessGroup, events: Path, enter: Enter | None = None
) -> ManagedProcess:
    """The control daemon: the main one's configuration, its own event log, today's policy."""
    events.parent.mkdir(parents=True, exist_ok=True)
    path = events.parent / "prober.yaml"
    path.write_text(yaml.safe_dump({**config, **CONTROL_CONFIG}, sort_keys=False))
    control, _ = await start_daemon(group, CONTROL, path, enter=enter)
    await wait_ready(control)
    return control


def compare_control(
    events: Path,
    *,
    platform: str,
    tolerance: float,
    truth: tuple[Sequence[ShutdownTruth], Mapping[LB, LbTruth]],
    ours: tuple[Sequence[ShutdownResult], RunLog],
) -> tuple[str, ...]:
    """The control's event log against the same truth, then both policies side by side;
    `ours`: the main daemon's results and its log."""
    (control, *_), _ = analyze_runs([events], platform=platform)
    shutdowns, lbs = truth
    theirs = compare(shutdowns, control.log.windows, lbs, wall_offset(control.log))
    new = policy_rows(*ours, tolerance)
    old = policy_rows(theirs, control.log, tolerance)
    return (*side_by_side(new, old), totals(new, old))
