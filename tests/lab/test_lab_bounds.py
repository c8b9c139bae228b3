"""No estimate outside its bound in any output of 20 real lab runs: every platform, four
rollouts each, at 1/20 of its durations (`make test-matrix`).

The same check as the 20 seeded simulated runs of `make test`
(tests/report/test_seeded_bounds.py), here on the whole lab: real LBs, the real daemon, the
files `prober lab` writes (its lab-result.json too) and the report it prints, read as
`prober lab --check` reads them. These runs are not seeded: their timing is the machine's
(the OS's scheduling, the LBs' checks, the servers' drains), and a seed of the daemon's own
jitter would make none of them repeatable; four runs per platform give the timing room to
vary instead.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from prober.lab.commands import report
from prober.lab.infra.options import TOLERANCE
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.judges.inbounds.outputs import check_outputs, reader_of
from prober.lab.judges.inbounds.run import LAB_READERS
from prober.lab.run import LabOptions, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(300)]


@pytest.mark.parametrize("run", range(1, 5))
@pytest.mark.parametrize("platform", sorted(PLATFORMS))
async def test_no_estimate_lies_outside_its_bound_in_any_output_of_a_lab_run(
    tmp_path: Path, platform: str, run: int
) -> None:
    options = LabOptions(platform=platform, time_scale=0.05, tolerance=TOLERANCE)
    result = await run_lab(options, tmp_path / "lab", say=None)
    printed = io.StringIO()
    problems = report(result, printed)  # as `prober lab --check` reports a run
    # What the truth says of the run is its own tests' (tests/lab/test_lab.py); here the
    # check of the outputs, which report adds after them.
    assert problems[len(result.problems) :] == ()
    checked = check_outputs(result.out, LAB_READERS)  # the files as written, once more
    assert checked.problems() == []
    # Every output showed estimates: a reader that found none would pass anything.
    shown = {reader_of(Path(name).name, LAB_READERS) for name in checked.counts}
    assert shown == set(LAB_READERS)
