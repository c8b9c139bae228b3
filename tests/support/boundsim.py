"""Seeded runs of a simulated cluster, as event logs a daemon would have written.

`bench/_bounds_sim.py` is the cluster: three apiservers rolled one at a time behind four LBs,
sampled by 16 streams whose pace the real `PaceTracker` sets and whose witness bursts the
real `BurstPlanner` asks for, every sample fed to the real trackers in the order it ended.
Here it runs at the lab's `--time-scale 0.05` of AWS (a 6.45 s delay, 9.7 s of graceful
termination), each LB's reaction drawn per shutdown from 0.4 to 1.2 delays (past the delay a
quarter of the time: requests fail, kept connections are reset) and the service network's
from 0.04 to 0.12; and, as on a loaded machine, one answer in fifty is late by an
exponentially drawn 0.3 s on average, so that answers arrive out of the order they were
sent. The samples are written as the daemon writes them (`tests.report.daemonlog`: its
compaction, interval and window records, summaries): a log `prober analyze` reads like any
other. One seed, one run, the same on every machine.

`checked_run` puts a run through `prober analyze`, judged against a history (`history`:
every LB allowed 5 s of reaction and 1 s of disruption, so that verdicts pass and fail and
say why, every interval in a failed one's details), and `prober origin`, and checks every
estimate their outputs show (`prober.lab.judges.inbounds.outputs`).
Over many seeds, per output:

    .venv/bin/python -m tests.support.boundsim --seeds 20 --out /tmp/bounds
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import random
import sys
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from prober.cli import main
from prober.core.models import LB, Connection, Protocol, Sample, StreamId, parse_rfc3339, rfc3339
from prober.lab.judges.inbounds.outputs import check_outputs, reader_of
from prober.lab.judges.inbounds.text import Checked, check_text
from prober.report.format.tables import table
from tests.report.daemonlog import START, run_record, write_daemon_log

DELAY, TERMINATION = 6.45, 9.7  # AWS's 129 s and 194 s at the lab's --time-scale 0.05
FIRST, APART = 5.0, 15.0  # the first T0, and the T0s' spacing past the termination
SLOW_SHARE, SLOW_MEAN = 0.02, 0.3  # answers late by an exponential draw


def _load() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "_bounds_sim.py"
    spec = importlib.util.spec_from_file_location("_bounds_sim", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_bounds_sim", module)
    spec.loader.exec_module(module)
    return module


sim = _load()


class _LoadedCluster(sim.Cluster):  # type: ignore[name-defined,misc]
    def answer(self, stream: StreamId, t: float, burst: int | None = None) -> Sample:
        answered: Sample = super().answer(stream, t, burst)
        if self._rng.random() < SLOW_SHARE:
            # Late to end, not to reach the server: the header read its clock in time.
            answered = replace(answered, dur=answered.dur + self._rng.expovariate(1 / SLOW_MEAN))
        return answered


class _Recorded(sim.Simulation):  # type: ignore[name-defined,misc]
    """The simulation, keeping every sample in the order the trackers were fed it."""

    def __init__(self, rng: random.Random, plan: list[object]) -> None:
        super().__init__(rng, sim.NEW, plan, DELAY, TERMINATION)
        self.cluster = _LoadedCluster(rng, plan, DELAY, TERMINATION)
        self.fed: list[Sample] = []

    def feed(self, sample: Sample, now: float) -> None:
        self.fed.append(sample)
        super().feed(sample, now)


def _plan(rng: random.Random) -> list[object]:
    shutdowns = []
    for n, host in enumerate(sim.HOSTS):
        reactions = {
            LB.EXTERNAL: rng.uniform(0.4, 1.2) * DELAY,
            LB.INTERNAL: rng.uniform(0.4, 1.2) * DELAY,
            LB.SERVICE_NETWORK: rng.uniform(0.04, 0.12) * DELAY,
            LB.LOCALHOST: DELAY,
        }
        shutdowns.append(sim.Shutdown(host, FIRST + n * (TERMINATION + APART), reactions))
    return shutdowns


def simulated_run(seed: int, event_log: Path) -> Path:
    """Write the event log of run `seed` at `event_log` (its directory made); its path."""
    event_log.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    plan = _plan(rng)
    run = _Recorded(random.Random(seed + 1), plan)
    run.run(0.0, FIRST + len(plan) * (TERMINATION + APART))
    start = parse_rfc3339(START)
    samples = [replace(s, ts=rfc3339(start + s.t)) for s in run.fed]
    write_daemon_log(event_log, run_record(sim.STREAMS, run_id=f"sim-{seed}"), samples)
    return event_log


ALLOWED = {"reaction": 5.0, "disruption": 1.0}  # seconds, the P99 of 100 runs, every LB


def history(path: Path) -> Path:
    """A thresholds.json that judges every stream of the simulated runs (`ALLOWED`)."""
    entries = [
        {"platform": "aws", "lb": lb.value, "protocol": protocol.value,
         "connection": connection.value, "metric": metric, "p50": p99 / 2, "p75": p99 / 2,
         "p95": p99, "p99": p99, "runs": 100, "usable": True}
        for lb in LB for protocol in Protocol for connection in Connection
        for metric, p99 in ALLOWED.items()
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"v": 1, "entries": entries}), encoding="utf-8")
    return path


def checked_run(seed: int, directory: Path, thresholds: Path) -> Checked:
    """Run `seed` through `prober analyze` (judged against `thresholds`, so that its
    verdicts state the figures they judge) and `prober origin` into `directory`/out: every
    estimate their files and the printed report show, checked."""
    log = simulated_run(seed, directory / "events.jsonl")
    out, printed = directory / "out", io.StringIO()
    judged = ["--thresholds", str(thresholds)]
    with redirect_stdout(printed), redirect_stderr(io.StringIO()):
        # analyze exits 1 when a verdict fails: the simulated LBs fail some, by design
        assert main(["analyze", str(log), *judged, "--out", str(out)]) in (0, 1)
        assert main(["origin", str(out / "summary.json"), "--out", str(out)]) == 0
    checked = check_outputs(out)
    checked.add(check_text(PRINTED, printed.getvalue()))
    return checked


PRINTED = "prober analyze's output"


def output_of(file: str) -> str:
    """The output a file name is one of: its reader's pattern, or the printed report."""
    reader = reader_of(Path(file).name)
    return file if reader is None else reader.pattern


def per_output(checked: Checked) -> tuple[Counter[str], Counter[str]]:
    """Per output, the estimates checked, and those outside their bounds."""
    held: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    for file, n in checked.counts.items():
        held[output_of(file)] += n
    for found in checked.outside:
        outside[output_of(found.file)] += 1
    return held, outside


def tally(checked: Checked) -> list[str]:
    """Per output, the estimates checked and those outside their bounds, as a table."""
    held, outside = per_output(checked)
    rows = [[name, str(held[name]), str(outside[name])] for name in sorted(held)]
    return table(["output", "estimates", "outside their bound"], rows)


def _main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.boundsim",
        description="Estimates outside their bounds, per output, over seeded simulated runs.",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True, help="an empty directory")
    parser.add_argument("--show", type=int, default=10, help="problems printed (10)")
    args = parser.parse_args()
    total, problems = Checked(), []
    thresholds = history(args.out / "thresholds.json")
    for seed in range(args.seeds):
        checked = checked_run(seed, args.out / f"seed-{seed:02d}", thresholds)
        total.add(checked)
        problems += [f"seed {seed}: {problem}" for problem in checked.problems()]
    print("\n".join(tally(total)))
    print("\n".join(problems[: args.show]))


if __name__ == "__main__":
    _main()
