"""The other edge in summary.json: every apiserver process restarted in the run, its T1 and
each LB's add-back against the LB's worst (`core.budgets`), and what it failed before it could
serve (`core.instances`). Its JUnit test and its lines are `early_verdicts`'.

Per LB the section says how many restarted instances it took back, the slowest add-back with
its bound, how many of those lie past the budget for certain (`over`: the bound's lower edge
is past it) or may (`undecided`), and the early and unattributed failures through it.
"""

from __future__ import annotations

from collections.abc import Sequence

from prober.core.budgets import Platform
from prober.core.instances import AddBack, Instance, instance_label
from prober.core.models import LB, Window
from prober.report.format.tables import bounded, seconds
from prober.report.schema.types import AddBackEntry, InstanceEntry, RestartLBEntry, RestartsSection

WITHIN, OVER, UNDECIDED = "within", "over", "undecided"


def shutting_label(window: Window, instances: Sequence[Instance]) -> str:
    """The process a window is of, as a reader knows it: its node (its host where none is
    known) and which start on it, one more than its host's restarts seen before its T0."""
    before = [i for i in instances if i.host == window.host and i.first_t <= window.t0]
    node = window.node or next((i.node for i in instances if i.host == window.host), None)
    return instance_label(node or window.host, 1 + len(before))


def restarts_section(
    instances: Sequence[Instance], profile: Platform | None
) -> RestartsSection | None:
    """None for a run with no restart: nothing to say of the other edge."""
    if not instances:
        return None
    entries = [_instance(i, profile) for i in instances]
    kinds = sorted({b["lb"] for e in entries for b in e["lbs"]}, key=list(map(str, LB)).index)
    return {"instances": entries, "lbs": [_lb(kind, entries) for kind in kinds]}


def _budget(profile: Platform | None, kind: LB) -> float | None:
    if profile is None:
        return None
    try:
        return profile.lb(kind).add_back
    except KeyError:
        return None


def _instance(instance: Instance, profile: Platform | None) -> InstanceEntry:
    return {
        "label": instance.label,
        "host": instance.host,
        "node": instance.node,
        "start": instance.start,
        "holder": instance.holder,
        "first_t": instance.first_t,
        "t1": instance.t1,
        "t1_lo": instance.t1_lo,
        "t1_hi": instance.t1_hi,
        "t1_lo_by": instance.t1_lo_by,
        "t1_hi_by": instance.t1_hi_by,
        "complete": instance.complete,
        "early": instance.early,
        "lbs": [_add_back(b, _budget(profile, b.lb)) for b in instance.lbs],
    }


def _add_back(back: AddBack, budget: float | None) -> AddBackEntry:
    verdict = None
    if budget is not None and back.seconds is not None:
        if back.seconds_hi is not None and back.seconds_hi <= budget:
            verdict = WITHIN
        elif back.seconds_lo is not None and back.seconds_lo > budget:
            verdict = OVER
        else:
            verdict = UNDECIDED
    return {
        "target": back.target,
        "lb": str(back.lb),
        "first_t": back.first_t,
        "added_lo": back.added_lo,
        "added_hi": back.added_hi,
        "seconds": back.seconds,
        "seconds_lo": back.seconds_lo,
        "seconds_hi": back.seconds_hi,
        "budget": budget,
        "verdict": verdict,
        "early": back.early,
        "unattributed": back.unattributed,
    }


def _lb(kind: str, entries: Sequence[InstanceEntry]) -> RestartLBEntry:
    backs = [b for e in entries for b in e["lbs"] if b["lb"] == kind]
    taken = [b for b in backs if b["seconds"] is not None]
    worst = max(taken, key=lambda b: b["seconds"] or 0.0, default=None)
    budget = next((b["budget"] for b in backs if b["budget"] is not None), None)
    entry: RestartLBEntry = {
        "lb": kind,
        "taken_back": len(taken),
        "missed": len(backs) - len(taken),
        "worst": None if worst is None else worst["seconds"],
        "worst_lo": None if worst is None else worst["seconds_lo"],
        "worst_hi": None if worst is None else worst["seconds_hi"],
        "budget": budget,
        "over": sum(b["verdict"] == OVER for b in backs),
        "undecided": sum(b["verdict"] == UNDECIDED for b in backs),
        "early": sum(b["early"] for b in backs),
        "unattributed": sum(b["unattributed"] for b in backs),
        "text": "",
    }
    entry["text"] = _text(entry)
    return entry


def _text(e: RestartLBEntry) -> str:
    parts = [f"{e['lb']} took back {e['taken_back']} of {e['taken_back'] + e['missed']} restarts"]
    if e["worst"] is not None:
        worst = bounded(e["worst"], e["worst_lo"], e["worst_hi"])
        budget = "" if e["budget"] is None else f" (worst add-back {seconds(e['budget'])})"
        parts.append(f"slowest {worst} after T1{budget}")
    if e["over"] or e["undecided"]:
        parts.append(f"{e['over']} past its worst, {e['undecided']} may be")
    parts.append(f"{e['early']} early failures")
    if e["unattributed"]:
        parts.append(f"{e['unattributed']} unanswered failures while an instance was young")
    return "; ".join(parts)
