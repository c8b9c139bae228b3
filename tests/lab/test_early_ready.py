"""The early-ready scenario (the bug of openshift/kubernetes #2730): a real lab on aws's
kernel path, the restarted apiserver's /readyz ok 3 s (1 min scaled) before it can serve.
What is held here is the truth the prober will be judged against: the restarted instance, its
T1 and when it served, every request it answered meanwhile (tied by Audit-ID to the daemon's
own samples), and each LB's mark-up of it. Nothing asserts how fast an LB took it back: that
depends on the machine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from prober.core.instances import LEASE_FIRST, READYZ_NOT_OK, READYZ_OK
from prober.core.models import LB
from prober.lab.infra.instances import InstanceTruth, add_backs
from prober.lab.judges.restarts import lb_of
from prober.lab.run import LabError, LabOptions, LabResult, run_lab
from prober.report.verdicts.identity import Case
from prober.report.verdicts.verdicts import Status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def early_ready(tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    options = LabOptions(platform="aws", scenario="early-ready", time_scale=0.05, shutdowns=1)
    return asyncio.run(run_lab(options, tmp_path_factory.mktemp("early") / "lab", say=None))


def instances(result: LabResult) -> tuple[InstanceTruth, InstanceTruth]:
    """master-0's first instance, and the restarted one."""
    first, restarted = (i for i in result.instances if i.hostname == "master-0")
    return first, restarted


def test_the_restart_is_a_new_instance_with_a_new_lease_holder(early_ready: LabResult) -> None:
    first, restarted = instances(early_ready)
    assert (first.start, restarted.start) == (1, 2)
    assert first.holder != restarted.holder
    assert restarted.holder.startswith(restarted.apiserver + "_")


def test_only_the_restart_says_ready_before_it_can_serve(early_ready: LabResult) -> None:
    first, restarted = instances(early_ready)
    assert first.early_ready == 0.0
    assert restarted.early_ready == pytest.approx(3.0)
    assert restarted.ready is not None
    assert restarted.serving is not None
    assert restarted.listening < restarted.ready
    assert restarted.serving - restarted.ready >= restarted.early_ready
    assert all(not i.early for i in early_ready.instances if i is not restarted)


def test_every_early_answer_is_a_500_between_listening_and_serving(
    early_ready: LabResult,
) -> None:
    _, restarted = instances(early_ready)
    early = restarted.early
    assert early, "no request reached the restarted apiserver before it could serve"
    assert {(e.answer, e.status, e.how) for e in early} == {("500", 500, "answered")}
    assert all(restarted.listening <= e.received < restarted.serving for e in early)


def test_localhost_meets_the_instance_from_its_first_instant(early_ready: LabResult) -> None:
    """localhost goes straight to master-0."""
    _, restarted = instances(early_ready)
    assert any(lb_of(e.user_agent) is LB.LOCALHOST for e in restarted.early)


def test_the_daemons_samples_say_the_same_request_by_request(early_ready: LabResult) -> None:
    _, restarted = instances(early_ready)
    samples = {s.audit_id: s for s in early_ready.analysis.log.samples}
    for answer in restarted.early:
        if answer.path == "/api/v1/namespaces/default":
            sample = samples[answer.audit_id]
            assert (sample.status, sample.lb) == (500, lb_of(answer.user_agent))


def test_every_lb_marks_the_restart_up_and_none_before_its_t1(early_ready: LabResult) -> None:
    _, restarted = instances(early_ready)
    lbs = {truth.lb: truth for truth in early_ready.lb_truth}
    backs = {b.lb: b for b in add_backs(early_ready.instances, lbs)[restarted.label]}
    assert set(backs) == {LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK}
    for kind, back in backs.items():
        assert back.marked_up is not None, kind
        assert back.marked_up >= restarted.ready, kind


def test_the_daemon_marks_every_early_answer_and_holds_t1_and_add_backs(
    early_ready: LabResult,
) -> None:
    """Held to that truth by the lab's check: every early answer marked early on the right
    instance and LB, T1 and each add-back inside their bounds."""
    assert early_ready.problems == ()
    check = early_ready.restarts
    assert check is not None
    assert check.early_found == check.early_truth > 0


def test_the_daemon_sees_the_restart_by_its_lease_holder(early_ready: LabResult) -> None:
    _, restarted = instances(early_ready)
    [instance] = early_ready.analysis.replay.instances
    assert (instance.label, instance.holder) == ("master-0 #2", restarted.holder)
    assert instance.t1_lo_by in {LEASE_FIRST, READYZ_NOT_OK}


def test_the_early_test_fails_for_exactly_the_lbs_that_routed_there(
    early_ready: LabResult,
) -> None:
    check = early_ready.restarts
    assert check is not None
    through = {lb for lb, n in check.early_by_lb.items() if n and lb is not LB.LOCALHOST}
    failed = {
        v.id.lb for v in early_ready.analysis.verdicts
        if v.id.case is Case.BEFORE_IT_CAN_SERVE and v.status is Status.FAILED
    }  # fmt: skip
    assert failed == through


def test_the_direct_paths_readyz_brackets_t1(early_ready: LabResult) -> None:
    """master-0 is the direct path's: its /readyz, asked while it restarted, brackets T1."""
    [instance] = early_ready.analysis.replay.instances
    assert instance.t1_hi_by == READYZ_OK
    assert instance.t1_lo is not None
    assert instance.t1_hi is not None


async def test_the_early_flags_belong_to_the_early_ready_scenario(tmp_path: Path) -> None:
    options = LabOptions(platform="aws", early_answer="403")
    with pytest.raises(
        LabError,
        match=r"^--early-answer: an option of --scenario early-ready, "
        r"not of rollout \(prober lab --scenario NAME --help lists",
    ):
        await run_lab(options, tmp_path / "lab", say=None)
