"""Each apiserver process of a lab run, from its own truth log, and when each LB took it back.

A restart is a new instance: the same host, a new process, a new holder of the host's
identity Lease. Per instance its truth records (`core.truthlog`) give when it
listened, when its /readyz went true (`ready`: T1) and when it could serve (`serving`; the
same instant as listening unless it ran in the early-ready mode, the bug of
openshift/kubernetes #2730), and every request it answered before it could serve, with its
Audit-ID: the one tie between an unanswered client failure (a hang carries no header) and the
server it reached. Per LB, the add-back: the first time the LB marked the host up at or after
the instance listened and before the next instance on that host did (an LB's own log lines,
`lbstate.ServerEvent`); none for the instances the LBs started with, which they never took
out. Times are wall-clock epoch seconds, as in `lab.infra.truth`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.core.instances import instance_label
from prober.core.models import LB
from prober.core.truthlog import (
    EarlyAnswered,
    Listening,
    Ready,
    Serving,
    TruthRecord,
    first,
    of_kind,
)
from prober.lab.infra.lbstate import ServerEvent
from prober.lab.infra.truth import LbTruth, TruthError, first_up, held, process_records


@dataclass(frozen=True, slots=True)
class EarlyTruth:
    """A request an instance answered (or held) before it could serve."""

    audit_id: str
    received: float  # its headers arrived
    settled: float  # answered, or given up on by the client, timed out, cut
    answer: str  # the mode: 500, 403 or hang
    status: int | None  # what it sent; None: nothing (a hang)
    how: str  # answered, client-gone, timeout, cut
    after_ready: bool  # /readyz was true when it arrived
    path: str
    user_agent: str  # the prober's names the stream: `prober/<v> <stream>`
    peer: str


@dataclass(frozen=True, slots=True)
class InstanceTruth:
    hostname: str
    apiserver: str  # the APIServerID, the host's: the same for every instance on it
    holder: str  # the identity Lease's holder: this instance's own
    start: int  # which start on its host, from 1
    listening: float
    ready: float | None  # T1: /readyz went true; None: it never did (killed first)
    serving: float | None  # it could serve from here; None: it never could
    early_ready: float  # seconds /readyz said ok before it could serve (0: not that mode)
    early: tuple[EarlyTruth, ...]

    @property
    def label(self) -> str:
        """As a reader knows an instance: its node, and which start on that node."""
        return instance_label(self.hostname, self.start)


@dataclass(frozen=True, slots=True)
class AddBack:
    """When one LB took an instance back."""

    lb: LB
    marked_up: float | None  # None: it did not, or it never took the host out

    def after(self, instant: float | None) -> float | None:
        """Seconds from `instant` (T1, say) to the mark-up."""
        if self.marked_up is None or instant is None:
            return None
        return self.marked_up - instant


def read_instances(path: Path) -> list[InstanceTruth]:
    """Every instance in one apiserver's truth file, in start order."""
    found = []
    for start, records in enumerate(process_records(path), 1):
        listening = first(records, Listening)
        if listening is None:
            raise TruthError(f"{path}: process {start}: no `listening` begins its records")
        found.append(_instance(start, listening, records))
    return found


def _instance(start: int, listening: Listening, records: Sequence[TruthRecord]) -> InstanceTruth:
    return InstanceTruth(
        hostname=listening.host,
        apiserver=listening.apiserver,
        holder=listening.holder,
        start=start,
        listening=listening.wall,
        ready=_wall(first(records, Ready)),
        serving=_wall(first(records, Serving)),
        early_ready=listening.early_ready,
        early=tuple(_early(r) for r in of_kind(records, EarlyAnswered)),
    )


def _wall(record: TruthRecord | None) -> float | None:
    return None if record is None else record.wall


def _early(record: EarlyAnswered) -> EarlyTruth:
    asked = record.request
    return EarlyTruth(
        audit_id=asked.audit_id,
        received=asked.received,
        settled=record.wall,
        answer=record.answer,
        status=record.status,
        how=record.how,
        after_ready=asked.after_ready,
        path=asked.path,
        user_agent=asked.user_agent,
        peer=asked.peer,
    )


def all_instances(paths: Iterable[Path]) -> list[InstanceTruth]:
    """Every instance of every truth file, in the order they listened."""
    return sorted((i for path in paths for i in read_instances(path)), key=lambda i: i.listening)


def add_backs(
    instances: Sequence[InstanceTruth], lbs: Mapping[LB, LbTruth]
) -> dict[str, tuple[AddBack, ...]]:
    """Per instance (by label), each LB's add-back; direct paths (localhost) have none."""
    found = {}
    for instance in instances:
        later = [
            i.listening
            for i in instances
            if i.hostname == instance.hostname and i.listening > instance.listening
        ]
        before = min(later, default=math.inf)
        backs = []
        for kind, lb in lbs.items():
            if lb.reaches is not None:
                continue
            up = _taken_back(lb.events, instance, before)
            backs.append(AddBack(kind, None if math.isinf(up) else up))
        found[instance.label] = tuple(backs)
    return found


def _taken_back(events: Sequence[ServerEvent], instance: InstanceTruth, before: float) -> float:
    """When an LB took a restarted process back: at its first mark-up after the process began
    to listen; but as it began to listen where the LB still held its host then and marked it
    down only later (a slow LB, marking down the old process after the new one answered
    through it: its mark-up after that is no add-back). Infinity: it never took it out."""
    host, listening = instance.hostname, instance.listening
    marked_down_later = any(
        e.server == host and not e.up and listening < e.wall < before for e in events
    )
    if instance.start > 1 and marked_down_later and held(events, host, listening):
        return listening
    return first_up(events, host, listening, before)


def early_by_audit_id(instances: Iterable[InstanceTruth]) -> dict[str, tuple[str, EarlyTruth]]:
    """Each early request by its Audit-ID, with the label of the instance it reached."""
    return {e.audit_id: (i.label, e) for i in instances for e in i.early}
