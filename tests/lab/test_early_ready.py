"""The early-ready scenario (the bug of openshift/kubernetes #2730): a real lab on aws's
kernel path, the restarted apiserver's /readyz ok 3 s (1 min scaled) before it can serve.
What is held here is the truth the prober will be judged against: the restarted instance, its
T1 and when it served, every request it answered meanwhile (tied by Audit-ID to the daemon's
own samples), and each LB's mark-up of it. Nothing asserts how fast an LB took it back: that
depends on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.instances import LEASE_FIRST, READYZ_NOT_OK, READYZ_OK
from prober.core.models import LB
from prober.lab.infra.instances import add_backs
from prober.lab.judges.restarts import lb_of
from prober.lab.run import LabError, LabOptions, run_lab
from prober.report.verdicts.identity import Case
from prober.report.verdicts.verdicts import Status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_the_truth_has_each_early_answer_and_each_lb_mark_up(tmp_path: Path) -> None:
    options = LabOptions(platform="aws", scenario="early-ready", time_scale=0.05, shutdowns=1)
    result = await run_lab(options, tmp_path / "lab", say=None)
    first, restarted = (i for i in result.instances if i.hostname == "master-0")
    assert (first.start, restarted.start) == (1, 2)
    assert first.holder != restarted.holder
    assert restarted.holder.startswith(restarted.apiserver + "_")
    assert first.early_ready == 0.0
    assert restarted.early_ready == pytest.approx(3.0)
    assert restarted.ready is not None
    assert restarted.serving is not None
    assert restarted.listening < restarted.ready
    assert restarted.serving - restarted.ready >= restarted.early_ready
    assert all(not i.early for i in result.instances if i is not restarted)

    early = restarted.early
    assert early, "no request reached the restarted apiserver before it could serve"
    assert {(e.answer, e.status, e.how) for e in early} == {("500", 500, "answered")}
    assert all(restarted.listening <= e.received < restarted.serving for e in early)
    # localhost goes straight to master-0: it meets the instance from its first instant.
    assert any(lb_of(e.user_agent) is LB.LOCALHOST for e in early)
    # The daemon's own samples say the same, request by request.
    samples = {s.audit_id: s for s in result.analysis.log.samples}
    for answer in early:
        if answer.path == "/api/v1/namespaces/default":
            sample = samples[answer.audit_id]
            assert (sample.status, sample.lb) == (500, lb_of(answer.user_agent))

    lbs = {truth.lb: truth for truth in result.lb_truth}
    backs = {b.lb: b for b in add_backs(result.instances, lbs)[restarted.label]}
    assert set(backs) == {LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK}
    for kind, back in backs.items():
        assert back.marked_up is not None, kind
        assert back.marked_up >= restarted.ready, kind  # nothing takes it back before T1

    # The daemon's side, held to that truth by the lab's check: every early answer marked
    # early on the right instance and LB, T1 and each add-back inside their bounds, and the
    # early test failed for exactly the LBs that routed a request there.
    assert result.problems == ()
    check = result.restarts
    assert check is not None
    assert check.early_found == check.early_truth > 0
    [instance] = result.analysis.replay.instances
    assert (instance.label, instance.holder) == ("master-0 #2", restarted.holder)
    assert instance.t1_lo_by in {LEASE_FIRST, READYZ_NOT_OK}
    through = {lb for lb, n in check.early_by_lb.items() if n and lb is not LB.LOCALHOST}
    failed = {
        v.id.lb for v in result.analysis.verdicts
        if v.id.case is Case.BEFORE_IT_CAN_SERVE and v.status is Status.FAILED
    }  # fmt: skip
    assert failed == through
    # master-0 is the direct path's: its /readyz, asked while it restarted, brackets T1.
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
