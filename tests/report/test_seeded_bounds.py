"""No estimate lies outside its bound in any output of 20 seeded runs.

The runs are the simulated cluster of `bench/_bounds_sim.py` at the lab's scale
(`tests.support.boundsim`): the real trackers, pace and witness bursts, on simulated LBs,
answers out of order as on a loaded machine, one seed one run. Seeded, because a real lab
run is not: its timing is the machine's, and a seed of the daemon's scheduling alone would
not make it repeatable. Each run goes through `prober analyze`, against a history so that
its verdicts state what they judge, and `prober origin`; every
output they write and the report `prober analyze` prints is read (`inbounds_outputs`). The
real lab's runs are held the same way in tests/lab/test_lab_bounds.py (`make test-matrix`).
"""

from __future__ import annotations

from pathlib import Path

from prober.lab.judges.inbounds.outputs import READERS
from prober.lab.judges.inbounds.text import Checked
from tests.support.boundsim import PRINTED, checked_run, history, per_output, tally

SEEDS = range(20)


def test_no_estimate_lies_outside_its_bound_in_any_output_of_20_seeded_runs(
    tmp_path: Path,
) -> None:
    total, problems = Checked(), []
    thresholds = history(tmp_path / "thresholds.json")
    for seed in SEEDS:
        checked = checked_run(seed, tmp_path / f"seed-{seed:02d}", thresholds)
        total.add(checked)
        problems += [f"seed {seed}: {problem}" for problem in checked.problems()]
    print("\n".join(tally(total)))
    assert problems == []
    # Every output showed estimates to check: a reader that found none would pass anything.
    held, _ = per_output(total)
    assert {name for name, n in held.items() if n} == {r.pattern for r in READERS} | {PRINTED}
