"""The core trackers, wired once: what the daemon's pipeline and `prober analyze`'s replay
both feed, so that "the replay reproduces the daemon" holds by construction.

Each sample goes to the disruption tracker, then to the shutdown tracker, then to the follower
of client-go's retries (`core.perceived`), and their events come back in that order, followed by
what a client felt of each interval they decided (`perceived.Felt`); at the end of the run open
intervals close before open windows, the retries still waiting next, and what was felt last.
A sample that ends a chain of retries made a tracker emit, so the event log keeps it
(`core.compaction`) and a replay ends the chain on the same sample.
Both feeders register the run's streams before the first sample (`ShutdownTracker.add_stream`)
so that every window lists the same streams whichever samples the event log kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prober.core.disruption import DisruptionEvent, DisruptionTracker
from prober.core.models import Interval, Sample, StreamId, Window
from prober.core.perceived import Felt, FeltDisruption, Retried, RetryFollower
from prober.core.shutdown import DEFAULT_MAX_OPEN, ShutdownEvent, ShutdownTracker

TrackerEvent = DisruptionEvent | ShutdownEvent | Retried | Felt


class Trackers:
    def __init__(
        self,
        streams: Iterable[StreamId],
        *,
        node_of: Callable[[str], str | None] | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
    ) -> None:
        self.disruption = DisruptionTracker()
        self.shutdown = ShutdownTracker(node_of=node_of, max_open=max_open)
        self.retries = RetryFollower()
        self.felt = FeltDisruption()
        for stream in streams:
            self.shutdown.add_stream(stream)

    def feed(self, sample: Sample) -> list[TrackerEvent]:
        events: list[TrackerEvent] = [
            *self.disruption.feed(sample),
            *self.shutdown.feed(sample),
            *self.retries.feed(sample),
        ]
        return [*events, *self.felt.feed(sample, events)]

    def close(self, end_t: float, end_ts: str) -> list[Interval | Window | Retried | Felt]:
        """End the run at `end_t`: the intervals still open, the windows, the retries, and
        what a client felt of every interval not yet decided."""
        closed: list[Interval | Window | Retried | Felt] = [
            *self.disruption.close(end_t, end_ts),
            *self.shutdown.close(end_t),
            *self.retries.close(end_t),
        ]
        return [*closed, *self.felt.take(closed)]

    @property
    def open_hosts(self) -> frozenset[str]:
        return self.shutdown.open_hosts
