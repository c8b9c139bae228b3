"""What each prober container of an upgrade lab measured, against what a gather could read.

What a container measured comes from the lab's own copy of its stdout (`logs/`), which no
cluster keeps; what survived is what `gathered/` holds of the same run (the run id of the
container's run record). A window is the same window when its apiserver and T0 are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.lab.infra.truth import ShutdownTruth
from prober.lab.judges.compare import compare, wall_offset
from prober.lab.scenarios.upgrade import Pod, Workload
from prober.report.analyze import analyze_runs
from prober.report.verdicts.analysis import RunAnalysis


@dataclass(frozen=True, slots=True)
class ContainerFate:
    pod: str
    workload: Workload
    stdout: str  # event_log_stdout
    container: int  # restart count
    fate: str
    written: int  # bytes written to its container log
    rotations: int
    measured: int  # shutdown windows it measured
    gathered: int  # of those, found in what the gather read

    @property
    def lost(self) -> int:
        return self.measured - self.gathered


HEADERS = ["pod", "workload", "stdout", "container", "fate", "log bytes", "rotations"]
HEADERS += ["windows measured", "gathered"]


def survival(
    pods: Sequence[Pod], log_dir: Path, gathered: Sequence[RunAnalysis]
) -> list[ContainerFate]:
    found = {a.log.run.run_id: _windows(a) for a in gathered}
    fates = []
    for pod in pods:
        for index, name in enumerate(pod.containers):
            analyses, _ = analyze_runs([log_dir / f"{name}.stdout.log"], pod_logs=True)
            measured = set().union(*(_windows(a) for a in analyses))
            kept = set().union(*(found.get(a.log.run.run_id, set()) for a in analyses))
            log = pod.logs.written_by(index)
            fates.append(
                ContainerFate(
                    pod=pod.name,
                    workload=pod.workload,
                    stdout=pod.spec.stdout,
                    container=index,
                    fate=_fate(pod, index),
                    written=log.written,
                    rotations=log.rotations,
                    measured=len(measured),
                    gathered=len(measured & kept),
                )
            )
    return fates


def _windows(analysis: RunAnalysis) -> set[tuple[str, float]]:
    return {(w.host, round(w.t0, 3)) for w in analysis.replay.windows}


def _fate(pod: Pod, index: int) -> str:
    last = len(pod.containers) - 1
    if pod.deleted:
        return "pod deleted by a drain"
    if index == last:
        return "ran to the end (oc logs)"
    if index == last - 1:
        return "stopped by a reboot (oc logs --previous)"
    return "stopped by an earlier reboot (no log left)"


def problems(fates: Sequence[ContainerFate]) -> list[str]:
    """The design's claim: a DaemonSet's pod loses no window to a drain, a reboot or a
    rotation (the Deployment beside it is there to show what it would lose)."""
    return [
        f"{f.pod} container {f.container}: {f.lost} of its {f.measured} shutdown windows are "
        f"not in what a gather could read ({f.fate}, {f.rotations} log rotations)"
        for f in fates
        if f.workload == "DaemonSet" and f.lost
    ]


def rows(fates: Sequence[ContainerFate]) -> list[list[str]]:
    return [
        [
            f.pod,
            f.workload,
            f.stdout,
            str(f.container),
            f.fate,
            str(f.written),
            str(f.rotations),
            str(f.measured),
            str(f.gathered),
        ]
        for f in fates
    ]


def sampled_by_any(pods: Sequence[Pod], log_dir: Path) -> Callable[[ShutdownTruth], bool]:
    """Whether any container of the DaemonSet pods (the design; the Deployment beside them is
    there to lose what it sampled) measured a window of this shutdown, from the lab's own
    copies of their stdout, which no cluster keeps."""
    design = [pod for pod in pods if pod.workload == "DaemonSet"]
    names = [log_dir / f"{name}.stdout.log" for pod in design for name in pod.containers]
    analyses, _ = analyze_runs(names, pod_logs=True)
    runs = [(a.replay.windows, wall_offset(a.log)) for a in analyses]

    def sampled(shutdown: ShutdownTruth) -> bool:
        return any(
            compare([shutdown], windows, {}, offset)[0].window is not None
            for windows, offset in runs
        )

    return sampled


def unsampled_findings(
    shutdowns: Sequence[ShutdownTruth],
    sampled: Callable[[ShutdownTruth], bool],
    analyses: Sequence[RunAnalysis],
) -> list[str]:
    """A shutdown no prober sampled is no loss, but a reader should know of it."""
    spans = [(wall_offset(a.log), wall_offset(a.log) + a.replay.end_t) for a in analyses]
    first, last = min(lo for lo, _ in spans), max(hi for _, hi in spans)
    return [
        f"{s.hostname}: no DaemonSet prober sampled this shutdown (every LB it meets stopped "
        "routing there between two samples): no window to lose"
        for s in shutdowns
        # Tearing the lab down starts shutdowns of its own, after the last prober stopped.
        if first <= s.t0 < last and not sampled(s)
    ]
