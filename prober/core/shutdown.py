"""Shutdown windows per apiserver, and how long each stream's LB kept routing to it.

A window opens when a host first answers `shutdown=true`, and closes when that host answers
`shutdown=false` again (it restarted), `delay + grace` after it was first seen, or at the end of
the run (openshift/origin's rules). Per stream it counts late requests (answered with
`shutdown=true`), their largest `elapsed`, the last one's send time, and failed requests.

Estimating T0, the instant the host's `/readyz` went false
-----------------------------------------------------------
The header's `elapsed` is rounded to whole seconds (Go's `Duration.Round`, halves away from
zero), so one sample alone places T0 within a second. But we know when every request was sent
(`t`) and when it ended (`t + dur`), and the server read its clock at some instant `tau` in
between. Each sample therefore constrains T0:

* `shutdown=true, elapsed=e`: the true elapsed `tau - T0` lies in `[e - 0.5, e + 0.5]` and is
  never negative, so `T0` lies in `[t - e - 0.5, t + dur - max(e - 0.5, 0)]`.
* `shutdown=false` from the same host, sent at `t`: the server had not started shutting down
  at `tau >= t`, so `T0 > t`.

Intersecting every constraint gives `[t0_lo, t0_hi]`, and we report its midpoint as `t0`, which
minimises the worst-case error. The false-side bound comes from the newest `shutdown=false`
sent before the window opened and from slow `shutdown=false` answers that arrive after it
opened but were sent before `t0_hi` (so they cannot come from a restarted server). A
`shutdown=false` sent at or after `t0_hi` can only come from a new instance: it closes the
window. With samples every `g` seconds reaching the host, the interval narrows to about
`2 * (g + dur)`, far below the incumbent's one second, and it shrinks further whenever two
neighbouring samples straddle a rounding step of `elapsed`.

The per-stream reaction is `last_late_t - t0`: how long after the host went not-ready this
stream's LB still sent it a request. Its error is at most the stream's sampling gap (the LB may
have switched any time before the next sample) plus half the width of `[t0_lo, t0_hi]`.

Where the true reaction lies, given the sampling, is `core.reaction`'s business: each window
keeps, per stream, what bounds its reaction, and per LB what its rotation showed.

If constraints contradict each other (clock drift, or a restarted server answering within
`t0_hi`), the false-side bound is dropped first; if the late samples alone disagree, the
interval collapses to the midpoint of the crossing. A late sample whose own T0 range falls on a
window already closed for that host is a straggler of that shutdown, not a new one: it is
counted in `stragglers` and otherwise ignored.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prober.core.models import (
    LB,
    ClosedBy,
    Connection,
    ErrorClass,
    Sample,
    StreamId,
    Window,
    WindowStream,
)
from prober.core.reaction import (
    CLOSED,
    FAILURE,
    RESTARTED,
    Rotation,
    StreamReaction,
)

ROUNDING = 0.5  # elapsed is rounded to whole seconds
DEFAULT_GRACE = 30.0  # origin closes a window delay + 30 s after first seen
DEFAULT_FAILURE_LOOKBACK = 600.0  # longer than any platform's graceful termination
# Hosts are the server's to name: a server answering shutdown=true with a new host each time
# opened 2,000 windows in 4,000 samples. A cluster has a handful of apiservers.
DEFAULT_MAX_OPEN = 16
_SAME_SHUTDOWN_SLACK = 1.0  # a restart never comes within a second of the last T0
KEPT_REST_AFTER = 2.0  # a kept flow the LB did not reset this long after it dropped the server


def t0_range(sample: Sample, elapsed: float) -> tuple[float, float]:
    """Where T0 must lie given one `shutdown=true` sample with this elapsed."""
    return sample.t - elapsed - ROUNDING, sample.end - max(elapsed - ROUNDING, 0.0)


@dataclass(frozen=True, slots=True)
class WindowOpened:
    host: str
    node: str | None
    delay: float
    first_seen_t: float
    stream: str
    elapsed: float


@dataclass(frozen=True, slots=True)
class Wanted:
    """What would bound an LB's fresh connections' reaction to one shutdown and confirm the
    bound: `missing` more fresh connections answered elsewhere after the last late one (sent
    at `after`); `have` of them came already. Why the burst brings the confirmation too: a
    bound whose sampling slowed down the moment it formed would stand longer uncorrected
    when it is wrong; asked for in one go, the m misses after it are as dense as the m that
    made it (a simulation asking for the bounding misses only, with bursts after two misses,
    had 2 truths outside their bounds in 270, where `MISS_CHANCE` allows 0.03)."""

    host: str
    after: float
    have: int
    missing: int
    bounding: int  # of `missing`, those that bound it; the rest confirm the bound


@dataclass(slots=True)
class _OpenWindow:
    host: str
    delay: float
    first_seen_t: float
    late_lo: float = -math.inf
    late_hi: float = math.inf
    false_lo: float = -math.inf
    seen: dict[str, StreamReaction] = field(default_factory=dict)
    rotations: dict[tuple[str, LB], Rotation] = field(default_factory=dict)

    def stream(self, sample: Sample) -> tuple[StreamReaction, Rotation]:
        """What this window keeps of the sample's stream and of its LB's rotation."""
        seen = self.seen.setdefault(sample.stream, StreamReaction())
        return seen, self.rotations.setdefault((sample.target, sample.lb), Rotation())

    def bounds(self) -> tuple[float, float]:
        """[t0_lo, t0_hi] from every constraint that does not contradict the late samples."""
        lo, hi = self.late_lo, self.late_hi
        if lo > hi:
            mid = (lo + hi) / 2
            return mid, mid
        if self.false_lo <= hi:
            lo = max(lo, self.false_lo)
        return lo, hi

    def constrain(self, sample: Sample, elapsed: float) -> None:
        lo, hi = t0_range(sample, elapsed)
        self.late_lo = max(self.late_lo, lo)
        self.late_hi = min(self.late_hi, hi)


ShutdownEvent = WindowOpened | Window


class ShutdownTracker:
    """Shutdown windows for every host, fed every sample of every stream."""

    def __init__(
        self,
        grace: float = DEFAULT_GRACE,
        node_of: Callable[[str], str | None] | None = None,
        failure_lookback: float = DEFAULT_FAILURE_LOOKBACK,
        max_open: int = DEFAULT_MAX_OPEN,
    ) -> None:
        self._grace = grace
        self._max_open = max_open
        self._node_of = node_of or (lambda _host: None)
        self._lookback = failure_lookback
        self._open: dict[str, _OpenWindow] = {}
        self._closed_t0: dict[str, tuple[float, float]] = {}
        self._false_since: dict[str, float] = {}
        self._streams: dict[str, StreamId] = {}
        self._failures: dict[str, deque[float]] = {}
        self._newest_failure = -math.inf
        self.stragglers = 0
        self.refused = 0  # late answers of a host past `max_open` open windows: no window

    @property
    def open_hosts(self) -> frozenset[str]:
        return frozenset(self._open)

    def feed(self, sample: Sample) -> list[ShutdownEvent]:
        self._streams.setdefault(sample.stream, sample.stream_id)
        events: list[ShutdownEvent] = list(self._close_expired(sample.t))
        if sample.failed:
            self._note_failure(sample)
        header = sample.shutdown
        if not sample.held:  # a held sample was fed before any window it now meets opened
            self._note_elsewhere(sample)
        if header is None:
            return events
        window = self._open.get(header.host)
        if sample.held and (header.shutdown or window is not None):
            # A held sample was fed live before any window of its host opened (or it would
            # have been logged where it came, as late samples always are): it bounds the T0
            # of a window still to open, and nothing else.
            return events
        if header.shutdown:
            events.extend(self._feed_late(sample, window))
        elif window is None:
            # An answer sent before the host's previous shutdown says nothing of its next one
            # (and a replay may meet it later than the live tracker did).
            if sample.t >= self._closed_t0.get(header.host, (-math.inf, -math.inf))[1]:
                since = self._false_since.get(header.host, -math.inf)
                self._false_since[header.host] = max(since, sample.t)
                _bound(self._false_since, 4 * self._max_open)
        elif sample.t >= window.bounds()[1]:
            window.stream(sample)[0].note_witness(sample, RESTARTED)
            events.append(self._close(window, ClosedBy.RECOVERED, sample.t))
        else:
            window.false_lo = max(window.false_lo, sample.t)
        return events

    def _note_elsewhere(self, sample: Sample) -> None:
        """Every open window of another host than the one that answered: a fresh connection
        answered elsewhere is a miss of its LB's rotation, a request that failed unanswered a
        witness that its stream no longer reached the host. An answer over a kept connection
        says nothing of the rotation: that connection is pinned, it never asked the LB."""
        header = sample.shutdown
        for window in self._open.values():
            if header is not None and header.host == window.host:
                continue
            seen, rotation = window.stream(sample)
            if sample.replaced_port is not None:
                seen.note_witness(sample, CLOSED)  # the kept connection it replaced was gone
            if header is not None:
                rotation.hosts.add(header.host)
                if sample.reused is not True:
                    rotation.add_miss(sample)
                else:
                    seen.kept_elsewhere = True
            elif sample.failed and sample.error is not ErrorClass.TIMEOUT:
                # A request that timed out may have reached the server: no witness.
                seen.note_witness(sample, FAILURE)

    def settled(self, stream: str) -> bool:
        """Whether every open window has bounded this stream's reaction (`core.reaction`):
        while one has not, it is worth sampling at the window rate."""
        known = self._streams.get(stream)
        if known is None:
            return not self._open
        for window in self._open.values():
            seen = window.seen.get(stream)
            rotation = window.rotations.get((known.target, known.lb))
            if seen is None or rotation is None:
                return False  # nothing of it since the window opened
            reused = known.connection is Connection.REUSED
            if not seen.settled(rotation, window.host, reused, window.bounds()[0]):
                return False
        return True

    def wanted(self, target: str, lb: LB) -> Wanted | None:
        """The first open window where a new-connection stream through this LB met the host
        late and nothing bounds its reaction yet (`core.burst` asks for the rest)."""
        for window in self._open.values():
            rotation = window.rotations.get((target, lb))
            if rotation is None or rotation.hosts <= {window.host}:
                continue  # nothing through it, or only the server: no choice of the LB's
            since = window.bounds()[0]
            after = max(
                (
                    seen.last_late_t
                    for name, seen in window.seen.items()
                    if seen.last_late_t is not None
                    and self._is_fresh(name, target, lb)
                    and seen.witness(rotation, window.host, since) is None
                ),
                default=None,
            )
            if after is None:
                continue
            have = rotation.misses_after(max(after, rotation.late_t))
            needed = rotation.needed(window.host)
            missing = max(2 * needed - have, 1)  # `StreamReaction.settled`
            return Wanted(window.host, after, have, missing, max(needed - have, 0))
        return None

    def rising(self, stream: StreamId) -> bool:
        """Whether this is a new-connection stream of an LB whose reaction is open: where
        denser fresh connections tighten the bound (`core.pace`'s `Pace.FAST`)."""
        if stream.connection is not Connection.NEW or not self._open:
            return False
        return self.wanted(stream.target, stream.lb) is not None

    def _is_fresh(self, name: str, target: str, lb: LB) -> bool:
        stream = self._streams.get(name)
        return (
            stream is not None
            and stream.connection is Connection.NEW
            and (stream.target, stream.lb) == (target, lb)
        )

    def rests(self, stream: str) -> tuple[float, float] | None:
        """From when until when this stream has nothing to learn though its reaction is
        open, in run time; None: it has (or it is bounded: see `settled`). In every open
        window it has not bounded, its reaction can only end with the host's shutdown delay,
        which the header announced, because
        * only the host ever answered through its LB (localhost, a cluster of one); or
        * it is a reused stream whose kept connection is on the host, and its LB's fresh
          connections showed (bounded and confirmed) that the LB dropped the host more than
          `KEPT_REST_AFTER` ago without breaking the kept one: an LB that resets the flows of
          a server it drops (AWS) does so as it drops it; one that did not keeps the flow
          until the server closes it (GCP, Azure, conntrack), at the end of its delay."""
        known = self._streams.get(stream)
        if known is None:
            return None
        start, until = -math.inf, math.inf
        reused = known.connection is Connection.REUSED
        for window in self._open.values():
            seen = window.seen.get(stream)
            rotation = window.rotations.get((known.target, known.lb))
            if seen is None or rotation is None or seen.last_late_t is None:
                return None
            lo = window.bounds()[0]
            if seen.settled(rotation, window.host, reused, lo):
                continue
            if seen.after:
                return None  # something failed, or restarted: watch it
            if rotation.hosts != {window.host}:
                dropped = rotation.bound(window.host, lo, times=2) if reused else None
                if dropped is None:
                    return None  # another server answered, and the LB may still route here
                start = max(start, dropped + KEPT_REST_AFTER)
            until = min(until, lo + window.delay)
        return None if until == math.inf else (start, until)

    def add_stream(self, stream: StreamId) -> None:
        """Make a stream part of every window from now on, even before its first sample.

        The daemon registers its configured streams and `analyze` the run record's, so that
        both list the same streams whichever samples the event log kept."""
        self._streams.setdefault(stream.name, stream)

    def close(self, end_t: float) -> list[Window]:
        """End the run: windows past their deadline close as timeouts, the rest as `end`."""
        closed = self._close_expired(end_t)
        closed.extend(self._close(w, ClosedBy.END, end_t) for w in list(self._open.values()))
        return closed

    def _feed_late(self, sample: Sample, window: _OpenWindow | None) -> list[ShutdownEvent]:
        assert sample.shutdown is not None
        header = sample.shutdown
        events: list[ShutdownEvent] = []
        if window is None:
            if self._is_straggler(sample):
                self.stragglers += 1
                return events
            if len(self._open) >= self._max_open:
                self.refused += 1
                return events
            window = _OpenWindow(header.host, header.delay, sample.t)
            window.false_lo = self._false_since.pop(header.host, -math.inf)
            self._open[header.host] = window
            node = self._node_of(header.host)
            events.append(
                WindowOpened(
                    header.host, node, header.delay, sample.t, sample.stream, header.elapsed
                )
            )
        window.first_seen_t = min(window.first_seen_t, sample.t)
        window.constrain(sample, header.elapsed)
        seen, rotation = window.stream(sample)
        seen.note_late(sample, header.elapsed)
        rotation.hosts.add(header.host)
        if sample.reused is not True:
            rotation.add_late(sample)
        return events

    def _is_straggler(self, sample: Sample) -> bool:
        assert sample.shutdown is not None
        previous = self._closed_t0.get(sample.shutdown.host)
        if previous is None:
            return False
        lo, hi = t0_range(sample, sample.shutdown.elapsed)
        return lo <= previous[1] + _SAME_SHUTDOWN_SLACK and hi >= previous[0] - _SAME_SHUTDOWN_SLACK

    def _close_expired(self, now: float) -> list[Window]:
        events: list[Window] = []
        for window in list(self._open.values()):
            deadline = window.first_seen_t + window.delay + self._grace
            if deadline < now:
                events.append(self._close(window, ClosedBy.TIMEOUT, deadline))
        return events

    def _note_failure(self, sample: Sample) -> None:
        times = self._failures.setdefault(sample.stream, deque())
        times.append(sample.t)
        # Measured from the newest failure, not the newest sample: failures are always logged,
        # so a replay of the event log forgets exactly what the live tracker forgot.
        self._newest_failure = max(self._newest_failure, sample.t)
        horizon = self._newest_failure - self._lookback
        for window in self._open.values():
            horizon = min(horizon, window.bounds()[0])
        while times and times[0] < horizon:
            times.popleft()

    def _close(self, window: _OpenWindow, closed_by: ClosedBy, end_t: float) -> Window:
        del self._open[window.host]
        lo, hi = window.bounds()
        t0 = (lo + hi) / 2
        self._closed_t0[window.host] = (lo, hi)
        _bound(self._closed_t0, 4 * self._max_open)
        return Window(
            host=window.host,
            node=self._node_of(window.host),
            delay=window.delay,
            first_seen_t=window.first_seen_t,
            t0=t0,
            t0_lo=lo,
            t0_hi=hi,
            closed_by=closed_by,
            end_t=end_t,
            streams=tuple(
                self._stream_result(name, window, (lo, t0, hi), end_t) for name in self._streams
            ),
        )

    def _stream_result(
        self, name: str, window: _OpenWindow, t0s: tuple[float, float, float], end_t: float
    ) -> WindowStream:
        stream = self._streams[name]
        lo, t0, hi = t0s
        seen = window.seen.get(name) or StreamReaction()
        failures = sum(1 for t in self._failures.get(name, ()) if lo <= t <= end_t)
        rotation = window.rotations.get((stream.target, stream.lb), Rotation())
        reused = stream.connection is Connection.REUSED
        last = seen.last_late_t
        if last is not None and not reused:
            # One rotation serves every fresh connection through the LB, whichever stream
            # sent it: the LB's last one to the server is each fresh stream's reaction.
            last = max(last, rotation.late_t)
        reaction = None if last is None else last - t0
        witness = seen.witness(rotation, window.host, lo, reused)
        if reused and last is None:
            witness = None  # its kept connections were all elsewhere: no reaction to bound
        return WindowStream(
            stream_id=stream,
            late=seen.late,
            max_elapsed=seen.max_elapsed,
            last_late_t=seen.last_late_t,
            reaction=reaction,
            failures=failures,
            reaction_lo=None if last is None else last - hi,
            reaction_hi=None if witness is None else witness[0] - lo,
            bound_by=None if witness is None else witness[1],
        )


def _bound(per_host: dict[str, Any], most: int) -> None:
    """Forget the hosts met longest ago past `most`: what a server names is not ours to keep."""
    while len(per_host) > most:
        del per_host[next(iter(per_host))]
