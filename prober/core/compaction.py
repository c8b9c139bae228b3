"""Which samples the event log must keep so that replaying it reproduces the trackers exactly.

At the default rates the daemon takes hundreds of samples a second, almost all of them plain
successes that change nothing; a 4-hour log of every sample would be gigabytes. The trackers
only depend on:

* every failed, late (`shutdown=true`), header-less or stopped sample (cut by the daemon's
  stop: the trackers pass over it, the record counts it), every one sent again (its
  `retried` is what the report counts) and every one of a witness burst (`core.burst`: how
  many requests the bounds cost is the report's to count): always kept;
* every sample that made a tracker emit something (an interval closed, a window opened or
  timed out, a window recovered): kept, in the same order, so a replay emits the same thing;
* every `shutdown=false` answer from a host whose window is open (it narrows T0): kept;
* every answered sample while any shutdown window is open: the answers from other servers
  are what bounds each stream's reaction from above (`core.shutdown`);
* every answered sample through an LB while an apiserver restarts, from its first
  `shutdown=true` answer until every LB served its next instance (`Trackers.restarting`):
  T1, each LB's add-back and the misses that bound it come from them (`core.instances`);
* per host, the newest-sent `shutdown=false` before a window opens (the lower bound on T0):
  held back and written just before the sample that opened the window, marked `held` so that
  the disruption tracker ignores it on replay: fed that late, a success could close an interval
  it did not close when it arrived;
* per stream, the newest-sent success when a disruption interval opens (the lower bound on its
  start, `core.disruption`): written, `held`, just before the failure that opened it, unless
  it is in the log already;
* the success that closed a late failure's interval the moment the failure arrived (sent after
  it, answered before it): written, `held`, just before that failure, so that a replay has it,
  unless the log has it already (it was kept when it came, or it is also the witness).
* per kept connection, the newest-sent answer, when a failure or a resend on that connection
  is put down to its server (`core.connection_age.Attributed`): written, `held`, just before
  it, unless the log has it already.

Everything else is a success that moved no state, and is counted by the `summary` records
instead. `tests/core/test_compaction.py` checks the claim over generated runs.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable

from prober.core.connection_age import Attributed
from prober.core.disruption import HORIZON, DisruptionStarted
from prober.core.models import Sample
from prober.core.shutdown import WindowOpened
from prober.core.trackers import Trackers


class Compactor:
    """Fed each sample after the trackers, with what they emitted; returns what to write."""

    def __init__(self) -> None:
        self._held: dict[str, Sample] = {}
        self._newest_ok: dict[str, Sample] = {}  # per stream, as the disruption tracker's
        self._logged: set[str] = set()  # streams whose newest success is in the log
        self._written = _WrittenSuccesses()

    def select(
        self,
        sample: Sample,
        events: Iterable[object],
        open_hosts: frozenset[str],
        *,
        needed: bool = False,
    ) -> list[Sample]:
        if sample.stopped:
            return [sample]  # always logged; no success a tracker could meet as a witness
        events = list(events)
        out = self._held_before(events)
        emitted = bool(events) or needed
        header = sample.shutdown
        keep = emitted or sample.error is not None or sample.late or sample.retried is not None
        keep = keep or sample.burst is not None
        if header is not None and open_hosts:
            keep = True
        if header is not None and not header.shutdown and header.host not in open_hosts:
            self._note_ready(header.host, sample, kept=keep)
        if not sample.failed:
            newest = self._newest_ok.get(sample.stream)
            if newest is None or sample.t > newest.t:
                self._newest_ok[sample.stream] = sample
                self._logged.discard(sample.stream)
        if keep:
            out.append(sample)
        for written in out:
            newest = self._newest_ok.get(written.stream)
            if newest is not None and written.audit_id == newest.audit_id:
                self._logged.add(written.stream)
            if not written.failed:
                self._written.add(written)
        return out

    def _held_before(self, events: list[object]) -> list[Sample]:
        """The held samples a replay must meet before the sample that emitted `events`."""
        out: list[Sample] = []
        for event in events:
            if isinstance(event, WindowOpened):
                held = self._held.pop(event.host, None)
                if held is not None:
                    out.append(dataclasses.replace(held, held=True))
            elif isinstance(event, DisruptionStarted):
                out.extend(self._witness(event))
                closer = event.closer
                if closer is not None and not self._has(closer, out):
                    out.append(dataclasses.replace(closer, held=True))
            elif isinstance(event, Attributed):
                out.extend(self._answer(event.by, out))
        return out

    def _answer(self, by: Sample, pending: list[Sample]) -> list[Sample]:
        """The answer a failure or resend on its connection was put down to, unless the log
        has it: a failed one always is."""
        if by.failed or self._has(by, pending):
            return []
        header = by.shutdown
        if header is not None and self._held.get(header.host) is by:
            del self._held[header.host]  # in the log now, early enough for the T0 it bounds
        return [dataclasses.replace(by, held=True)]

    def _has(self, sample: Sample, pending: list[Sample]) -> bool:
        """Whether the log has `sample` already, or is about to (it is also the witness)."""
        ids = {p.audit_id for p in pending}
        return sample.audit_id in self._written or sample.audit_id in ids

    def _witness(self, started: DisruptionStarted) -> list[Sample]:
        """The success that bounds an interval's start, unless the log has it already."""
        after = started.after
        if after is None or started.stream in self._logged:
            return []
        header = after.shutdown
        if header is not None and self._held.get(header.host) is after:
            del self._held[header.host]  # in the log now, early enough for the T0 it bounds
        return [dataclasses.replace(after, held=True)]

    def _note_ready(self, host: str, sample: Sample, *, kept: bool) -> None:
        """Remember the newest-sent `shutdown=false` of a host that has no open window."""
        held = self._held.get(host)
        if held is not None and held.t >= sample.t:
            return  # the held one is still the newest
        if kept:
            self._held.pop(host, None)  # the log already has the newest
        else:
            self._held[host] = sample


class Compactors:
    """A `Compactor` per path of `core.trackers` (through an LB, same-node): each path's
    trackers depend on that path's samples only, and a held witness of one path must not
    stand in for another's."""

    def __init__(self) -> None:
        self._paths = {False: Compactor(), True: Compactor()}  # by `Sample.same_node`

    def select(self, sample: Sample, events: Iterable[object], trackers: Trackers) -> list[Sample]:
        open_hosts = trackers.path_of(sample).shutdown.open_hosts
        if not sample.same_node:  # a restart's answers show each LB's add-back
            open_hosts = open_hosts | trackers.restarting
        # An LB's first answer from a new process is kept, though it may end the restart.
        needed = trackers.instances.hit == sample.audit_id
        return self._paths[sample.same_node].select(sample, events, open_hosts, needed=needed)


class _WrittenSuccesses:
    """The audit IDs of the successes written in the last HORIZON seconds of send time: the
    window in which one can still turn up as a late failure's closer."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._sent: deque[tuple[float, str]] = deque()
        self._newest = float("-inf")

    def add(self, sample: Sample) -> None:
        if sample.audit_id in self._ids:
            return
        self._ids.add(sample.audit_id)
        self._sent.append((sample.t, sample.audit_id))
        self._newest = max(self._newest, sample.t)
        # Arrival order is nearly send order, so trimming from the left is close enough: an
        # ID kept a little longer costs a few bytes, one dropped early a duplicate line.
        while self._sent and self._sent[0][0] < self._newest - HORIZON:
            self._ids.discard(self._sent.popleft()[1])

    def __contains__(self, audit_id: object) -> bool:
        return audit_id in self._ids
