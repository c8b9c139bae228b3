"""The daemon's side of adaptive sampling: the current pace, shared by every scheduler.

The pipeline decides the pace from the samples (`core.pace`); the pacer holds it, tells each
scheduler its mean gap, and wakes every scheduler sleeping out a quiet gap when the window
rate engages, so that each stream's next request goes out at once rather than up to a quiet
gap later.
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

    def __init__(self, quiet: float | None) -> None:
        self.quiet = quiet
        self.pace = Pace.QUIET if quiet else Pace.WINDOW
        self._released: set[str] = set()  # streams at the quiet rate inside a window
        self._sleepers: dict[str, Wakeable] = {}

    def attach(self, scheduler: Wakeable) -> None:
        self._sleepers[scheduler.stream_name] = scheduler

    def gap(self, stream: str, window_gap: float) -> float:
        """A stream's mean gap now, given its gap at the window rate."""
        if self.quiet is not None and (self.pace is Pace.QUIET or stream in self._released):
            return max(self.quiet, window_gap)
        return window_gap

    def set(self, change: PaceChange) -> None:
        if self.quiet is None:
            return
        if change.stream is None:
            self.pace = change.pace
            self._released.clear()
            woken = list(self._sleepers.values()) if change.pace is Pace.WINDOW else []
        elif change.pace is Pace.QUIET:
            self._released.add(change.stream)
            woken = []
        else:
            self._released.discard(change.stream)
            woken = [s for name, s in self._sleepers.items() if name == change.stream]
        for scheduler in woken:
            scheduler.wake()
