"""Answer times beside availability: per stream, how long its answered requests took before
the run's shutdown windows, inside them and after, and the "slow but up" finding.

Run phase (not a server's `core.phase.ShutdownPhase`: this one is the whole run's, against
every window at once), decided for each sample as the daemon takes it, from the trackers'
state right after that sample:

    before_windows  no shutdown window has opened yet in the run
    in_windows      a window is open, or an apiserver that shut down is back but not yet
                    served through every LB (`Trackers.restarting`): the rollout. It starts
                    with the first answer that opens a window (`shutdown=true`, or a failure
                    the trackers open one for), so the time between a server's T0 and that
                    answer, at most one quiet sampling gap, still counts before
    after_windows   a window has opened and none is open now: between windows and after the
                    last. The settle time (`settle`: still sampled at the window rate) counts
                    here, not in_windows

Only answered requests count (no error class: a timeout or a refusal is disruption, not an
answer time); a request the daemon's stop cut never does, nor a same-node answer (the prober's
own node's apiserver, `core.samenode`: never the LB's). A sample's answer time is its `dur`:
from sending to the answer's end, which on a new connection includes the TCP connect and the
TLS handshake; those two are counted apart as well (`Part`: the sample's `connect` and `tls`),
in histograms of their own keyed `phase/connect` and `phase/tls`.

Buckets: `core.loghist` with each bucket 10 % wider than the one before (`LATENCY_RATIO`),
from 0.1 ms: a p50 or p99 is the upper edge of its bucket, capped at the phase's largest
answer time, so at most 10 % above the true quantile and never below it. The daemon writes
each phase's buckets in every `summary` record (`PhaseLatency`), because compaction drops
plain successes from the event log: `prober analyze` reads them back, so a re-analysis gives
the live figures exactly.

"Slow but up" (`slow_but_up`): a stream whose in-window p99 is past `SLOW_MULTIPLE` times its
quiet p99 (before and after the windows, together) and past the configured floor
(`slow_floor`). A comparison needs at least `MIN_QUIET` quiet answers and `MIN_IN_WINDOW`
answers in the windows: with fewer, a p99 is only the largest few and says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from prober.core.loghist import LogHistogram

LATENCY_RATIO = 1.1  # each bucket 10 % wider than the one before
SLOW_MULTIPLE = 3.0  # in-window p99 past this many quiet p99s (and the floor) is slow
MIN_QUIET = 20  # quiet answers a comparison needs: at 1 s a stream, 20 s of quiet
MIN_IN_WINDOW = 20  # answers in the windows a comparison needs: 1 s at the window rate
DEFAULT_SLOW_FLOOR = 1.0  # seconds: config `slow_floor`'s default


class RunPhase(StrEnum):
    BEFORE = "before_windows"
    IN = "in_windows"
    AFTER = "after_windows"


def run_phase(*, window_open: bool, window_seen: bool) -> RunPhase:
    """The phase of a sample taken while a window is open or not, and whether one has opened
    yet in the run (that one included)."""
    if window_open:
        return RunPhase.IN
    return RunPhase.AFTER if window_seen else RunPhase.BEFORE


@dataclass(frozen=True, slots=True)
class PhaseLatency:
    """One phase's answer times as a summary record writes them: `buckets` by bucket number
    (as text: JSON keys), `LATENCY_RATIO` apart (`core.loghist`)."""

    count: int
    max: float | None
    buckets: Mapping[str, int]

    def histogram(self) -> LogHistogram:
        numbered = {int(k): v for k, v in self.buckets.items()}
        return LogHistogram.restored(LATENCY_RATIO, numbered, self.max)

    @staticmethod
    def of(histogram: LogHistogram) -> PhaseLatency:
        buckets = {str(k): v for k, v in sorted(histogram.buckets.items())}
        largest = None if histogram.max is None else round(histogram.max, 6)
        return PhaseLatency(histogram.count, largest, buckets)


class Part(StrEnum):
    """What of a request a histogram times: the whole answer, or, on a connection the request
    opened, its TCP connect or its TLS handshake (both within the answer time)."""

    ANSWER = "answer"
    CONNECT = "connect"
    TLS = "tls"


def key(phase: RunPhase, part: Part = Part.ANSWER) -> str:
    """A histogram's key in a summary record: the phase for the answer time, else
    `phase/part` (`in_windows/connect`)."""
    return phase.value if part is Part.ANSWER else f"{phase.value}/{part.value}"


class LatencyStats:
    """One stream's answer times (and connect and TLS times), fed sample by sample with the
    phase each was taken in."""

    def __init__(self) -> None:
        self._histograms: dict[str, LogHistogram] = {}

    def feed(self, phase: RunPhase, seconds: float, part: Part = Part.ANSWER) -> None:
        name = key(phase, part)
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = LogHistogram(LATENCY_RATIO)
        histogram.add(seconds)

    def written(self) -> dict[str, PhaseLatency]:
        """Every histogram that has a value, as the summary record carries them."""
        return {k: PhaseLatency.of(self._histograms[k]) for k in sorted(self._histograms)}


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    count: int
    p50: float | None
    p99: float | None


def figures(
    written: Mapping[str, PhaseLatency], part: Part = Part.ANSWER
) -> dict[str, PhaseFigures]:
    """Per phase (every one, empty ones with count 0), the count, p50 and p99 of `part`."""
    out: dict[str, PhaseFigures] = {}
    for phase in RunPhase:
        found = written.get(key(phase, part))
        h = found.histogram() if found is not None else LogHistogram(LATENCY_RATIO)
        out[phase.value] = PhaseFigures(h.count, _r(h.quantile(0.5)), _r(h.quantile(0.99)))
    return out


@dataclass(frozen=True, slots=True)
class SlowButUp:
    """The in-window p99 against the quiet one, and whether it passes the rule."""

    quiet_count: int
    quiet_p99: float | None
    in_count: int
    in_p99: float | None
    slow: bool
    why: str  # the comparison in words, or why none was made


def slow_but_up(written: Mapping[str, PhaseLatency], floor: float) -> SlowButUp:
    """Whether a stream was slow but up: in-window p99 > SLOW_MULTIPLE x quiet p99 and > the
    floor, given enough answers in each (`MIN_QUIET`, `MIN_IN_WINDOW`)."""
    empty = LogHistogram(LATENCY_RATIO)
    quiet_parts = [written[p.value].histogram() for p in (RunPhase.BEFORE, RunPhase.AFTER)
                   if p.value in written]  # fmt: skip
    quiet = empty.merged(quiet_parts)
    inside = written[RunPhase.IN.value].histogram() if RunPhase.IN.value in written else empty
    quiet_p99, in_p99 = _r(quiet.quantile(0.99)), _r(inside.quantile(0.99))
    counts = (quiet.count, quiet_p99, inside.count, in_p99)
    if quiet.count < MIN_QUIET or inside.count < MIN_IN_WINDOW:
        why = (f"not compared: {quiet.count} quiet answers (needs {MIN_QUIET}), "
               f"{inside.count} in the windows (needs {MIN_IN_WINDOW})")  # fmt: skip
        return SlowButUp(*counts, slow=False, why=why)
    assert quiet_p99 is not None
    assert in_p99 is not None
    limit = max(SLOW_MULTIPLE * quiet_p99, floor)
    slow = in_p99 > limit
    why = (
        f"in-window p99 {in_p99:.3f} s {'>' if slow else '<='} {limit:.3f} s "
        f"(max of {SLOW_MULTIPLE:g} x quiet p99 {quiet_p99:.3f} s and floor {floor:g} s)"
    )
    return SlowButUp(*counts, slow=slow, why=why)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
