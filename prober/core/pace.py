"""When to sample fast: adaptive sampling, fed sample by sample.

Precision is only needed while an apiserver shuts down, and the header says when that is:
from the instant its shutdown starts every answer from it carries `shutdown=true`, for the
whole of its shutdown delay (70 s and more) before it stops serving. So the streams sample at
a quiet rate (like openshift/origin's samplers, about one request a second) until any sample
of any stream is late (`shutdown=true`) or failed; then every stream samples at the window
rate, until no shutdown window is open and `settle` seconds passed without either.

Within a window, precision is only needed where the answer is still open. A stream whose
reaction to every open window is bounded above (`core.reaction`: its LB has shown it stopped
routing there) and that is not in a disruption interval goes back to the quiet rate, after the
first `HOLD` seconds of the window; a late answer on it, a failure or a new window brings it
back. Kept connections to the shutting-down server stay fast for the whole delay; new
connections through an LB that dropped the server within seconds do not. A stream whose
reaction can only end with the shutdown delay its server announced (`rests`: localhost, any
LB that never showed another server, a kept connection an LB did not break as it dropped the
server) rests at the quiet rate too, until `WAKE` seconds before that delay ends: in between
it could only answer late, again and again.

Where the answer is open on an LB that balances, the LB's new-connection streams sample
faster still (`Pace.FAST`, `rise` times the window rate): the bound on such a reaction is
as tight as the fresh connections near the LB's switch are dense (`core.reaction`), and the
witness bursts of `core.burst` only help once the LB has switched.

What the quiet rate costs: T0's lower bound comes from the last `shutdown=false` before the
window, up to a quiet gap earlier. What gets it back: in the `HOLD` seconds at the window rate,
the sample in which `elapsed` steps from 0 s to 1 s (the header rounds to whole seconds, so at
T0 + 0.5 s) pins T0's fraction of a second to within the window gap (`core.shutdown`).

Times are the samples' own (send time and end): no clock is read here. A sample the daemon's
stop cut (`Sample.stopped`) is none of these: the pace passes over it.
"""

from __future__ import annotations

from prober.core.models import Pace, PaceChange, Sample, parse_rfc3339, rfc3339

DEFAULT_SETTLE = 30.0
HOLD = 2.0  # every stream fast this long after a window opens: T0's rounding step
WAKE = 5.0  # a resting stream is fast again this long before the delay it waits for ends


class PaceTracker:
    def __init__(self, settle: float = DEFAULT_SETTLE, wake: float = WAKE) -> None:
        self._settle = settle
        self._wake = wake
        self.pace = Pace.QUIET
        self._last_alarm = float("-inf")
        self._engaged = float("-inf")
        self.streams: dict[str, Pace] = {}  # streams off the window rate inside a window

    @property
    def released(self) -> set[str]:
        """Streams back at the quiet rate inside a window."""
        return {name for name, pace in self.streams.items() if pace is Pace.QUIET}

    def feed(
        self,
        sample: Sample,
        *,
        windows_open: bool,
        opened: bool = False,
        settled: bool = False,
        disrupted: bool = False,
        rests: tuple[float, float] | None = None,
        rising: bool = False,
    ) -> list[PaceChange]:
        """The changes this sample makes. `windows_open`: any shutdown window open once it
        was fed; `opened`: it opened one; `settled`: its stream's reaction to every open window
        is bounded; `disrupted`: its stream is in a disruption interval; `rests`: from when its
        reaction can only end when a shutdown delay ends, and then (`ShutdownTracker.rests`);
        `rising`: it is a new-connection stream of an LB whose reaction is open
        (`ShutdownTracker.wanted`)."""
        if sample.stopped:
            return []  # the daemon stops: neither an alarm nor calm, and no time passed
        changes: list[PaceChange] = []
        alarm = _alarm(sample)
        if alarm:
            self._last_alarm = max(self._last_alarm, sample.end)
        if (self.pace is Pace.QUIET and alarm) or (self.pace is Pace.WINDOW and opened):
            changes.append(self._set(sample, Pace.WINDOW, alarm or "a new shutdown window"))
        elif self.pace is Pace.WINDOW and self._settled_down(sample, windows_open):
            reason = f"no shutdown window open, nothing late or failed for {self._settle:g} s"
            changes.append(self._set(sample, Pace.QUIET, reason))
        if self.pace is Pace.WINDOW:
            resting = rests is not None and rests[0] <= sample.end < rests[1] - self._wake
            change = self._stream(sample, settled, resting, disrupted, rising)
            if change is not None:
                changes.append(change)
        return changes

    def _settled_down(self, sample: Sample, windows_open: bool) -> bool:
        return not windows_open and sample.end - self._last_alarm >= self._settle

    def _set(self, sample: Sample, pace: Pace, reason: str) -> PaceChange:
        self.pace = pace
        self.streams.clear()
        if pace is Pace.WINDOW:
            self._engaged = sample.end
        return PaceChange(sample.end, _end_ts(sample), pace, reason)

    def _stream(
        self, sample: Sample, settled: bool, resting: bool, disrupted: bool, rising: bool
    ) -> PaceChange | None:
        stream = sample.stream
        hold = not (settled or resting) or disrupted or sample.end - self._engaged < HOLD
        pace = Pace.FAST if hold and rising else Pace.WINDOW if hold else Pace.QUIET
        was = self.streams.get(stream, Pace.WINDOW)
        if pace is was:
            return None
        if pace is Pace.WINDOW:
            del self.streams[stream]
        else:
            self.streams[stream] = pace
        why = _why(pace, was, settled=settled, disrupted=disrupted)
        return PaceChange(sample.end, _end_ts(sample), pace, why, stream)


def _why(pace: Pace, was: Pace, *, settled: bool, disrupted: bool) -> str:
    if pace is Pace.QUIET and settled:
        return "its reaction to every open window is bounded"
    if pace is Pace.QUIET:
        return "its reaction can only end with the shutdown delay its server announced"
    if pace is Pace.FAST:
        return "its LB has not shown that it stopped routing to the server"
    if disrupted:
        return "in a disruption interval"
    if was is Pace.FAST:
        return "its LB's reaction is bounded"
    return "its reaction is open again"


def _alarm(sample: Sample) -> str:
    """Why this sample calls for the window rate ('' if it does not)."""
    if sample.late and sample.shutdown is not None:
        return f"shutdown=true from {sample.shutdown.host} on {sample.stream}"
    if sample.failed and sample.error is not None:
        return f"{sample.error} on {sample.stream}"
    return ""


def _end_ts(sample: Sample) -> str:
    return rfc3339(parse_rfc3339(sample.ts) + sample.dur)
