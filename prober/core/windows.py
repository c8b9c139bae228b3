"""One open shutdown window: what it keeps of T0's constraints, of each stream's reaction and
of each LB's rotation, and what it can say of them while still open: whether a stream's
reaction is bounded (`settles`), what would bound an LB's (`wanted`, for `core.burst`), and
when a stream has nothing to learn (`rests`, for `core.pace`). `core.shutdown` opens and
closes them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from prober.core.models import LB, Connection, Sample, StreamId
from prober.core.reaction import Rotation, StreamReaction

ROUNDING = 0.5  # elapsed is rounded to whole seconds
KEPT_REST_AFTER = 2.0  # a kept flow the LB did not reset this long after it dropped the server
UNBOUNDED = (-math.inf, math.inf)  # a span that constrains no other


def t0_range(sample: Sample, elapsed: float) -> tuple[float, float]:
    """Where T0 must lie given one `shutdown=true` sample with this elapsed."""
    return sample.t - elapsed - ROUNDING, sample.end - max(elapsed - ROUNDING, 0.0)


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
class OpenWindow:
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

    def settles(self, stream: StreamId) -> bool:
        """Whether this window has bounded the stream's reaction (and confirmed a sampling
        bound): `StreamReaction.settled`."""
        seen = self.seen.get(stream.name)
        rotation = self.rotations.get((stream.target, stream.lb))
        if seen is None or rotation is None:
            return False  # nothing of it since the window opened
        reused = stream.connection is Connection.REUSED
        return seen.settled(rotation, self.host, reused, self.bounds()[0])

    def wanted(self, target: str, lb: LB, fresh: Sequence[str]) -> Wanted | None:
        """What would bound and confirm the reaction of this LB's new-connection streams
        (`fresh`, by name), if one met the host late and nothing bounds it yet."""
        rotation = self.rotations.get((target, lb))
        if rotation is None or rotation.hosts <= {self.host}:
            return None  # nothing through it, or only the server: no choice of the LB's
        since = self.bounds()[0]
        unbounded = [
            seen.last_late_t
            for name in fresh
            if (seen := self.seen.get(name)) is not None
            and seen.last_late_t is not None
            and seen.witness(rotation, self.host, since) is None
        ]
        if not unbounded:
            return None
        after = max(unbounded)
        have = rotation.misses_after(max(after, rotation.late_t))
        needed = rotation.needed(self.host)
        missing = max(2 * needed - have, 1)  # `StreamReaction.settled`
        return Wanted(self.host, after, have, missing, max(needed - have, 0))

    def rests(self, stream: StreamId) -> tuple[float, float] | None:
        """From when until when the stream has nothing to learn of this window, in run time
        (`UNBOUNDED` if its reaction is bounded); None: it has. Its reaction can only end
        with the host's shutdown delay, which the header announced, when
        * only the host ever answered through its LB (localhost, a cluster of one); or
        * it is a reused stream whose kept connection is on the host, and its LB's fresh
          connections showed (bounded and confirmed) that the LB dropped the host more than
          `KEPT_REST_AFTER` ago without breaking the kept one: an LB that resets the flows of
          a server it drops (AWS) does so as it drops it; one that did not keeps the flow
          until the server closes it (GCP, Azure, conntrack), at the end of its delay."""
        seen = self.seen.get(stream.name)
        rotation = self.rotations.get((stream.target, stream.lb))
        if seen is None or rotation is None or seen.last_late_t is None:
            return None
        if self.settles(stream):
            return UNBOUNDED
        if seen.after:
            return None  # something failed, or restarted: watch it
        lo = self.bounds()[0]
        if rotation.hosts == {self.host}:
            return -math.inf, lo + self.delay
        if stream.connection is not Connection.REUSED:
            return None  # another server answered, and the LB may still route here
        dropped = rotation.bound(self.host, lo, times=2)
        if dropped is None:
            return None
        return dropped + KEPT_REST_AFTER, lo + self.delay
