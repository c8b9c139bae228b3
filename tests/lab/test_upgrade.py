"""`prober lab --scenario upgrade`: the probers through a rollout, a drain and a reboot of every
node, and kubelet log rotation; judged from what a gather step could read alone (`gathered/`).

Each claim of `deploy/README.md` ("What survives") is held here, measured on one run:
- drain: a Deployment's pod is deleted with its log (its windows are gone), a DaemonSet's stays;
- reboot: the DaemonSet pod's container restarts, and `oc logs --previous` still holds what the
  container before it measured;
- rotation: the kubelet rotates each log at its size and a gather reads the newest file, and
  still no DaemonSet window is lost: the compact stream stays within one file (how far within:
  bench/stdout_volume.py, 1.1 MiB over 4 hours against 135 MiB for every record).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.core.models import LB
from prober.lab.infra.options import TOLERANCE
from prober.lab.run import LabError, LabOptions, run_lab

MAX_SIZE = 256 * 1024  # a small containerLogMaxSize, so that one lab run can pass it
LINE = 8192  # longer than any line a daemon writes


def _rotations_fit(written: int, rotations: int) -> bool:
    """Each rotated file holds more than MAX_SIZE - LINE bytes, and the live one less than
    MAX_SIZE: so many rotations, no more and no fewer, fit this many bytes."""
    return rotations * (MAX_SIZE - LINE) <= written < (rotations + 1) * MAX_SIZE


@pytest.mark.matrix  # a minute of lab: `make test-matrix`
async def test_an_upgrade_loses_no_window_of_a_daemonset(tmp_path: Path) -> None:
    options = LabOptions(platform="gcp", scenario="upgrade", time_scale=0.05, log_max_size=MAX_SIZE)
    result = await run_lab(options, tmp_path / "lab", say=None)
    # Every shutdown a DaemonSet prober sampled is in gathered/, T0 and reactions inside their
    # bounds; one none sampled (its LBs stopped routing there between two samples) is a finding.
    assert result.problems == ()
    seen = {(r.truth.hostname, r.truth.t0) for r in result.results if r.window is not None}
    unsampled = [f for f in result.findings if "no DaemonSet prober sampled this shutdown" in f]
    assert len(seen) + len(unsampled) >= 6  # 3 rolled, 3 rebooted: each in one or both
    assert len(seen) >= 3

    fates = {(f.pod, f.container): f for f in result.fates}
    daemonsets = [f for f in result.fates if f.workload == "DaemonSet"]
    assert all(f.gathered == f.measured for f in daemonsets)
    before_reboot = fates["prober-master-1", 0]
    assert before_reboot.fate == "stopped by a reboot (oc logs --previous)"
    assert before_reboot.measured >= 1  # read through --previous

    drained = fates["prober-deployment", 0]
    assert drained.fate == "pod deleted by a drain"
    assert drained.measured >= 1  # it had windows to lose
    assert drained.gathered == 0
    # The kubelet rotated each log as often as its size says (how much a container wrote
    # depends on the machine's speed; bench/stdout_volume.py has the figures per mode).
    for fate in result.fates:
        assert _rotations_fit(fate.written, fate.rotations), fate
    replacement = next(f for f in result.fates if f.workload == "Deployment" and f is not drained)
    assert replacement.gathered <= replacement.measured

    gathered = sorted(p.name for p in (result.out / "gathered" / "pods").iterdir())
    assert gathered == [
        f"{replacement.pod}_prober.log",
        "prober-master-0_prober.log",
        "prober-master-0_prober.previous.log",
        "prober-master-1_prober.log",
        "prober-master-1_prober.previous.log",
    ]
    # OpenShift CI's own files beside each run's summary.json, from what was gathered.
    for summary in (result.out / "gathered" / "analysis").glob("*/summary.json"):
        names = [p.name for p in summary.parent.iterdir()]
        assert any(n.startswith("backend-disruption_prober_") for n in names)
        assert any(n.startswith("e2e-timelines_prober_") for n in names)
    pods = json.loads((result.out / "gathered" / "pods.json").read_text())
    assert [p["deleted"] for p in pods] == [False, False, True, False]
    assert result.tolerance == TOLERANCE


async def test_another_scenarios_option_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    options = LabOptions(scenario="upgrade", slow_lb=LB.INTERNAL)
    with pytest.raises(LabError, match=r"^--slow-lb: an option of --scenario slow-lb, not of up"):
        await run_lab(options, tmp_path / "lab", say=None)
    assert not (tmp_path / "lab").exists()
