"""The daemon's sampling beside the control's, in one lab run: what the witness bursts and
the rising rate buy, and what they cost.

A second daemon, the control, probes the same LBs through the same shutdowns with the bursts
and the rising rate off (`CONTROL_CONFIG`), and writes its own event log (a companion of the
lab run: `prober.lab.measure.Companion`). Both are held against the same truth, and the run
prints, per LB x protocol x connection and per policy, the bound's width (p50, p90), the
truths inside it, and the requests per shutdown window, then the ratio of the two policies'
median widths and requests. Needs root (the kernel path's namespaces).

    .venv/bin/python bench/policies.py [--platform gcp] [--time-scale 0.05] [--shutdowns 1]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prober.core.models import Window  # noqa: E402
from prober.core.stats import percentile_cont  # noqa: E402
from prober.lab.infra.daemons import daemon_config, start_daemon, wait_ready  # noqa: E402
from prober.lab.infra.options import LabOptions  # noqa: E402
from prober.lab.infra.processes import ManagedProcess  # noqa: E402
from prober.lab.judges.compare import Row, ShutdownResult, compare, wall_offset  # noqa: E402
from prober.lab.measure import Stage  # noqa: E402
from prober.lab.result import Judging, LabResult  # noqa: E402
from prober.lab.run import run_lab  # noqa: E402
from prober.report.analyze import analyze_runs  # noqa: E402
from prober.report.format.tables import table  # noqa: E402
from prober.report.replay.runs import RunLog  # noqa: E402

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


@dataclass(slots=True)
class ControlDaemon:
    """The control, as a companion of a lab run: the main daemon's configuration with
    today's policy, started once the main one samples, compared after the run's checks."""

    lines: tuple[str, ...] = ()  # both policies side by side, once judged
    ratios: tuple[float, float] = (math.nan, math.nan)  # width p50 and requests: ours/control

    async def start(self, stage: Stage) -> ManagedProcess:
        events = stage.out / "control" / "events.jsonl"
        events.parent.mkdir(parents=True, exist_ok=True)
        config = daemon_config(stage.cluster, stage.options, events, heartbeat="prober-control")
        path = events.parent / "prober.yaml"
        path.write_text(yaml.safe_dump({**config, **CONTROL_CONFIG}, sort_keys=False))
        control, _ = await start_daemon(stage.group, CONTROL, path,
                                        enter=stage.cluster.enter_client)  # fmt: skip
        await wait_ready(control)
        return control

    def check(self, judging: Judging, result: LabResult) -> LabResult:
        events = judging.out / "control" / "events.jsonl"
        (control, *_), _ = analyze_runs([events], platform=judging.options.platform)
        theirs = compare(judging.shutdowns, control.log.windows, judging.lbs,
                         wall_offset(control.log))  # fmt: skip
        tolerance = judging.options.tolerance
        new = policy_rows(result.results, result.analysis.log, tolerance)
        old = policy_rows(theirs, control.log, tolerance)
        self.lines = (*side_by_side(new, old), totals(new, old))
        self.ratios = (_median_width(new) / _median_width(old), _requests(new) / _requests(old))
        return result


def _median_width(rows: Mapping[Key, PolicyRow]) -> float:
    widths = [w for row in rows.values() for w in row.widths]
    return percentile_cont(widths, 0.5) if widths else math.nan


def _requests(rows: Mapping[Key, PolicyRow]) -> float:
    return sum(r.requests for r in rows.values()) or math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", default="gcp")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--shutdowns", type=int, default=1)
    args = parser.parse_args()
    control = ControlDaemon()
    options = LabOptions(platform=args.platform, time_scale=args.time_scale,
                         shutdowns=args.shutdowns)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-policies-") as folder:
        result = asyncio.run(run_lab(options, Path(folder) / "lab", None, (control,)))
    print("\n".join(control.lines))
    width, requests = control.ratios
    print(f"median bound width, ours/control: {width:.2f}x (lower is tighter)")
    print(f"requests per shutdown window, ours/control: {requests:.2f}x")
    for problem in result.problems:
        print(f"CHECK {problem}")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
