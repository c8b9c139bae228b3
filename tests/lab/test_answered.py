"""An answered request is never a failure: failed samples held against the audit logs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from prober.core.models import ErrorClass
from prober.lab.judges.answered import check_answered
from tests.factories import fail, ok


def audit(path: Path, events: list[tuple[str, str, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"auditID": audit_id, "stage": stage, "responseStatus": {"code": code}})
        for audit_id, stage, code in events
    ]
    path.write_text("\n".join([*lines, "not json"]) + "\n")


def test_a_failure_the_server_answered_with_a_2xx_is_named(tmp_path: Path) -> None:
    lost = fail(1.0, ErrorClass.GOAWAY, detail="GOAWAY NO_ERROR last_stream_id=1")
    refused = fail(2.0, ErrorClass.RETRY_AFTER, status=429)
    never_seen = fail(3.0)
    resent = dataclasses.replace(ok(4.0), retried="goaway")
    audit(tmp_path / "master-0" / "audit.log", [
        (lost.audit_id, "RequestReceived", 0),
        (lost.audit_id, "ResponseComplete", 200),
        (refused.audit_id, "ResponseComplete", 429),
        (resent.audit_id, "ResponseComplete", 200),
    ])  # fmt: skip
    check = check_answered([lost, refused, never_seen, resent], tmp_path)
    assert check.answered_failed == (f"{lost.stream}: goaway (GOAWAY NO_ERROR last_stream_id=1)",)
    assert check.retried == {"goaway": 1}
    # The 429 and the refused connection had no 2xx: named first, so that "0 cut by an LB"
    # is not read as "no connection failed".
    assert check.describe() == (
        "failed requests no server answered: 1 connect_refused, 1 retry_after; failed "
        "requests a server answered (2xx in its audit log): 1 lost by the client, 0 cut by "
        "an LB resetting its connections, 0 by a crash or a lost node, 0 answered after the "
        "client had given up; sent again once, as Go's transport would: 1 goaway"
    )
    by_a_resetting_lb = check_answered([lost], tmp_path, resetting={lost.lb})
    assert (by_a_resetting_lb.answered_failed, by_a_resetting_lb.cut_by_lb) == ((), 1)


def test_nothing_failed_nothing_to_read(tmp_path: Path) -> None:
    check = check_answered([ok(1.0)], tmp_path / "none")
    assert check.answered_failed == ()


def test_an_answer_cut_by_its_servers_crash_is_counted_apart(tmp_path: Path) -> None:
    """Answered, logged, then SIGKILLed before the bytes left: the crash's doing (seen under
    CPU load in the crash scenario), not the client's; a crash outside the request is no
    excuse."""
    cut = fail(10.0, ErrorClass.CONNECTION_RESET, detail="server closed the connection")
    cut = dataclasses.replace(cut, dur=0.3)
    audit(tmp_path / "master-0" / "audit.log", [(cut.audit_id, "ResponseComplete", 200)])
    during = check_answered([cut], tmp_path, crashes=[10.2])
    assert (during.answered_failed, during.cut_by_crash) == ((), 1)
    assert "0 cut by an LB resetting its connections, 1 by a crash" in during.describe()
    for elsewhere in (9.5, 10.5):
        check = check_answered([cut], tmp_path, crashes=[elsewhere])
        assert (len(check.answered_failed), check.cut_by_crash) == (1, 0)


def test_an_answer_a_lost_node_sent_too_late_is_counted_apart(tmp_path: Path) -> None:
    """A node that vanished while the request was out answers it once it is back, after the
    client gave up: the loss's doing. A loss before or after the request is no excuse."""
    hung = dataclasses.replace(fail(10.0, ErrorClass.TIMEOUT, detail="no answer"), dur=5.0)
    audit(tmp_path / "master-0" / "audit.log", [(hung.audit_id, "ResponseComplete", 200)])
    for during in ((8.0, 12.0), (14.0, 20.0), (2.0, 10.0)):
        check = check_answered([hung], tmp_path, losses=[during])
        assert (check.answered_failed, check.cut_by_crash) == ((), 1), during
    for outside in ((1.0, 9.5), (15.5, 20.0)):
        check = check_answered([hung], tmp_path, losses=[outside])
        assert (len(check.answered_failed), check.cut_by_crash) == (1, 0), outside


def test_a_request_that_connected_only_once_the_node_was_back_is_the_losss(
    tmp_path: Path,
) -> None:
    """Its SYN, sent while the node was gone, got through once it was back: `t` (the request
    on the wire) is after the loss, and the answer came after the deadline set before it."""
    late = fail(16.3, ErrorClass.TIMEOUT, detail="no answer in time")
    late = dataclasses.replace(late, dur=0.4, replaced="timeout")
    audit(tmp_path / "master-0" / "audit.log", [(late.audit_id, "ResponseComplete", 200)])
    check = check_answered([late], tmp_path, losses=[(2.0, 15.9)])
    assert (check.answered_failed, check.cut_by_crash) == ((), 1)
    check = check_answered([late], tmp_path, losses=[(2.0, 11.0)])  # over before it began
    assert (len(check.answered_failed), check.cut_by_crash) == (1, 0)


def test_a_resent_request_whose_first_answer_a_crash_cut_is_counted_apart(
    tmp_path: Path,
) -> None:
    """Its `t` is the resend's, after the crash: the first attempt went out before it."""
    resent = fail(10.0, ErrorClass.CONNECT_REFUSED, detail="refused")
    resent = dataclasses.replace(resent, dur=0.01, retried="closed_idle")
    audit(tmp_path / "master-0" / "audit.log", [(resent.audit_id, "ResponseComplete", 200)])
    check = check_answered([resent], tmp_path, crashes=[9.8])
    assert (check.answered_failed, check.cut_by_crash) == ((), 1)
    once = dataclasses.replace(resent, retried=None)  # not resent: the crash was before it
    check = check_answered([once], tmp_path, crashes=[9.8])
    assert (len(check.answered_failed), check.cut_by_crash) == (1, 0)


def test_an_answer_after_the_client_gave_up_is_no_lost_answer(tmp_path: Path) -> None:
    """A restarted kube-apiserver listens seconds before it serves: a request queued then
    timed out at the client, and was answered after. The timeout was right."""
    waited = fail(10.0, ErrorClass.TIMEOUT, dur=5.0)  # gave up at 00:00:15.0
    lost = fail(20.0, ErrorClass.TIMEOUT, dur=5.0)  # answered before it gave up
    lines = [
        {"auditID": waited.audit_id, "stage": "ResponseComplete", "responseStatus": {"code": 200},
         "stageTimestamp": "2026-11-30T00:00:15.300000Z"},
        {"auditID": lost.audit_id, "stage": "ResponseComplete", "responseStatus": {"code": 200},
         "stageTimestamp": "2026-11-30T00:00:24.000000Z"},
    ]  # fmt: skip
    (tmp_path / "master-0").mkdir()
    (tmp_path / "master-0" / "audit.log").write_text("".join(json.dumps(x) + "\n" for x in lines))
    check = check_answered([waited, lost], tmp_path)
    assert check.too_late == 1
    assert check.answered_failed == (f"{lost.stream}: timeout (timeout)",)
