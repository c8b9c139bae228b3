"""The daemon's side of adaptive sampling: the current pace, shared by every scheduler.

The pipeline decides the pace from the samples (`core.pace`); the pacer holds it, tells each
scheduler its mean gap, and wakes every scheduler sleeping out a quiet gap when the window
rate engages, so that each stream's next request goes out at once rather than up to a quiet
gap later. Inside a window a stream may be off the window rate: back at the quiet gap, or
`rise` times faster (`Pace.FAST`).
"""

from __future__ import annotations

from typing import Protocol

from prober.core.models import Pace, PaceChange


class Wakeable(Protocol):
    stream_name: str

    def wake(self) -> None: ...


class Pacer:
    """`quiet`: the mean gap per stream while no apiserver shuts down; None for no quiet rate
    (always the window rate)."""

    def __init__(self, quiet: float | None, rise: float = 1.0) -> None:
        self.quiet = quiet
        self.rise = rise
        self.pace = Pace.QUIET if quiet else Pace.WINDOW
        self._streams: dict[str, Pace] = {}  # streams off the window rate inside a window
        self._sleepers: dict[str, Wakeable] = {}

    def attach(self, scheduler: Wakeable) -> None:
        self._sleepers[scheduler.stream_name] = scheduler

    def gap(self, stream: str, window_gap: float) -> float:
        """A stream's mean gap now, given its gap at the window rate."""
        if self.quiet is None:
            return window_gap
        pace = self._streams.get(stream, self.pace) if self.pace is Pace.WINDOW else self.pace
        if pace is Pace.QUIET:
            return max(self.quiet, window_gap)
        return window_gap / self.rise if pace is Pace.FAST else window_gap

    def set(self, change: PaceChange) -> None:
        if self.quiet is None:
            return
        if change.stream is None:
            self.pace = change.pace
            self._streams.clear()
            woken = list(self._sleepers.values()) if change.pace is Pace.WINDOW else []
        elif change.pace is Pace.QUIET:
            self._streams[change.stream] = Pace.QUIET
            woken = []
        else:
            if change.pace is Pace.WINDOW:
                self._streams.pop(change.stream, None)
            else:
                self._streams[change.stream] = change.pace
            woken = [s for name, s in self._sleepers.items() if name == change.stream]
        for scheduler in woken:
            scheduler.wake()
