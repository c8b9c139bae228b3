"""Proof of completeness: per shutdown window and request stream, how much of what the
schedule made due was taken, and the stream's worst sampling gap inside the window.

The gap statistics (`core.gaps`) say how a whole run sampled; nothing there says that a window
had a hole. origin's sampler loses its last samples at shutdown and nobody can tell (origin
#30771). So the daemon counts, live, every tick of each stream: taken (a request sent on the
schedule, counted as a sample once it ended, whether or not the event log keeps it) or skipped
(`daemon.requests.scheduler`: busy, max_in_flight, behind). A window's `due` is the ticks that
fell inside it, `taken` those sent, and its coverage `taken / due`. A skipped tick is placed
when the scheduler skipped it: ticks missed while it was `behind`, when it woke.

The worst gap is judged against an independent limit: `GAP_LIMIT` times the mean gap the
schedule asked of the stream at that time (`scheduled`: the window gap, interval / workers, or
the quiet gap of a stream the pacer let rest, `core.pace`), never against the bound computed
from the same gaps. Of two schedules at the gap's two ends the longer is taken, so a pace change
inside a gap is never held against it. The worst gap is the one largest for its schedule.

Why 4: a healthy schedule makes gaps up to 1.5 times the mean (the jitter, +-`JITTER` 0.5); a
worker whose kept connection is busy skips its tick, and the gap around it then reaches 3
times the mean; the fourth leaves the event loop one mean gap of slack. A paused daemon, a
blocked writer or a starved loop passes it.

Only the daemon can count this (the log drops plain successes, `core.compaction`), so it
writes a `coverage` record per closed window once every request sent before the window's end
has ended (`horizon`: the request timeout plus slack, as `core.gaps`), and `prober analyze`
reads those records back. Times are the samples' own; no clock is read here.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from prober.core.models import WITHOUT_TARGET, OfStream, StreamId, Window

GAP_LIMIT = 4.0  # times the scheduled mean gap: see the module's docstring for why 4
# Seconds of ticks kept before the oldest window's T0 (a window opened at its first sight, its
# T0 up to a quiet gap and the request horizon before it), or, with none, before the newest.
KEEP = 60.0


@dataclass(frozen=True, slots=True)
class CoverageStream(OfStream):
    """What one stream took of one window's ticks, and its worst gap there."""

    stream_id: StreamId = field(metadata=WITHOUT_TARGET)
    due: int  # ticks whose time fell in [t0, end_t]
    taken: int  # of them, requests sent and counted as samples
    skipped: int  # of them, not sent (by the scheduler's reasons)
    gap: float | None  # the worst gap for its schedule; None: no two sends to measure
    gap_start: float | None  # the send time that opened it (run seconds)
    gap_end: float | None  # the one that closed it, or when the record was made
    scheduled: float | None  # the mean gap the schedule asked for over it

    @property
    def share(self) -> float | None:
        """taken / due, or None when nothing was due."""
        return self.taken / self.due if self.due else None

    @property
    def limit(self) -> float | None:
        return None if self.scheduled is None else GAP_LIMIT * self.scheduled


@dataclass(frozen=True, slots=True)
class Coverage:
    """One closed shutdown window's coverage, per request stream."""

    KIND: ClassVar[str] = "coverage"
    host: str
    t0: float
    end_t: float
    streams: tuple[CoverageStream, ...]


@dataclass(slots=True)
class _Stream:
    stream: StreamId
    sends: list[float] = field(default_factory=list)  # send times, sorted
    skips: list[tuple[float, int]] = field(default_factory=list)  # (time, ticks), in order
    schedule: list[tuple[float, float]] = field(default_factory=list)  # (from t, mean gap)

    def scheduled_at(self, t: float) -> float | None:
        at = bisect.bisect_right(self.schedule, (t, float("inf"))) - 1
        return self.schedule[max(at, 0)][1] if self.schedule else None

    def prune(self, before: float) -> None:
        keep = bisect.bisect_left(self.sends, before)
        del self.sends[: max(keep - 1, 0)]  # the send before `before` opens the first gap
        self.skips = [s for s in self.skips if s[0] >= before]


class CoverageTracker:
    """Fed the ticks of every request stream (`sent` for each ticked sample's send time,
    `skipped`), the schedule's mean gaps (`scheduled`) and the closed windows (`window`);
    returns a `Coverage` per window once nothing sent inside it can still arrive."""

    def __init__(self, streams: Iterable[StreamId], horizon: float) -> None:
        self._horizon = horizon
        self._streams = {s.name: _Stream(s) for s in streams}
        self._pending: list[Window] = []
        self._open: dict[str, float] = {}  # host -> first seen, of windows not yet closed
        self._newest = float("-inf")

    def scheduled(self, stream: str, t: float, gap: float) -> None:
        """From run time `t` the schedule asks `stream` for one request every `gap` s."""
        state = self._streams.get(stream)
        if state is not None and (not state.schedule or state.schedule[-1][1] != gap):
            state.schedule.append((t, gap))

    def opened(self, host: str, first_seen_t: float) -> None:
        self._open[host] = first_seen_t

    def sent(self, stream: str, t: float) -> list[Coverage]:
        state = self._streams.get(stream)
        if state is None:
            return []
        bisect.insort(state.sends, t)
        self._newest = max(self._newest, t)
        if not self._pending and not self._open and state.sends[0] < self._newest - 2 * KEEP:
            self._prune()  # no window to count: keep the last KEEP seconds, once a KEEP
        return self._settle(self._newest - self._horizon)

    def skipped(self, stream: str, t: float, count: int) -> None:
        state = self._streams.get(stream)
        if state is not None:
            state.skips.append((t, count))

    def window(self, window: Window) -> list[Coverage]:
        """A closed window; same-node windows repeat an LB window's host and are left out."""
        if not window.same_node:
            self._open.pop(window.host, None)
            self._pending.append(window)
        return self._settle(self._newest - self._horizon)

    def close(self, t: float) -> list[Coverage]:
        """The run ends at `t`: every window still pending is counted as it stands."""
        return self._settle(float("inf"), until=t)

    def _settle(self, frontier: float, until: float | None = None) -> list[Coverage]:
        done = [w for w in self._pending if w.end_t < frontier]
        self._pending = [w for w in self._pending if w.end_t >= frontier]
        now = frontier if until is None else min(frontier, until)  # an open gap's end
        records = [self._coverage(w, now) for w in done]
        if done:
            self._prune()
        return records

    def _prune(self) -> None:
        edges = [w.t0_lo for w in self._pending] + list(self._open.values())
        before = min(edges, default=self._newest) - KEEP
        for state in self._streams.values():
            state.prune(before)

    def _coverage(self, window: Window, now: float) -> Coverage:
        streams = tuple(_of_stream(s, window, now) for s in self._streams.values())
        return Coverage(window.host, window.t0, window.end_t, streams)


def _of_stream(state: _Stream, window: Window, now: float) -> CoverageStream:
    lo = bisect.bisect_left(state.sends, window.t0)
    hi = bisect.bisect_right(state.sends, window.end_t)
    skipped = sum(n for t, n in state.skips if window.t0 <= t <= window.end_t)
    # The gaps that overlap the window: from the last send before it to the first after it
    # (or `now`, when none came after: the stream is not sampling).
    edges = state.sends[max(lo - 1, 0) : hi + 1]
    if not edges or edges[0] > window.t0:
        edges = [window.t0, *edges]
    if edges[-1] <= window.end_t:
        edges.append(max(now, edges[-1]))
    worst: tuple[float, float, float, float] | None = None  # (ratio, start, end, scheduled)
    for start, end in itertools.pairwise(edges):
        scheduled = _longer(state.scheduled_at(start), state.scheduled_at(end))
        ratio = (end - start) / scheduled if scheduled else end - start
        if worst is None or ratio > worst[0]:
            worst = (ratio, start, end, scheduled or 0.0)
    taken = hi - lo
    if worst is None:
        return CoverageStream(state.stream, taken + skipped, taken, skipped, None, None, None, None)
    _, start, end, scheduled = worst
    return CoverageStream(
        state.stream,
        taken + skipped,
        taken,
        skipped,
        round(end - start, 6),
        round(start, 6),
        round(end, 6),
        round(scheduled, 6) if scheduled else None,
    )


def _longer(a: float | None, b: float | None) -> float | None:
    return max((x for x in (a, b) if x is not None), default=None)
