"""Hold what the daemon measured of each restart against the truth: T1, each LB's add-back,
and the early failures (`core.instances` against `lab.infra.instances`).

Per restarted instance the truth has when its /readyz went true (`ready`) and when each LB
marked its host up again; per early answer, its Audit-ID. The daemon's `instance` records
(rebuilt by the replay) have T1 and the add-back instant with their bounds, on its run clock;
the truth is brought onto it with the run's wall offset (`lab.judges.compare.wall_offset`).
`--check` fails where a truth lies outside its bound (beyond the tolerance), where the daemon saw no
restart the truth has, or where the early failures it marked are not exactly the early answers
the truth records for the prober's requests, instance by instance and LB by LB. A hang sends
no header: the daemon counts those failures unattributed, and this check ties each to its
instance by Audit-ID, as only the lab can.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prober.core.instances import AddBack, Instance
from prober.core.models import LB, Sample
from prober.lab.infra.instances import InstanceTruth, add_backs
from prober.lab.infra.truth import LbTruth
from prober.lab.judges.compare import outside
from prober.lab.judges.restarts import lb_of
from prober.report.format.tables import bound, bounded, table
from prober.report.verdicts.early_verdicts import early_lbs
from prober.report.verdicts.verdicts import Verdict


@dataclass(frozen=True, slots=True)
class AddBackRow:
    """One LB's add-back of one restarted instance: the truth beside the daemon's bounds."""

    instance: str  # node #start
    lb: LB
    truth: float | None  # seconds from T1 to the LB's mark-up; None: it did not mark it up
    added_truth: float | None  # the mark-up on the run clock
    back: AddBack  # the daemon's: the add-back instant and its seconds after T1, bounded


@dataclass(frozen=True, slots=True)
class RestartCheck:
    rows: tuple[AddBackRow, ...] = ()
    problems: tuple[str, ...] = ()
    early_found: int = 0  # early failures the daemon marked that the truth has
    early_truth: int = 0  # answered early requests of the prober's streams, by the truth
    hangs: int = 0  # early requests of the prober's streams that got no answer
    hangs_failed: int = 0  # of them, failures in the daemon's log (tied by Audit-ID)
    early_by_lb: Mapping[LB, int] = field(default_factory=dict)  # the truth's, answered


def check_restarts(
    truths: Sequence[InstanceTruth],
    lbs: Mapping[LB, LbTruth],
    measured: Sequence[Instance],
    samples: Sequence[Sample],
    *,
    offset: float,
    end_t: float,
    tolerance: float,
) -> RestartCheck:
    """`offset`: wall seconds at run time 0; `end_t`: the run's end on its clock."""
    problems: list[str] = []
    rows: list[AddBackRow] = []
    backs = add_backs(truths, lbs)
    by_id = {(i.host, i.start): i for i in measured}
    for truth in truths:
        ready = None if truth.ready is None else truth.ready - offset
        if truth.start == 1 or ready is None or not 0 < ready < end_t:
            continue
        instance = by_id.get((truth.apiserver, truth.start))
        if instance is None:
            problems.append(f"{truth.label}: the daemon saw no restart (T1 at {ready:.3f} s)")
            continue
        problems += _t1(truth.label, ready, instance, tolerance)
        for back in backs[truth.label]:
            row = _row(truth.label, ready, back.marked_up, instance, lb=back.lb, offset=offset)
            if row is not None:
                rows.append(row)
                problems += _row_problems(row, tolerance, end_t)
    return _early(truths, measured, samples, RestartCheck(tuple(rows), tuple(problems)))


def _t1(label: str, ready: float, instance: Instance, tolerance: float) -> list[str]:
    lo, hi = instance.t1_lo, instance.t1_hi
    if outside(ready, lo, hi, tolerance) is None:
        return []
    return [
        f"{label}: true T1 at {ready:.3f} s, outside the bound {bound(lo, hi, 3)} "
        f"(set by {instance.t1_lo_by} and {instance.t1_hi_by})"
    ]


def _row(
    label: str, ready: float, marked: float | None, instance: Instance, *, lb: LB, offset: float
) -> AddBackRow | None:
    mine = [b for b in instance.lbs if b.lb is lb]
    if not mine:
        return None  # the daemon did not probe this LB
    added = None if marked is None else marked - offset
    truth = None if added is None else added - ready
    return AddBackRow(instance=label, lb=lb, truth=truth, added_truth=added, back=mine[0])


def _row_problems(row: AddBackRow, tolerance: float, end_t: float) -> list[str]:
    where, back = f"{row.instance} {row.lb}", row.back
    if row.added_truth is None or row.added_truth > end_t:
        return []  # it never took the server out (a slow LB), or not within the run
    if back.added_hi is None:
        return [
            f"{where}: the LB took it back {row.truth:.3f} s after T1; the daemon saw no answer"
        ]
    found = []
    if outside(row.added_truth, back.added_lo, back.added_hi, tolerance) is not None:
        found.append(
            f"{where}: the LB took it back at {row.added_truth:.3f} s, outside the bound "
            f"{bound(back.added_lo, back.added_hi, 3)}"
        )
    assert row.truth is not None
    if outside(row.truth, back.seconds_lo, back.seconds_hi, tolerance) is not None:
        found.append(
            f"{where}: add-back {row.truth:.3f} s after T1, outside the bound "
            f"{bound(back.seconds_lo, back.seconds_hi, 3)} (measured {_s(back.seconds)})"
        )
    return found


def _early(
    truths: Sequence[InstanceTruth],
    measured: Sequence[Instance],
    samples: Sequence[Sample],
    check: RestartCheck,
) -> RestartCheck:
    """The early failures the daemon marked against the truth's early answers to it."""
    mine = [(i, e) for i in truths for e in i.early if e.user_agent.endswith("-connections")]
    answered = {e.audit_id: (i, e) for i, e in mine if e.status is not None}
    hangs = {e.audit_id for _i, e in mine if e.status is None and e.how != "cut"}
    marked = {s.audit_id: s for s in samples if s.early}
    failed = {s.audit_id for s in samples if s.failed}
    problems = list(check.problems)
    missed = sorted(set(answered) - set(marked))
    extra = sorted(set(marked) - set(answered))
    if missed:
        problems.append(f"{len(missed)} early answers the daemon did not mark early: {missed[:3]}")
    if extra:
        problems.append(f"{len(extra)} samples marked early the truth has no early answer for")
    truth_counts = Counter(
        (i.apiserver, i.start, lb_of(e.user_agent)) for i, e in answered.values()
    )
    measured_counts = Counter(
        {(m.host, m.start, b.lb): b.early for m in measured for b in m.lbs if b.early}
    )
    direct = {k: n for k, n in truth_counts.items() if k[2] is LB.LOCALHOST}
    through_lbs = {k: n for k, n in truth_counts.items() if k[2] is not LB.LOCALHOST}
    if through_lbs != dict(measured_counts):
        problems.append(
            f"early failures per instance and LB: the daemon's {dict(measured_counts)}, "
            f"the truth's {through_lbs}"
        )
    by_lb: Counter[LB] = Counter()
    for (_host, _start, lb), n in {**through_lbs, **direct}.items():
        if lb is not None:
            by_lb[lb] += n
    lost = hangs - failed
    if lost:
        problems.append(f"{len(lost)} early requests held without answer are no failure")
    return RestartCheck(
        check.rows,
        tuple(problems),
        early_found=len(set(answered) & set(marked)),
        early_truth=len(answered),
        hangs=len(hangs),
        hangs_failed=len(hangs & failed),
        early_by_lb=dict(by_lb),
    )


def _s(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f}"


def junit_problems(check: RestartCheck, verdicts: Sequence[Verdict]) -> list[str]:
    """The early test must fail for exactly the LBs the truth says routed a prober's request
    to an instance that answered it early."""
    expected = {str(lb) for lb, n in check.early_by_lb.items() if n and lb is not LB.LOCALHOST}
    failed = set(early_lbs(verdicts))
    if failed == expected:
        return []
    return [
        f"'should not route to an apiserver before it can serve' failed for "
        f"{sorted(failed) or 'no LB'}; the truth has early answers through "
        f"{sorted(expected) or 'none'}"
    ]


def rows_table(check: RestartCheck) -> list[str]:
    """Each LB's add-back of each restarted instance: the truth beside the daemon's bound."""
    if not check.rows:
        return []
    rows = [
        [
            r.instance,
            str(r.lb),
            "-" if r.truth is None else f"{r.truth:.3f} s",
            bounded(r.back.seconds, r.back.seconds_lo, r.back.seconds_hi, 3),
        ]
        for r in check.rows
    ]
    lines = table(["instance", "lb", "add-back (truth)", "measured [bound]"], rows)
    early = (
        f"early failures: {check.early_found} of the truth's {check.early_truth} answered early "
        f"marked by the daemon; held without answer {check.hangs}, "
        f"{check.hangs_failed} of them failures in its log (tied by Audit-ID)"
    )
    return [*lines, early]
