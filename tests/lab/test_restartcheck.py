"""The lab's judge of restarts: T1, add-back and early failures against the truth."""

from __future__ import annotations

import dataclasses

from prober.core.instances import AddBack, Instance
from prober.core.models import LB, ErrorClass, Sample
from prober.lab.infra.instances import EarlyTruth, InstanceTruth
from prober.lab.infra.lbstate import ServerEvent
from prober.lab.infra.truth import LbTruth
from prober.lab.judges.restartcheck import check_restarts, junit_problems
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict
from tests.factories import sample

OFFSET = 1000.0  # wall seconds at run time 0
UA = "prober/0.1.0 kube-api-http2-internal-lb-new-connections"


def early(audit_id: str, status: int | None = 500, how: str = "answered") -> EarlyTruth:
    return EarlyTruth(audit_id, 1010.6, 1010.61, "500", status, how, True, "/api", UA, "10.0.0.9")


def truths(*answers: EarlyTruth) -> list[InstanceTruth]:
    def one(start: int, listening: float, ready: float, found=()) -> InstanceTruth:
        return InstanceTruth("master-0", "apiserver-a", f"h{start}", start, listening, ready,
                             ready, 0.0, tuple(found))  # fmt: skip

    return [one(1, 990.0, 990.5), one(2, 1010.0, 1010.5, answers)]


EVENTS = (
    ServerEvent(1001.0, "master-0", False, "down"),
    ServerEvent(1011.0, "master-0", True, "up"),
)
LBS = {LB.INTERNAL: LbTruth(LB.INTERNAL, EVENTS, reset_on_down=False)}


def measured(added: tuple[float, float] = (10.8, 11.2), early_n: int = 0) -> Instance:
    back = AddBack("kube-api", LB.INTERNAL, 11.1, *added, 0.6, 0.0, 0.9, early_n)
    return Instance("apiserver-a", "master-0", 2, "h2", 10.0, 10.75, 10.3, 11.2,
                    "lease-first-write", "internal-lb answer", (back,), early_n, True)  # fmt: skip


def check(instances: list[Instance], samples: list[Sample] = (), *answers: EarlyTruth):
    return check_restarts(truths(*answers), LBS, instances, list(samples), offset=OFFSET,
                          end_t=60.0, tolerance=0.1)  # fmt: skip


def failed_early(audit_id: str) -> Sample:
    s = sample(10.6, error=ErrorClass.HTTP_5XX, status=500, host="apiserver-a")
    return dataclasses.replace(s, audit_id=audit_id, early=True)


def test_truths_inside_their_bounds_pass() -> None:
    result = check([measured()])
    assert result.problems == ()
    [row] = result.rows
    assert (row.instance, row.lb, row.truth) == ("master-0 #2", LB.INTERNAL, 0.5)


def test_an_add_back_outside_its_bound_is_a_problem_with_the_numbers() -> None:
    result = check([measured(added=(10.8, 10.85))])
    assert result.problems == (
        "master-0 #2 internal-lb: the LB took it back at 11.000 s, outside the bound "
        "[10.800, 10.850]",
    )


def test_a_restart_the_daemon_did_not_see_is_a_problem() -> None:
    assert check([]).problems == ("master-0 #2: the daemon saw no restart (T1 at 10.500 s)",)


def test_a_t1_outside_its_bound_is_a_problem() -> None:
    late = dataclasses.replace(measured(), t1_lo=10.7)
    assert check([late]).problems == (
        "master-0 #2: true T1 at 10.500 s, outside the bound [10.700, 11.200] (set by "
        "lease-first-write and internal-lb answer)",
    )


def test_the_early_failures_marked_must_be_the_truths_instance_by_instance() -> None:
    ok = check([measured(early_n=1)], [failed_early("a1")], early("a1"))
    assert ok.problems == ()
    assert (ok.early_found, ok.early_truth, dict(ok.early_by_lb)) == (1, 1, {LB.INTERNAL: 1})
    missed = check([measured()], [], early("a1"))
    assert missed.problems[0] == "1 early answers the daemon did not mark early: ['a1']"
    extra = check([measured(early_n=1)], [failed_early("a2")])
    assert extra.problems[0] == "1 samples marked early the truth has no early answer for"


def test_a_hang_is_tied_to_its_failure_by_audit_id() -> None:
    timeout = dataclasses.replace(sample(10.6, error=ErrorClass.TIMEOUT), audit_id="h1")
    tied = check([measured()], [timeout], early("h1", status=None, how="client-gone"))
    assert (tied.problems, tied.hangs, tied.hangs_failed) == ((), 1, 1)
    lost = check([measured()], [], early("h1", status=None, how="client-gone"))
    assert lost.problems == ("1 early requests held without answer are no failure",)


def test_the_early_junit_test_must_fail_for_exactly_the_lbs_that_routed_there() -> None:
    result = check([measured(early_n=1)], [failed_early("a1")], early("a1"))
    case = CaseId(Case.BEFORE_IT_CAN_SERVE, LB.INTERNAL)
    assert junit_problems(result, [Verdict(case, None, Status.FAILED, "")]) == []
    assert junit_problems(result, [Verdict(case, None, Status.PASSED, "")]) == [
        "'should not route to an apiserver before it can serve' failed for no LB; the truth "
        "has early answers through ['internal-lb']"
    ]


def test_a_slow_lb_that_marks_the_host_down_after_the_new_process_answered_took_it_back_at_once():
    # The slow LB still held master-0 when its second process began to listen (1010.0), and
    # answered through it; it marked the host down only at 1015 and up at 1020. That mark-up
    # is no add-back: the LB had the process from its start.
    late = (
        ServerEvent(1015.0, "master-0", False, "down"),
        ServerEvent(1020.0, "master-0", True, "up"),
    )
    lbs = {LB.INTERNAL: LbTruth(LB.INTERNAL, late, reset_on_down=False)}
    back = AddBack("kube-api", LB.INTERNAL, 10.05, 9.9, 10.1, -0.45, -0.6, -0.4, 0)
    early_back = dataclasses.replace(measured(), lbs=(back,))
    result = check_restarts(truths(), lbs, [early_back], [], offset=OFFSET, end_t=60.0,
                            tolerance=0.1)  # fmt: skip
    assert result.problems == ()
    [row] = result.rows
    assert (row.added_truth, row.truth) == (10.0, -0.5)


def test_an_lb_that_held_the_host_and_never_marked_it_down_never_took_it_back():
    lbs = {LB.INTERNAL: LbTruth(LB.INTERNAL, (), reset_on_down=False)}
    result = check_restarts(truths(), lbs, [measured()], [], offset=OFFSET, end_t=60.0,
                            tolerance=0.1)  # fmt: skip
    assert result.problems == ()
    [row] = result.rows
    assert row.added_truth is None
