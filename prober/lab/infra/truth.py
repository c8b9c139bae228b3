"""Ground truth of a lab run: when each apiserver went not-ready, and when each LB stopped
sending it requests.

Three witnesses, none of them the prober: the apiserver's own record of its lifecycle
signals (its truth log, `core.truthlog`, read here by `read_truth`), HAProxy's log of server
state changes, and the lab's record of when it took an endpoint out of the service network.
From them, per shutdown and LB, the instant after which no request of a stream could reach
the server any more:

* new connections: the LB stops choosing the server (marked down, or out of the endpoints),
  or the server stops listening, whichever comes first;
* reused connections pinned to the server: an LB that resets connections when it marks the
  server down ends them then; otherwise they live until the server answers 429 with
  `Connection: close` (NotAcceptingNewRequest) and, once reconnected, follow the new-connection
  rule.

Times are wall-clock epoch seconds here; `Reaction` values are seconds after T0.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.common.errors import UserError
from prober.core.eventlog import EventLogError, EventLogReader
from prober.core.models import LB
from prober.core.truthlog import (
    TRUTH_TYPES,
    HTTPServerStoppedListening,
    NotAcceptingNewRequest,
    ShutdownInitiated,
    TruthRecord,
    first,
    processes,
)
from prober.lab.infra.backends import Apiserver
from prober.lab.infra.lbstate import LabLB, ServerEvent


class TruthError(UserError, ValueError):
    """A ground-truth file that cannot be read."""


@dataclass(frozen=True, slots=True)
class ShutdownTruth:
    """One graceful termination, from the apiserver's own record."""

    hostname: str
    apiserver: str  # the APIServerID, the `host` of the shutdown header
    t0: float  # ShutdownInitiated: /readyz fails from here
    not_accepting: float  # NotAcceptingNewRequest: 429 + Connection: close from here
    stopped: float  # HTTPServerStoppedListening: new connections are refused from here


def read_truth(path: Path) -> list[TruthRecord]:
    """Every record of an apiserver's truth file (`core.truthlog`), through the event log's
    reader: a truncated last line and kinds it does not know are skipped, any other fault is
    TruthError naming the file, the line and the field."""
    with path.open(encoding="utf-8") as lines:
        reader = EventLogReader(lines, source=str(path), types=TRUTH_TYPES)
        try:
            return [typing.cast(TruthRecord, record) for record in reader]
        except EventLogError as exc:
            raise TruthError(str(exc)) from None


def process_records(path: Path) -> list[list[TruthRecord]]:
    """The records of each server process in one truth file (`core.truthlog.processes`)."""
    return processes(read_truth(path))


def read_shutdowns(path: Path) -> list[ShutdownTruth]:
    """Every shutdown in one apiserver's truth file (restarts append to the same file).

    A shutdown the file does not finish (the server was killed) ends at infinity: it never
    stopped listening gracefully, the LBs' health checks are the only thing that ends it."""
    shutdowns: list[ShutdownTruth] = []
    for process in process_records(path):
        t0 = first(process, ShutdownInitiated)
        if t0 is not None:
            not_accepting = first(process, NotAcceptingNewRequest)
            stopped = first(process, HTTPServerStoppedListening)
            shutdowns.append(
                ShutdownTruth(
                    hostname=t0.host,
                    apiserver=t0.apiserver,
                    t0=t0.wall,
                    not_accepting=math.inf if not_accepting is None else not_accepting.wall,
                    stopped=math.inf if stopped is None else stopped.wall,
                )
            )
    return shutdowns


def first_down(
    events: Iterable[ServerEvent], server: str, after: float, until: float = math.inf
) -> float:
    """When the LB stopped choosing `server` for good: the start of the down period that
    covers `until` (the server stopped listening, the node came back), however long before
    `after` it began; infinity if the LB had it up then. A check that failed for want of a
    core under load may take a healthy server out and put it back (a flap): the LB routed to
    it again after that, so only the last down period counts. Without `until`: the down
    period covering `after`, else the first one after it."""
    ordered = sorted((e for e in events if e.server == server), key=lambda e: e.wall)
    if math.isinf(until):
        before = [e for e in ordered if e.wall < after]
        if before and not before[-1].up:
            return before[-1].wall
        return min((e.wall for e in ordered if not e.up and e.wall >= after), default=math.inf)
    start = math.inf
    for event in reversed([e for e in ordered if e.wall <= until]):
        if event.up:
            break
        start = event.wall  # the earliest of the last run of downs
    return start


def held(events: Iterable[ServerEvent], server: str, at: float) -> bool:
    """Whether the LB's set held `server` at `at`: its last change of it by then marked it up,
    or it had changed nothing of it yet (an LB starts with every server up)."""
    changes = [e for e in events if e.server == server and e.wall <= at]
    return not changes or max(changes, key=lambda e: e.wall).up


def first_up(
    events: Iterable[ServerEvent], server: str, after: float, before: float = math.inf
) -> float:
    """When the LB first marked `server` up at or after `after` (and before `before`: the
    next process on that host started); infinity if it did not."""
    ups = (e.wall for e in events if e.server == server and e.up and after <= e.wall < before)
    return min(ups, default=math.inf)


@dataclass(frozen=True, slots=True)
class Reaction:
    """Seconds after T0 until which a stream of this LB could still reach the server. A
    kept connection the LB did not break reaches it once more after NotAcceptingNewRequest:
    its next request, answered 429 with `Connection: close`, whenever the client sends it
    before the listener closes. So its truth is the span [reused, reused_until], as long as
    the 429 phase lasts (long while watches drain in a grace period)."""

    new: float
    reused: float
    reused_until: float


def expected_reaction(shutdown: ShutdownTruth, lb_down: float, reset_on_down: bool) -> Reaction:
    routed = min(lb_down, shutdown.stopped)
    if reset_on_down:
        reused = until = routed
    else:
        reused = max(min(shutdown.not_accepting, shutdown.stopped), routed)
        until = max(reused, shutdown.stopped)
    t0 = shutdown.t0
    return Reaction(new=routed - t0, reused=reused - t0, reused_until=until - t0)


@dataclass(frozen=True, slots=True)
class LbTruth:
    """What the lab knows about one LB: its state changes and whether it resets connections.
    `events` is empty for a direct path (localhost), which never takes a server out, and
    `reaches` names the servers a direct path goes to (None: every server)."""

    lb: LB
    events: Sequence[ServerEvent]
    reset_on_down: bool
    reaches: frozenset[str] | None = None


def lab_truth(
    apiservers: Sequence[Apiserver], lbs_run: Mapping[LB, LabLB]
) -> tuple[list[ShutdownTruth], dict[LB, LbTruth]]:
    """A lab run's truth: every shutdown in T0 order, from each apiserver's record, and each
    LB's state changes (localhost: the client's stand-in, master-0's apiserver alone)."""
    shutdowns: list[ShutdownTruth] = []
    for server in apiservers:
        shutdowns += read_shutdowns(server.truth_path)
    lbs = {
        kind: LbTruth(kind, tuple(lb.events), reset_on_down=lb.profile.reset_on_down)
        for kind, lb in lbs_run.items()
    }
    first = frozenset({apiservers[0].hostname})
    lbs[LB.LOCALHOST] = LbTruth(LB.LOCALHOST, (), reset_on_down=False, reaches=first)
    return sorted(shutdowns, key=lambda s: s.t0), lbs
