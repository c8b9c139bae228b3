"""Apiserver instances: each process a host runs, when its `/readyz` went true (T1), when each
LB took it back, and what it failed while it was young.

A restart is a new instance on the same host: the shutdown header names the host (the
APIServerID), never the process, so the answers alone tell two instances on one host apart by
order. The old process answers `shutdown=true` to every request it reads after its T0, so a
`shutdown=false` answer from the host, sent after a `shutdown=true` answer from it had
ended (`_Host.cut`), is a newer process's: no bound is lost to that. The identity Lease
(`IdentitySeen`, read by the daemon) names each process by its holder; a process seen first
by its Lease and then by its answers is one instance. A Lease that changes holder with no
shutdown seen (a crash) cuts at the new holder's renewal: the old process was gone by then.

T1, with its bound (`t1_lo`, `t1_hi`, and which signal set each):
- from below: the old process answering (`old-instance`: the new one could not listen yet),
  and the new holder's first Lease write, from a post-start hook before `/readyz` goes true
  (`lease-first-write`), or the read before it where that write is not provably the first
  (`lease-read`);
- on the direct path, for the prober's own node's apiserver: `GET /readyz` asked while it
  restarts (`ReadyzAnswer`): not ok bounds T1 below, ok above, as tight as the polling;
- from above: the end of the new process's first answer through an LB (`<lb> answer`): every
  LB, the service network's endpoints too, takes a server only once its `/readyz` said ok.
  Not an LB that sent a fresh connection to nothing while the host restarted: it may never
  have taken the host out (a slow LB), and routes to the new process whatever its `/readyz`
  says (`_Live.blind`); its add-back is then bounded below by its misses alone.

Add-back, per LB (target x LB) of a restarted instance: the instant A the LB took it back
lies at or before the end of its first answer through that LB (any connection: it was opened
through the LB after the process started), and after T1. Fresh connections the LB sent
elsewhere bound A from below as they bound a reaction (`core.reaction`): if A came before the
m-th such miss before the first hit, m fresh choices in a row missed a server in rotation,
a chance of at most `MISS_CHANCE`. Not where a request through the LB went unanswered
before its first answer (a hang sends nothing: it may have reached the new process), nor
through an LB that ramps a server it took back up slowly (HAProxy's `slowstart`): there A
is bounded below by T1 alone. The add-back is A - T1:
`[A_lo - t1_hi, A_hi - t1_lo]`.

Early: a failed answer from a restarted instance (its header says it answered; a 5xx, a
403 to good credentials, a 429) sent in its first `early_for` seconds after T1 (its upper
bound, or its first sign before any LB answered it) marks the sample `early`: the other edge,
an instance routed to before it could serve, not a shutdown's. Unanswered failures carry no
header: through an LB while an instance is young they are counted `unattributed` on it.

An `Instance` record is written once every LB has served the instance and its young period is
over, `ADD_BACK_HORIZON` after its first sign, or at the end of the run (`complete` False).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import ClassVar

from prober.core.models import (
    LB,
    Connection,
    ErrorClass,
    IdentitySeen,
    ReadyzAnswer,
    Sample,
    StreamId,
)
from prober.core.numbers import micro
from prober.core.reaction import misses_needed

DEFAULT_EARLY_FOR = 90.0
ADD_BACK_HORIZON = 600.0  # seconds after its first sign: an LB that never took it back
IN_FLIGHT = 60.0  # longer than a request lasts (the daemon's timeout, 5 s by default)
_RECENT = 512  # fresh answers kept per LB: the misses that bound an add-back from below
# What a fresh connection meets where the LB sent it to no listening server.
_NOTHING_THERE = frozenset({ErrorClass.CONNECT_REFUSED, ErrorClass.CONNECTION_RESET})

OLD_INSTANCE, LEASE_FIRST, LEASE_READ = "old-instance", "lease-first-write", "lease-read"
READYZ_OK, READYZ_NOT_OK = "localhost /readyz ok", "localhost /readyz not ok"

LBKey = tuple[str, LB]  # target x LB: one rotation


def instance_label(where: str, start: int) -> str:
    """An apiserver process as a reader knows it: its node (or host), which start there."""
    return f"{where} #{start}"


@dataclass(frozen=True, slots=True)
class AddBack:
    """When one LB took one restarted instance back; run times, None where unbounded."""

    target: str
    lb: LB
    first_t: float | None  # send time of its first answer through the LB
    added_lo: float | None  # where the LB's add-back instant lies
    added_hi: float | None
    seconds: float | None  # first_t - t1, within the bound below
    seconds_lo: float | None
    seconds_hi: float | None
    early: int = 0  # early failures it sent there
    unattributed: int = 0  # failures with no header through it while the instance was young


@dataclass(frozen=True, slots=True)
class Instance:
    """One restarted apiserver process: its T1 and every LB's add-back."""

    KIND: ClassVar[str] = "instance"
    host: str
    node: str | None
    start: int  # which start on its host, from 1, as the prober saw them
    holder: str | None  # its identity Lease's holder; None: never read
    first_t: float  # its first sign: an answer on any path, or its Lease
    t1: float | None
    t1_lo: float | None
    t1_hi: float | None
    t1_lo_by: str | None
    t1_hi_by: str | None
    lbs: tuple[AddBack, ...]
    early: int
    complete: bool

    @property
    def label(self) -> str:
        """As a reader knows it: its node (its host if none), and which start there."""
        return instance_label(self.node or self.host, self.start)


@dataclass(slots=True)
class _Live:
    """What the tracker knows of one apiserver process while it runs: when it was first
    seen, the bounds of its T1 and who gave them, and from when its LBs' misses count."""

    host: str
    start: int
    holder: str | None
    first_t: float
    t1_lo: float | None = None
    t1_lo_by: str | None = None
    t1_hi: float | None = None
    t1_hi_by: str | None = None
    since: float = -math.inf  # its host's cut: misses of the LBs count from here
    # LBs that sent a fresh connection to nothing while its host restarted: they may never
    # have taken the host out, so their answers say nothing of its /readyz.
    blind: set[LBKey] = field(default_factory=set)
    # LBs through which a request sent before their first answer from it went unanswered: it
    # may have reached this process (a hang sends nothing), so their misses bound nothing.
    hidden: set[LBKey] = field(default_factory=set)
    hits: dict[LBKey, tuple[float, float, float | None]] = field(default_factory=dict)
    early: dict[LBKey, int] = field(default_factory=dict)
    unattributed: dict[LBKey, int] = field(default_factory=dict)

    def lower(self, t: float | None, by: str) -> None:
        if t is not None and (self.t1_lo is None or t > self.t1_lo):
            self.t1_lo, self.t1_lo_by = t, by

    def young_until(self, early_for: float) -> float:
        return (self.first_t if self.t1_hi is None else self.t1_hi) + early_for


@dataclass(slots=True)
class _Host:
    instances: list[_Live] = field(default_factory=list)
    cut: float | None = None  # answers sent after this are a newer process's
    cut_t: float = -math.inf  # when the cut was set: a host that never comes back is let go
    last_true_t: float | None = None  # the newest shutdown=true answer's send time
    lease_ahead: bool = False  # the newest instance came by its Lease, not yet by answers
    blind: set[LBKey] = field(default_factory=set)  # `_Live.blind`, since the cut
    hidden: set[LBKey] = field(default_factory=set)  # `_Live.hidden`: hangs since the cut


class InstanceTracker:
    """Fed every sample (`mark`, before the other trackers) and identity record (`identify`)."""

    def __init__(
        self,
        streams: Iterable[StreamId],
        *,
        early_for: float = DEFAULT_EARLY_FOR,
        slow_start: Collection[LB] = (),
    ) -> None:
        """`slow_start`: LBs that ramp a server taken back up slowly; their misses bound
        nothing, so their add-back is bounded below by T1 only."""
        self.early_for = early_for
        self._slow_start = frozenset(slow_start)
        self._lbs = sorted({(s.target, s.lb) for s in streams if s.lb is not LB.LOCALHOST})
        self._hosts: dict[str, _Host] = {}
        self._nodes: dict[str, str] = {}
        self._recent: dict[LBKey, deque[tuple[float, str]]] = {}
        self._open: list[_Live] = []  # restarted, not yet written
        self._now = -math.inf  # the newest end of a sample fed
        # The Audit-ID of the newest sample that was an LB's first answer from an instance:
        # the event log keeps it (`core.compaction`), though it may end the restart.
        self.hit: str | None = None

    # -- what feeds it ---------------------------------------------------------------------

    def identify(self, seen: IdentitySeen) -> None:
        if seen.node:
            self._nodes[seen.host] = seen.node
        host = self._hosts.setdefault(seen.host, _Host())
        if any(i.holder == seen.holder for i in host.instances):
            return
        newest = host.instances[-1] if host.instances else None
        lower = seen.renew_t if seen.first else seen.before_t
        by = LEASE_FIRST if seen.first else LEASE_READ
        if newest is not None and newest.holder is None and host.cut is None:
            newest.holder = seen.holder  # the process its answers showed: its Lease now
            if newest in self._open:
                newest.lower(lower, by)
            return
        if newest is None:
            host.instances.append(_Live(seen.host, 1, seen.holder, seen.renew_t or seen.t))
            return
        if host.cut is None:  # no shutdown seen: the old process was gone by this renewal
            host.cut = seen.renew_t if seen.renew_t is not None else seen.t
            host.cut_t = host.cut
            host.blind, host.hidden = set(), set()
        self._restarted(host, seen.host, seen.renew_t or seen.t, seen.holder)
        host.lease_ahead = True
        host.instances[-1].lower(lower, by)

    def mark(self, sample: Sample) -> Sample:
        """The sample as the trackers should see it: `early` where it is, and only there (a
        replay decides again over what the log says)."""
        early = self._early(sample)
        return sample if sample.early == early else dataclasses.replace(sample, early=early)

    def _early(self, sample: Sample) -> bool:
        if sample.stopped:
            return False
        header = sample.shutdown
        if header is None:
            if sample.failed:
                self._unanswered(sample)
            return False
        instance = self._answered_by(header.host, header.shutdown, sample)
        if instance is None or instance not in self._open:
            return False
        self._note_answer(instance, sample)
        if sample.failed and sample.t <= instance.young_until(self.early_for):
            key = (sample.target, sample.lb)
            instance.early[key] = instance.early.get(key, 0) + 1
            return True
        return False

    def readyz(self, answer: ReadyzAnswer) -> None:
        """The prober's own node's apiserver on `GET /readyz`: a new process's `ok` bounds
        its T1 above (it went true by the answer's end), anything else below (it was still
        false when the request was read, after it was sent)."""
        header = answer.shutdown
        if header is None:
            return
        instance = self._answered_by(header.host, header.shutdown, answer)
        if instance is None or instance not in self._open:
            return
        instance.first_t = min(instance.first_t, answer.t)
        if answer.status == HTTPStatus.OK:
            if instance.t1_hi is None or answer.end < instance.t1_hi:
                instance.t1_hi, instance.t1_hi_by = answer.end, READYZ_OK
        elif answer.status is not None:
            instance.lower(answer.t, READYZ_NOT_OK)

    def feed(self, sample: Sample) -> list[Instance]:
        """The instances done by the time `sample` came (fed after `mark`)."""
        self._now = max(self._now, sample.end)
        if sample.shutdown is not None and not sample.same_node:
            self._note_fresh(sample)
        return self._finish(lambda i: self._ready_to_write(i, sample.t))

    def close(self) -> list[Instance]:
        return self._finish(lambda _i: True)

    # -- state -------------------------------------------------------------------------------

    @property
    def restarting(self) -> frozenset[str]:
        """Hosts shutting down, or back and not yet served through every LB."""
        since = self._now - ADD_BACK_HORIZON
        hosts = {
            h for h, host in self._hosts.items() if host.cut is not None and host.cut_t > since
        }
        return frozenset(hosts | {i.host for i in self._open if self._missing(i)})

    def waiting_on(self, target: str, lb: LB) -> bool:
        """Whether a restarted instance has not yet been served through this LB."""
        return any((target, lb) not in i.hits for i in self._open)

    # -- the parts -------------------------------------------------------------------------

    def _answered_by(
        self, name: str, shutdown: bool, sample: Sample | ReadyzAnswer
    ) -> _Live | None:
        host = self._hosts.setdefault(name, _Host())
        if not host.instances:
            host.instances.append(_Live(name, 1, None, sample.t))
        newest = host.instances[-1]
        if shutdown:
            if host.lease_ahead:  # the old process, still draining: the new one is not up
                newest.lower(sample.t, OLD_INSTANCE)
                return None
            if host.cut is None:
                host.cut_t = sample.t
                host.blind, host.hidden = set(), set()
            host.cut = sample.end if host.cut is None else min(host.cut, sample.end)
            host.last_true_t = max(host.last_true_t or -math.inf, sample.t)
            return None
        if host.cut is None or sample.t <= host.cut:
            return newest if not host.lease_ahead else None
        if not host.lease_ahead:
            self._restarted(host, name, sample.t, None)
        host.lease_ahead = False
        host.cut = None
        newest = host.instances[-1]
        newest.first_t = min(newest.first_t, sample.t)
        return newest

    def _restarted(self, host: _Host, name: str, first_t: float, holder: str | None) -> None:
        start = host.instances[-1].start + 1 if host.instances else 1
        live = _Live(name, start, holder, first_t, since=host.cut_t, blind=set(host.blind))
        live.hidden = set(host.hidden)
        live.lower(host.last_true_t, OLD_INSTANCE)
        host.instances.append(live)
        self._open.append(live)

    def _note_answer(self, instance: _Live, sample: Sample) -> None:
        instance.first_t = min(instance.first_t, sample.t)
        if sample.lb is LB.LOCALHOST or sample.same_node:
            return  # a direct path: no LB asked its /readyz first
        key = (sample.target, sample.lb)
        if key not in instance.blind and (instance.t1_hi is None or sample.end < instance.t1_hi):
            instance.t1_hi, instance.t1_hi_by = sample.end, f"{sample.lb} answer"
        hit = instance.hits.get(key)
        if hit is None or sample.end < hit[1]:
            instance.hits[key] = (sample.t, sample.end, self._miss_bound(key, instance, sample))
            self.hit = sample.audit_id

    def _miss_bound(self, key: LBKey, live: _Live, hit: Sample) -> float | None:
        """The send time of the m-th fresh answer from another server before `hit`, since
        the restart began (the event log keeps every answer from then on: a replay counts
        the same ones)."""
        if key[1] in self._slow_start:
            return None  # its rotation is not balanced while the new server's weight ramps up
        recent = [(t, h) for t, h in self._recent.get(key, ()) if live.since <= t < hit.t]
        misses = sorted((t for t, h in recent if h != live.host), reverse=True)
        servers = len({h for _t, h in recent} | {live.host})
        needed = misses_needed(servers)
        return misses[needed - 1] if len(misses) >= needed else None

    def _note_fresh(self, sample: Sample) -> None:
        if sample.lb is LB.LOCALHOST or not _lb_chose(sample):
            return
        assert sample.shutdown is not None
        key = (sample.target, sample.lb)
        recent = self._recent.setdefault(key, deque(maxlen=_RECENT))
        recent.append((sample.t, sample.shutdown.host))

    def _unanswered(self, sample: Sample) -> None:
        if sample.lb is LB.LOCALHOST or sample.same_node:
            return
        key = (sample.target, sample.lb)
        self._suspect(key, sample)
        if any(host.cut is not None for host in self._hosts.values()):
            return  # a shutdown under way: the failure may well be its edge's
        for instance in self._open:
            lo = instance.t1_lo if instance.t1_lo is not None else instance.first_t
            if lo <= sample.t <= instance.young_until(self.early_for):
                instance.unattributed[key] = instance.unattributed.get(key, 0) + 1

    def _suspect(self, key: LBKey, sample: Sample) -> None:
        """What an unanswered request through an LB puts in doubt: that the LB took a
        restarting host out (`blind`), that its misses before its first answer from the new
        process are misses (`hidden`)."""
        if _lb_chose(sample) and sample.error in _NOTHING_THERE:
            # A connection the LB sent to nothing: it may still route to a restarting host.
            for host in self._hosts.values():
                if host.cut is not None:
                    host.blind.add(key)
            for instance in self._open:
                if key not in instance.hits:
                    instance.blind.add(key)
        if sample.error is ErrorClass.TIMEOUT:  # a hang: perhaps on a process not yet seen
            for host in self._hosts.values():
                if host.cut is not None:
                    host.hidden.add(key)
        for instance in self._open:
            hit = instance.hits.get(key)
            since = instance.since if instance.t1_lo is None else instance.t1_lo
            if sample.t >= since and (hit is None or sample.t < hit[0]):
                instance.hidden.add(key)

    def _missing(self, instance: _Live) -> bool:
        return any(key not in instance.hits for key in self._lbs)

    def _ready_to_write(self, instance: _Live, now: float) -> bool:
        if now > instance.first_t + ADD_BACK_HORIZON:
            return True
        # A request sent while it was young may still be in flight: its end (a hang's timeout)
        # can still void an LB's misses, so the record waits for the slowest to come back.
        settled = instance.young_until(self.early_for) + IN_FLIGHT
        return not self._missing(instance) and now > settled

    def _finish(self, done: Callable[[_Live], bool]) -> list[Instance]:
        finished = [i for i in self._open if done(i)]
        self._open = [i for i in self._open if i not in finished]
        return [self._record(i, complete=not self._missing(i)) for i in finished]

    def _record(self, live: _Live, *, complete: bool) -> Instance:
        lo, hi = live.t1_lo, live.t1_hi
        t1 = None if lo is None or hi is None else (lo + max(lo, hi)) / 2
        return Instance(
            host=live.host,
            node=self._nodes.get(live.host),
            start=live.start,
            holder=live.holder,
            first_t=live.first_t,
            t1=_us(t1),
            t1_lo=_us(lo),
            t1_hi=_us(hi),
            t1_lo_by=live.t1_lo_by,
            t1_hi_by=live.t1_hi_by,
            lbs=tuple(self._add_back(live, key, t1) for key in self._lbs),
            early=sum(live.early.values()),
            complete=complete,
        )

    def _add_back(self, live: _Live, key: LBKey, t1: float | None) -> AddBack:
        hit = live.hits.get(key)
        first_t, added_hi, sampled = hit if hit is not None else (None, None, None)
        t1_lo = None if key in live.blind else live.t1_lo  # a blind LB may route before T1
        if key in live.hidden or key in live.blind:
            sampled = None  # an unanswered request may have been its first to the process
        lows = [x for x in (sampled, t1_lo) if x is not None]
        added_lo = max(lows) if lows and added_hi is not None else None
        if added_lo is not None and added_hi is not None:
            added_lo = min(added_lo, added_hi)
        seconds_lo = seconds_hi = seconds = None
        if added_hi is not None and live.t1_lo is not None:
            seconds_hi = added_hi - live.t1_lo
            if added_lo is not None and live.t1_hi is not None:
                seconds_lo = max(0.0, added_lo - live.t1_hi)
        if first_t is not None and t1 is not None:
            seconds = first_t - t1
            if seconds_lo is not None:
                seconds = max(seconds, seconds_lo)
            if seconds_hi is not None:
                seconds = min(seconds, seconds_hi)
        return AddBack(
            target=key[0],
            lb=key[1],
            first_t=first_t,
            added_lo=_us(added_lo),
            added_hi=_us(added_hi),
            seconds=_us(seconds),
            seconds_lo=_us(seconds_lo),
            seconds_hi=_us(seconds_hi),
            early=live.early.get(key, 0),
            unattributed=live.unattributed.get(key, 0),
        )


def _us(value: float | None) -> float | None:
    return None if value is None else micro(value)


def _lb_chose(sample: Sample) -> bool:
    """Whether the LB chose a server for this request: it opened its connection (a connect
    that failed has no age; an answer in a log from before ages were kept has none either,
    and a reused stream's then says nothing)."""
    if sample.connection is Connection.NEW or sample.connection_age == 0.0:
        return True
    return sample.connection_age is None and sample.failed
