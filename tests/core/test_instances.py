"""The instance tracker, fed sample sequences: which process answered, T1, add-back, early."""

from __future__ import annotations

import pytest

from prober.core.header import ShutdownHeader
from prober.core.instances import (
    IN_FLIGHT,
    LEASE_FIRST,
    LEASE_READ,
    OLD_INSTANCE,
    READYZ_NOT_OK,
    READYZ_OK,
    Instance,
    InstanceTracker,
)
from prober.core.models import (
    LB,
    Connection,
    ErrorClass,
    IdentitySeen,
    Protocol,
    ReadyzAnswer,
    Sample,
    StreamId,
)
from prober.core.reaction import misses_needed
from prober.core.trackers import Trackers
from tests.factories import OTHER, STREAM, sample

STREAMS = (STREAM, OTHER)
EXTERNAL_NEW = StreamId("kube-api", Protocol.HTTP1, LB.EXTERNAL, Connection.NEW)
EARLY_FOR = 10.0


def late(t: float, host: str = "A", **kw: object) -> Sample:
    return sample(t, host=host, late=True, elapsed=max(0.0, t - 3.0), delay=20.0, **kw)


def lease(
    t: float, holder: str, *, renew: float, before: float | None, first: bool
) -> IdentitySeen:
    return IdentitySeen(t, "", "A", "master-0", holder, renew, before, first)


def run(
    records: list[Sample | IdentitySeen], streams: tuple[StreamId, ...] = STREAMS
) -> tuple[InstanceTracker, list[Sample], list[Instance]]:
    tracker = InstanceTracker(streams, early_for=EARLY_FOR)
    marked: list[Sample] = []
    written: list[Instance] = []
    for record in records:
        if isinstance(record, IdentitySeen):
            tracker.identify(record)
            continue
        marked.append(tracker.mark(record))
        written += tracker.feed(marked[-1])
    return tracker, marked, written + tracker.close()


def misses(start: float, count: int, host: str = "B", step: float = 0.1) -> list[Sample]:
    return [sample(start + i * step, host=host) for i in range(count)]


def rollout(back: float = 20.0) -> list[Sample | IdentitySeen]:
    """A and B answer; A shuts down and is back at `back` through the internal LB."""
    return [
        sample(0.0, host="A"),
        sample(0.5, host="B"),
        late(3.0),
        late(4.0, stream=OTHER),
        *misses(5.0, 40),
        sample(back, host="A"),  # the new process, first through the internal LB
    ]


def test_a_restart_seen_by_answers_alone_bounds_t1_by_the_old_process_and_the_first_answer():
    _, _, [instance] = run(rollout())
    assert (instance.host, instance.start, instance.holder) == ("A", 2, None)
    assert (instance.t1_lo, instance.t1_lo_by) == (4.0, OLD_INSTANCE)
    assert (instance.t1_hi, instance.t1_hi_by) == (pytest.approx(20.01), "internal-lb answer")
    assert instance.t1 == pytest.approx((4.0 + 20.01) / 2)
    assert not instance.complete  # the external LB never served it
    internal, external = sorted(instance.lbs, key=lambda b: b.lb != LB.INTERNAL)
    assert external.first_t is None
    assert external.seconds is None
    # m misses of two servers before the first hit: the LB took A back after the m-th.
    m = misses_needed(2)
    assert internal.added_lo == pytest.approx(5.0 + (40 - m) * 0.1)
    assert internal.added_hi == pytest.approx(20.01)
    assert internal.seconds_lo == 0.0  # A_lo is before T1's upper bound
    assert internal.seconds_hi == pytest.approx(20.01 - 4.0)


def test_too_few_misses_leave_the_add_back_bounded_below_by_t1_only():
    records = rollout()
    del records[4:31]  # 13 misses of 40 left, fewer than m (14) for two servers
    _, _, [instance] = run(records)
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert internal.added_lo == instance.t1_lo == 4.0


def test_the_lease_names_the_process_and_its_first_write_bounds_t1():
    records: list[Sample | IdentitySeen] = [
        lease(0.2, "h1", renew=0.1, before=None, first=False),
        *rollout()[:-1],
        lease(15.0, "h2", renew=14.6, before=14.2, first=True),
        sample(20.0, host="A"),
    ]
    _, _, [instance] = run(records)
    assert (instance.start, instance.holder, instance.node) == (2, "h2", "master-0")
    assert (instance.t1_lo, instance.t1_lo_by) == (14.6, LEASE_FIRST)
    assert instance.label == "master-0 #2"


def test_a_renewal_not_provably_the_first_bounds_t1_by_the_read_before():
    records = [*rollout()[:-1], lease(15.0, "h2", renew=14.6, before=9.0, first=False)]
    records.append(sample(20.0, host="A"))
    _, _, [instance] = run(records)
    assert (instance.t1_lo, instance.t1_lo_by) == (9.0, LEASE_READ)


def test_answers_after_the_lease_belong_to_the_leases_process_not_a_third():
    records = [*rollout()[:-1], lease(15.0, "h2", renew=14.6, before=14.2, first=True)]
    records += [sample(20.0, host="A"), sample(21.0, host="A", stream=OTHER)]
    _, _, instances = run(records)
    assert [(i.start, i.holder) for i in instances] == [(2, "h2")]


def test_a_lease_taken_over_with_no_shutdown_seen_is_a_crash_and_a_new_process():
    records: list[Sample | IdentitySeen] = [
        sample(0.0, host="A"),
        lease(0.2, "h1", renew=0.1, before=None, first=False),
        sample(1.0, host="A"),
        lease(9.0, "h2", renew=8.5, before=8.0, first=True),
        sample(8.2, host="A"),  # sent before the new holder's first write: the old process
        sample(9.5, host="A"),
    ]
    _, _, [instance] = run(records)
    assert (instance.start, instance.holder, instance.t1_lo) == (2, "h2", 8.5)
    assert instance.t1_hi == pytest.approx(9.51)


def test_failed_answers_of_a_young_instance_are_early_and_later_ones_are_not():
    error = {"error": ErrorClass.HTTP_5XX, "status": 500, "host": "A"}
    records = [*rollout(), sample(20.5, **error), sample(31.0, **error)]
    _, marked, [instance] = run(records)
    assert [s.early for s in marked[-2:]] == [True, False]
    assert instance.early == 1
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert internal.early == 1


def test_a_failure_from_the_old_process_is_never_early():
    records = [*rollout()[:4], late(5.0, error=ErrorClass.RETRY_AFTER, status=429)]
    _, marked, _ = run(records)
    assert not any(s.early for s in marked)


def test_unanswered_failures_through_an_lb_while_an_instance_is_young_are_unattributed():
    records = [*rollout(), sample(21.0, error=ErrorClass.CONNECTION_RESET)]
    _, _, [instance] = run(records)
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert (internal.unattributed, internal.early) == (1, 0)


def test_the_record_comes_once_every_lb_served_it_and_nothing_young_is_in_flight():
    records = [*rollout(), sample(21.0, host="A", stream=OTHER), sample(29.0, host="B")]
    tracker = InstanceTracker(STREAMS, early_for=EARLY_FOR)
    out = []
    for record in records:
        assert isinstance(record, Sample)
        out.append(tracker.feed(tracker.mark(record)))
    assert [len(o) for o in out[-3:]] == [0, 0, 0]  # young until 20.01 + 10
    # Young until 30.01; a request sent by then may take IN_FLIGHT to come back.
    assert tracker.feed(tracker.mark(sample(30.5 + IN_FLIGHT - 1, host="B"))) == []
    assert tracker.feed(tracker.mark(sample(30.5 + IN_FLIGHT, host="B")))[0].complete
    assert tracker.close() == []


def test_restarting_holds_from_the_first_late_answer_until_every_lb_served_the_new_process():
    tracker = InstanceTracker(STREAMS, early_for=EARLY_FOR)
    seen = []
    for record in [*rollout(), sample(21.0, host="A", stream=OTHER)]:
        assert isinstance(record, Sample)
        tracker.feed(tracker.mark(record))
        seen.append((tracker.restarting, tracker.waiting_on("kube-api", LB.EXTERNAL)))
    assert seen[1] == (frozenset(), False)
    assert seen[2] == (frozenset({"A"}), False)
    assert seen[-2] == (frozenset({"A"}), True)  # back, not yet through the external LB
    assert seen[-1] == (frozenset(), False)


def test_a_direct_path_answer_is_no_upper_bound_on_t1():
    direct = StreamId("kube-api", Protocol.HTTP1, LB.LOCALHOST, Connection.NEW)
    records = [*rollout()[:-1], sample(10.0, host="A", stream=direct), sample(20.0, host="A")]
    _, _, [instance] = run(records, (*STREAMS, direct))
    assert instance.first_t == 10.0
    assert instance.t1_hi == pytest.approx(20.01)


def test_the_trackers_keep_an_lbs_fresh_streams_fast_until_it_served_the_new_process():
    trackers = Trackers(STREAMS)
    for record in rollout():
        assert isinstance(record, Sample)
        trackers.feed(trackers.mark(record))
    assert trackers.calm(STREAM.name)[0]  # the internal LB has served it
    assert trackers.restarting == frozenset({"A"})  # the external one has not


def test_early_failures_are_counted_on_their_interval_and_not_in_the_window():
    error = {"error": ErrorClass.HTTP_5XX, "status": 500, "host": "A"}
    trackers = Trackers(STREAMS, early_for=EARLY_FOR)
    events = []
    for record in [
        *rollout(),
        sample(20.5, **error),
        sample(20.7, **error),
        sample(21.0, host="A"),
    ]:
        assert isinstance(record, Sample)
        events += trackers.feed(trackers.mark(record))
    [interval] = [e for e in events if type(e).__name__ == "Interval"]
    assert (interval.samples, interval.early) == (2, 2)


def test_an_lb_that_slow_starts_a_server_bounds_its_add_back_by_t1_alone():
    tracker = InstanceTracker(STREAMS, early_for=EARLY_FOR, slow_start={LB.INTERNAL})
    for record in rollout():
        assert isinstance(record, Sample)
        tracker.feed(tracker.mark(record))
    [instance] = tracker.close()
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert internal.added_lo == instance.t1_lo == 4.0  # 40 misses, and still no bound


def test_an_lb_that_sent_a_fresh_connection_to_nothing_is_no_witness_of_t1():
    records = rollout()
    back = records.pop()  # the new process's first answer, through the internal LB
    records += [sample(15.0, error=ErrorClass.CONNECT_REFUSED), back]
    records.append(sample(21.0, host="A", stream=EXTERNAL_NEW))
    _, _, [instance] = run(records, (*STREAMS, EXTERNAL_NEW))
    assert (instance.t1_hi, instance.t1_hi_by) == (pytest.approx(21.01), "external-lb answer")
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert internal.added_hi == pytest.approx(20.01)  # it did route there by then


def readyz(t: float, status: int, host: str = "A") -> ReadyzAnswer:
    return ReadyzAnswer(t, "", 0.01, status, None, ShutdownHeader(False, 70.0, 0.0, host), f"r{t}")


def test_the_direct_paths_readyz_brackets_t1_as_tight_as_its_polling():
    tracker = InstanceTracker(STREAMS, early_for=EARLY_FOR)
    records = rollout()
    for record in records[:-1]:
        assert isinstance(record, Sample)
        tracker.feed(tracker.mark(record))
    for t, status in ((15.0, 500), (15.2, 500), (15.4, 200), (15.6, 200)):
        tracker.readyz(readyz(t, status))
    tracker.feed(tracker.mark(sample(20.0, host="A")))
    [instance] = tracker.close()
    assert (instance.t1_lo, instance.t1_lo_by) == (15.2, READYZ_NOT_OK)
    assert (instance.t1_hi, instance.t1_hi_by) == (pytest.approx(15.41), READYZ_OK)
    assert instance.first_t == 15.0


def test_a_readyz_answer_from_the_old_process_says_nothing_of_the_new_one():
    tracker = InstanceTracker(STREAMS, early_for=EARLY_FOR)
    tracker.feed(tracker.mark(sample(0.0, host="A")))
    tracker.readyz(readyz(1.0, 200))  # before any shutdown: the running process
    assert tracker.close() == []


def test_a_request_unanswered_before_the_first_answer_voids_the_miss_bound():
    records = rollout()
    back = records.pop()
    records += [sample(19.0, error=ErrorClass.TIMEOUT, dur=5.0), back]
    _, _, [instance] = run(records)
    internal = next(b for b in instance.lbs if b.lb is LB.INTERNAL)
    assert internal.added_lo == instance.t1_lo == 4.0  # the hang may have been its first
