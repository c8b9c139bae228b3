"""The core trackers, wired once: what the daemon's pipeline and `prober analyze`'s replay
both feed, so that "the replay reproduces the daemon" holds by construction.

Each sample goes to the disruption tracker, then to the shutdown tracker, then to the follower
of client-go's retries (`core.perceived`), then to the connection-age tracker
(`core.connection_age`, told of each window as it closes), and their events come back in that
order, what a client felt of each interval they decided (`perceived.Felt`) before the
connection-age tracker's; at the end of the run open intervals close before open windows, the
retries still waiting next, then what was felt, and last the connection-age table.
A sample that ends a chain of retries made a tracker emit, so the event log keeps it
(`core.compaction`) and a replay ends the chain on the same sample.
Both feeders register the run's streams before the first sample (`ShutdownTracker.add_stream`)
so that every window lists the same streams whichever samples the event log kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prober.core.connection_age import Attributed, ConnectionAges, ConnectionAgeTracker
from prober.core.disruption import DisruptionEvent, DisruptionTracker
from prober.core.models import Interval, Sample, StreamId, Window
from prober.core.perceived import Felt, FeltDisruption, Retried, RetryFollower
from prober.core.shutdown import DEFAULT_MAX_OPEN, ShutdownEvent, ShutdownTracker

TrackerEvent = DisruptionEvent | ShutdownEvent | Retried | Felt | Attributed


class Trackers:
    def __init__(
        self,
        streams: Iterable[StreamId],
        *,
        node_of: Callable[[str], str | None] | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
        exact_delay: float | None = None,
    ) -> None:
        """`exact_delay`: the apiservers' `--shutdown-delay-duration` where the run's settings
        say it (`LBSettings.shutdown_delay`); the header's rounded one is used otherwise."""
        self.disruption = DisruptionTracker()
        self.shutdown = ShutdownTracker(node_of=node_of, max_open=max_open)
        self.retries = RetryFollower()
        self.felt = FeltDisruption()
        self.ages = ConnectionAgeTracker(exact_delay)
        for stream in streams:
            self.shutdown.add_stream(stream)

    def feed(self, sample: Sample) -> list[TrackerEvent]:
        disruption = self.disruption.feed(sample)
        shutdown = self.shutdown.feed(sample)
        self._closed(shutdown)
        events: list[TrackerEvent] = [*disruption, *shutdown, *self.retries.feed(sample)]
        return [*events, *self.felt.feed(sample, events), *self.ages.feed(sample)]

    def close(
        self, end_t: float, end_ts: str
    ) -> list[Interval | Window | Retried | Felt | ConnectionAges]:
        """End the run at `end_t`: the intervals still open, the windows, the retries, what a
        client felt of every interval not yet decided, and the connection-age table."""
        intervals = self.disruption.close(end_t, end_ts)
        windows = self.shutdown.close(end_t)
        self._closed(windows)
        closed: list[Interval | Window | Retried | Felt] = [
            *intervals,
            *windows,
            *self.retries.close(end_t),
        ]
        return [*closed, *self.felt.take(closed), self.ages.close(end_t)]

    def _closed(self, events: Sequence[ShutdownEvent]) -> None:
        for event in events:
            if isinstance(event, Window):
                self.ages.closed(event)

    @property
    def open_hosts(self) -> frozenset[str]:
        return self.shutdown.open_hosts
