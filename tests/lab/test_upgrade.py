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

import asyncio
import json
from pathlib import Path

import pytest

from prober.core.models import LB
from prober.lab.infra.options import TOLERANCE
from prober.lab.judges.survival import ContainerFate
from prober.lab.run import LabError, LabOptions, LabResult, run_lab

MAX_SIZE = 256 * 1024  # a small containerLogMaxSize, so that one lab run can pass it
LINE = 8192  # longer than any line a daemon writes


def _rotations_fit(written: int, rotations: int) -> bool:
    """Each rotated file holds more than MAX_SIZE - LINE bytes, and the live one less than
    MAX_SIZE: so many rotations, no more and no fewer, fit this many bytes."""
    return rotations * (MAX_SIZE - LINE) <= written < (rotations + 1) * MAX_SIZE


MATRIX = pytest.mark.matrix  # a minute of lab: `make test-matrix`


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    options = LabOptions(platform="gcp", scenario="upgrade", time_scale=0.05, log_max_size=MAX_SIZE)
    return asyncio.run(run_lab(options, tmp_path_factory.mktemp("upgrade") / "lab", say=None))


def fates(result: LabResult) -> dict[tuple[str, int], ContainerFate]:
    return {(f.pod, f.container): f for f in result.fates}


@MATRIX
def test_every_shutdown_a_daemonset_sampled_is_in_what_was_gathered(upgraded: LabResult) -> None:
    """T0 and reactions inside their bounds; one none sampled (its LBs stopped routing there
    between two samples) is a finding."""
    assert upgraded.problems == ()
    seen = {(r.truth.hostname, r.truth.t0) for r in upgraded.results if r.window is not None}
    unsampled = [f for f in upgraded.findings if "no DaemonSet prober sampled this shutdown" in f]
    assert len(seen) + len(unsampled) >= 6  # 3 rolled, 3 rebooted: each in one or both
    assert len(seen) >= 3


@MATRIX
def test_a_daemonset_loses_nothing_it_measured(upgraded: LabResult) -> None:
    daemonsets = [f for f in upgraded.fates if f.workload == "DaemonSet"]
    assert all(f.gathered == f.measured for f in daemonsets)


@MATRIX
def test_a_reboot_leaves_the_container_before_it_to_oc_logs_previous(upgraded: LabResult) -> None:
    before_reboot = fates(upgraded)["prober-master-1", 0]
    assert before_reboot.fate == "stopped by a reboot (oc logs --previous)"
    assert before_reboot.measured >= 1  # read through --previous


@MATRIX
def test_a_drain_deletes_a_deployments_pod_with_its_windows(upgraded: LabResult) -> None:
    drained = fates(upgraded)["prober-deployment", 0]
    assert drained.fate == "pod deleted by a drain"
    assert drained.measured >= 1  # it had windows to lose
    assert drained.gathered == 0


@MATRIX
def test_the_kubelet_rotates_each_log_as_often_as_its_size_says(upgraded: LabResult) -> None:
    """How much a container wrote depends on the machine's speed; bench/stdout_volume.py has
    the figures per mode."""
    for fate in upgraded.fates:
        assert _rotations_fit(fate.written, fate.rotations), fate


@MATRIX
def test_the_gather_reads_each_pods_newest_and_previous_logs(upgraded: LabResult) -> None:
    drained = fates(upgraded)["prober-deployment", 0]
    replacement = next(f for f in upgraded.fates if f.workload == "Deployment" and f is not drained)
    assert replacement.gathered <= replacement.measured
    gathered = sorted(p.name for p in (upgraded.out / "gathered" / "pods").iterdir())
    assert gathered == [
        f"{replacement.pod}_prober.log",
        "prober-master-0_prober.log",
        "prober-master-0_prober.previous.log",
        "prober-master-1_prober.log",
        "prober-master-1_prober.previous.log",
    ]
    pods = json.loads((upgraded.out / "gathered" / "pods.json").read_text())
    assert [p["deleted"] for p in pods] == [False, False, True, False]


@MATRIX
def test_openshift_cis_files_stand_beside_each_gathered_summary(upgraded: LabResult) -> None:
    for summary in (upgraded.out / "gathered" / "analysis").glob("*/summary.json"):
        names = [p.name for p in summary.parent.iterdir()]
        assert any(n.startswith("backend-disruption_prober_") for n in names)
        assert any(n.startswith("e2e-timelines_prober_") for n in names)
    assert upgraded.tolerance == TOLERANCE


async def test_another_scenarios_option_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    options = LabOptions(scenario="upgrade", slow_lb=LB.INTERNAL)
    with pytest.raises(LabError, match=r"^--slow-lb: an option of --scenario slow-lb, not of up"):
        await run_lab(options, tmp_path / "lab", say=None)
    assert not (tmp_path / "lab").exists()
