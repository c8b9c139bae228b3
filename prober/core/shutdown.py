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
counted in `stragglers` and otherwise ignored. A sample the daemon's stop cut
(`Sample.stopped`) is ignored altogether: it is no late answer, no failure and no witness.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
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
from prober.core.reaction import CLOSED, FAILURE, RESTARTED, Rotation, StreamReaction
from prober.core.windows import OpenWindow, Wanted, t0_range

DEFAULT_GRACE = 30.0  # origin closes a window delay + 30 s after first seen
DEFAULT_FAILURE_LOOKBACK = 600.0  # longer than any platform's graceful termination
# Hosts are the server's to name: a server answering shutdown=true with a new host each time
# opened 2,000 windows in 4,000 samples. A cluster has a handful of apiservers.
DEFAULT_MAX_OPEN = 16
_SAME_SHUTDOWN_SLACK = 1.0  # a restart never comes within a second of the last T0


@dataclass(frozen=True, slots=True)
class WindowOpened:
    host: str
    node: str | None
    delay: float
    first_seen_t: float
    stream: str
    elapsed: float
    same_node: bool = False  # of the same-node tracker (`core.trackers`)


ShutdownEvent = WindowOpened | Window


class ShutdownTracker:
    """Shutdown windows for every host, fed every sample of every stream. `same_node`: it is
    fed the same-node samples (`core.samenode`) and marks its windows so; `on_own_node`:
    whether a host runs on the prober's own node, whose windows no LB's sample bounds on the
    path that is fed the others."""

    def __init__(
        self,
        grace: float = DEFAULT_GRACE,
        node_of: Callable[[str], str | None] | None = None,
        failure_lookback: float = DEFAULT_FAILURE_LOOKBACK,
        max_open: int = DEFAULT_MAX_OPEN,
        *,
        same_node: bool = False,
        on_own_node: Callable[[str], bool] | None = None,
    ) -> None:
        self._same_node = same_node
        self._on_own_node = on_own_node or (lambda _host: False)
        self._grace = grace
        self._max_open = max_open
        self._node_of = node_of or (lambda _host: None)
        self._lookback = failure_lookback
        self._open: dict[str, OpenWindow] = {}
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
        if sample.stopped:
            return []  # cut by the stop: no answer, no failure, no witness of any LB
        self._streams.setdefault(sample.stream, sample.stream_id)
        events: list[ShutdownEvent] = list(self._close_expired(sample.t))
        if sample.failed and not sample.early:  # the restarted instance's, not the shutdown's
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
            if sample.lb is not LB.LOCALHOST and self._on_own_node(window.host):
                # Through an LB, the prober's own node's apiserver answers same-node samples
                # only (`core.samenode`), which this path never sees: nothing here shows
                # whether the LB still sent to it, so nothing bounds the LB's reaction.
                continue
            seen, rotation = window.stream(sample)
            if sample.replaced_port is not None and header is not None:
                # The kept connection it replaced was gone; answered elsewhere, the replacement
                # did not reach the host either. One that failed unanswered may have reached
                # it (localhost has no other; an LB may still route there): its own failure,
                # at its end, is the witness.
                seen.note_witness(sample, CLOSED)
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
        return all(window.settles(known) for window in self._open.values())

    def wanted(self, target: str, lb: LB) -> Wanted | None:
        """The first open window where a new-connection stream through this LB met the host
        late and nothing bounds its reaction yet (`core.burst` asks for the rest)."""
        if not self._open:
            return None  # every sample outside a window asks: the cheap answer first
        fresh = [s.name for s in self._streams.values() if s.connection is Connection.NEW
                 and (s.target, s.lb) == (target, lb)]  # fmt: skip
        for window in self._open.values():
            found = window.wanted(target, lb, fresh)
            if found is not None:
                return found
        return None

    def rising(self, stream: StreamId) -> bool:
        """Whether this is a new-connection stream of an LB whose reaction is open: where
        denser fresh connections tighten the bound (`core.pace`'s `Pace.FAST`)."""
        if stream.connection is not Connection.NEW or not self._open:
            return False
        return self.wanted(stream.target, stream.lb) is not None

    def rests(self, stream: str) -> tuple[float, float] | None:
        """From when until when this stream has nothing to learn though its reaction is
        open, in run time (`OpenWindow.rests`, over every open window); None: it has, or
        it is bounded (see `settled`)."""
        known = self._streams.get(stream)
        if known is None:
            return None
        start, until = -math.inf, math.inf
        for window in self._open.values():
            span = window.rests(known)
            if span is None:
                return None
            start, until = max(start, span[0]), min(until, span[1])
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

    def _feed_late(self, sample: Sample, window: OpenWindow | None) -> list[ShutdownEvent]:
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
            window = OpenWindow(header.host, header.delay, sample.t)
            window.false_lo = self._false_since.pop(header.host, -math.inf)
            self._open[header.host] = window
            node = self._node_of(header.host)
            events.append(
                WindowOpened(
                    header.host,
                    node,
                    header.delay,
                    sample.t,
                    sample.stream,
                    header.elapsed,
                    self._same_node,
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

    def _close(self, window: OpenWindow, closed_by: ClosedBy, end_t: float) -> Window:
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
            same_node=self._same_node,
        )

    def _stream_result(
        self, name: str, window: OpenWindow, t0s: tuple[float, float, float], end_t: float
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
