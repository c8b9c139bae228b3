"""Where a stream's true reaction to a shutdown lies, given its sampling.

The LB chose the server for a request at some instant between its send time `t` and its end.
The last late request L reached the shutting-down server, so the LB still routed to it at or
after `t_L`: the reaction is at least `t_L - t0_hi`. An upper bound needs a later request on
the same stream that shows the LB had stopped, and what counts as shown depends on how the LB
picks a server:

* a request after L that failed on a fresh connection, or on the kept connection L went
  over, or that reached the restarted server (`shutdown=false` from the same host), proves
  the old server no longer served the stream by that request's end;
* a request after L on a fresh connection answered by another server proves nothing on its
  own when the LB balances each new connection over k servers: it may just not have been the
  old server's turn. After m such misses, the chance that the LB still had the server in
  rotation and never chose it is (1 - 1/k)^m; the bound is the end of the m-th miss, with m
  set so that chance is at most `MISS_CHANCE`. k is the number of servers that answered the
  stream during the window;
* a request over a kept connection to another server proves nothing at all: that connection
  is pinned, it never asked the LB. A kept connection to the old server gets its witness when
  it is closed or broken (a 429 and `Connection: close`, a GOAWAY, a reset): its own failure,
  or the replacement the worker opens for it, answered by another server (`Sample.replaced_port`
  names the connection it replaced; `closed`, at the replacement's send time), usually long
  before m misses. A replacement that failed unanswered may itself have reached the old
  server (localhost has no other), so only its failure, at its end, bounds the reaction. Fresh
  connections sent elsewhere do not bound a kept one: an LB that keeps flows (GCP, Azure,
  conntrack on the service network) keeps it on the old server after dropping the server
  from its rotation, until the server closes it.

One rotation serves every fresh connection through an LB, whichever stream (protocol) sent
it: the LB's last fresh connection to the old server is each fresh stream's last late one,
for its reaction and its lower bound, and the misses count from it.

So `reaction_lo = t_L - t0_hi` and `reaction_hi = (end of the witness) - t0_lo`, with
`bound_by` naming the witness (`failure`, `restarted`, `sampling`, `closed`); None where
nothing after L showed it before the window closed. Only samples fed while the window is open
count (the compactor logs them all), so the live tracker and a replay of the event log agree.

Adaptive sampling asks the same question early (`settled`): once a stream's reaction to every
open window is bounded above, and a sampling bound is confirmed by m more misses, faster
samples of it add nothing, and it may go back to the quiet rate (`core.pace`). The chance
(1 - 1/k)^m is the chance that the m requests just before the LB's true switch all missed:
it needs the sampling to go on until the switch, which the confirmation gives; a stream that
went quiet at the m-th miss would keep every run of m misses by chance as its bound.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from prober.core.models import Sample

MISS_CHANCE = 1e-4  # how unlikely a balanced LB's reaction may lie past `reaction_hi`
SAMPLING, FAILURE, RESTARTED, CLOSED = "sampling", "failure", "restarted", "closed"


def misses_needed(servers: int) -> int:
    """Requests answered elsewhere that bound a reaction through an LB balancing over
    `servers`: the least m with (1 - 1/servers)^m <= MISS_CHANCE."""
    if servers <= 1:
        return 1
    return math.ceil(math.log(MISS_CHANCE) / math.log(1.0 - 1.0 / servers))


@dataclass(slots=True)
class Rotation:
    """What one LB (target x LB) showed of its rotation during a window, from all its streams:
    which servers answered through it, which fresh connections it sent elsewhere, and the
    last fresh connection it sent to the shutting-down server."""

    hosts: set[str] = field(default_factory=set)
    misses: list[tuple[float, float]] = field(default_factory=list)  # (t, end), sorted
    late_t: float = -math.inf
    late_end: float = -math.inf

    def add_miss(self, sample: Sample) -> None:
        bisect.insort(self.misses, (sample.t, sample.end))  # nearly in order: cheap

    def add_late(self, sample: Sample) -> None:
        """A fresh connection it sent to the server: it had the server in rotation then,
        whichever of its streams asked."""
        if sample.t > self.late_t:
            self.late_t, self.late_end = sample.t, sample.end

    def misses_after(self, after: float) -> int:
        """Fresh connections sent elsewhere after `after`."""
        return len(self.misses) - bisect.bisect_right(self.misses, (after, math.inf))

    def needed(self, server: str) -> int:
        """m: the misses that bound a reaction, for the servers seen."""
        return misses_needed(len(self.hosts | {server}))

    def bound(self, server: str, after: float, times: int = 1) -> float | None:
        """The end of the m-th fresh connection sent elsewhere after `after` and after the
        last one it sent to the server (None: m not reached): where the LB had `server` out
        of rotation. `times` 2: the end of the 2m-th, which confirms it (`settled`)."""
        first = bisect.bisect_right(self.misses, (max(after, self.late_t), math.inf))
        index = first + times * self.needed(server) - 1
        if index >= len(self.misses):
            return None
        return max(self.misses[index][1], self.late_end)


@dataclass(slots=True)
class StreamReaction:
    """What one stream showed of one window: its late requests, and what came after them."""

    late: int = 0
    max_elapsed: float | None = None
    last_late_t: float | None = None
    last_late_end: float = -math.inf
    last_late_port: int | None = None  # the connection the last late request went over
    kept_elsewhere: bool = False  # a kept connection of it answered from another server
    # Conclusive witnesses sent after the last late request, in arrival order: (t, end, kind,
    # the local port of a kept connection that failed or was replaced: a witness only if it
    # is the late one's).
    after: list[tuple[float, float, str, int | None]] = field(default_factory=list)

    def note_late(self, sample: Sample, elapsed: float) -> None:
        self.late += 1
        self.max_elapsed = max(self.max_elapsed or 0.0, elapsed)
        if self.last_late_t is None or sample.t > self.last_late_t:
            self.last_late_t = sample.t
            self.last_late_end = sample.end
            self.last_late_port = sample.local_port
            self.after = [a for a in self.after if a[0] > sample.t]

    def note_witness(self, sample: Sample, kind: str) -> None:
        """A request of this stream that failed unanswered, reached the restarted server, or
        went over a connection that replaced a kept one (`CLOSED`)."""
        if self.last_late_t is not None and sample.t <= self.last_late_t:
            return
        if kind == CLOSED:  # the kept one was gone by the time this one was opened
            self.after.append((sample.t, sample.t, kind, sample.replaced_port))
            return
        port = sample.local_port if kind == FAILURE and sample.reused is True else None
        self.after.append((sample.t, sample.end, kind, port))

    def witness(
        self,
        rotation: Rotation,
        server: str,
        since: float = -math.inf,
        reused: bool = False,
        times: int = 1,
    ) -> tuple[float, str] | None:
        """The earliest end among the requests after the last late one that show the LB had
        stopped, and its kind; None if none does. Never before the last late one's end: the
        LB chose the server for it at some instant up to then. Only requests sent at or after
        `since` (T0's lower bound) count: the LB chose the server of one sent before T0
        before the shutdown began, so it shows nothing of the LB's reaction (on a loaded
        machine such a request may end well inside the window).

        A fresh connection's stream is the LB's: its bound is never before the end of the
        LB's last fresh connection to the server, whichever stream sent it. A reused
        stream's reaction is its kept connection's, and fresh connections sent elsewhere
        say nothing of that (an LB that keeps flows keeps it on the server after dropping
        the server from its rotation): only its own failures, its replacement, or the
        restarted server bound it."""
        found = [
            (end, kind)
            for t, end, kind, port in self.after
            if t >= since and (port is None or port == self.last_late_port)
        ]  # fmt: skip
        after = since if self.last_late_t is None else max(self.last_late_t, since)
        if not reused:
            sampled = rotation.bound(server, after, times)
            if sampled is not None:
                found.append((sampled, SAMPLING))
        if not found:
            return None
        end, kind = min(found)
        floor = self.last_late_end if reused else max(self.last_late_end, rotation.late_end)
        return max(end, floor), kind

    def settled(
        self, rotation: Rotation, server: str, reused: bool, since: float = -math.inf
    ) -> bool:
        """Whether more samples could still move this stream's bound: False while its
        reaction is not bounded above, or bounded by sampling and not yet confirmed by m more
        misses. A reused stream that met the window only over kept connections to other
        servers has no reaction to bound.

        Why confirm: the chance (1 - 1/k)^m holds looking back from the LB's true switch, at
        the misses just before it, which needs the sampling to go on until the switch. A
        stream that went quiet at the m-th miss would turn every run of m misses by chance
        (some hundred chances in a half-minute reaction) into a bound nothing corrects."""
        if reused and self.last_late_t is None:
            return self.kept_elsewhere
        return self.witness(rotation, server, since, reused, times=2) is not None
