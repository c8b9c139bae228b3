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

Same-node samples (`core.samenode`: answered by the prober's own node through an LB, or lost
through an LB that hairpins from it) go to trackers of their own (`same_node`), whose
intervals and windows are marked `same_node`: they measure the node, so none of them is the
LB's (`lb`), and no sample of one path is a witness of the other's. Client-go's retries are
followed over every sample, as a client meets them. The connection-age tracker takes the LB
path's samples and windows only: its 20 % rule is each LB's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from prober.core.connection_age import Attributed, ConnectionAges, ConnectionAgeTracker
from prober.core.disruption import DisruptionEvent, DisruptionTracker
from prober.core.instances import DEFAULT_EARLY_FOR, Instance, InstanceTracker
from prober.core.models import (
    LB,
    Connection,
    IdentitySeen,
    Interval,
    ReadyzAnswer,
    Sample,
    StreamId,
    Window,
)
from prober.core.perceived import Felt, FeltDisruption, Retried, RetryFollower
from prober.core.shutdown import DEFAULT_MAX_OPEN, ShutdownEvent, ShutdownTracker

TrackerEvent = DisruptionEvent | ShutdownEvent | Retried | Felt | Attributed | Instance


@dataclass(frozen=True, slots=True)
class Path:
    """The trackers of one path a sample may take: through an LB, or same-node."""

    disruption: DisruptionTracker
    shutdown: ShutdownTracker


class Trackers:
    def __init__(
        self,
        streams: Iterable[StreamId],
        *,
        node_of: Callable[[str], str | None] | None = None,
        max_open: int = DEFAULT_MAX_OPEN,
        on_own_node: Callable[[str], bool] | None = None,
        exact_delay: float | None = None,
        early_for: float = DEFAULT_EARLY_FOR,
        slow_start: Collection[LB] = (),
    ) -> None:
        """`on_own_node`: whether a host runs on the prober's own node (`Placement.on_own_node`);
        `exact_delay`: the apiservers' `--shutdown-delay-duration` where the run's settings
        say it (`LBSettings.shutdown_delay`); the header's rounded one is used otherwise;
        `early_for`: how long after T1 a restarted instance's failures are early;
        `slow_start`: the LBs that ramp a server taken back up slowly (`budgets.slow_starts`)."""
        streams = tuple(streams)  # an iterator is met twice below
        lb_shutdown = ShutdownTracker(node_of=node_of, max_open=max_open, on_own_node=on_own_node)
        self.lb = Path(DisruptionTracker(), lb_shutdown)
        self.same_node = Path(
            DisruptionTracker(same_node=True),
            ShutdownTracker(node_of=node_of, max_open=max_open, same_node=True),
        )
        self.disruption, self.shutdown = self.lb.disruption, self.lb.shutdown
        self.retries = RetryFollower()
        self.felt = FeltDisruption()
        self.ages = ConnectionAgeTracker(exact_delay)
        self.instances = InstanceTracker(streams, early_for=early_for, slow_start=slow_start)
        for stream in streams:
            self.shutdown.add_stream(stream)
            if stream.lb is not LB.LOCALHOST:  # never same-node: the node's own path by name
                self.same_node.shutdown.add_stream(stream)

    def path_of(self, sample: Sample) -> Path:
        return self.same_node if sample.same_node else self.lb

    def mark(self, sample: Sample) -> Sample:
        """The sample as every tracker takes it: `early` where a restarted instance failed
        it young (`core.instances`). Called once per sample, before `feed`."""
        return self.instances.mark(sample)

    def note(self, record: IdentitySeen | ReadyzAnswer) -> None:
        """A signal of an apiserver process that is no sample: its Lease, its /readyz."""
        if isinstance(record, IdentitySeen):
            self.instances.identify(record)
        else:
            self.instances.readyz(record)

    def feed(self, sample: Sample) -> list[TrackerEvent]:
        path = self.path_of(sample)
        disruption = path.disruption.feed(sample)
        shutdown = path.shutdown.feed(sample)
        through_lb = path is self.lb
        if through_lb:
            self._closed(shutdown)
        events: list[TrackerEvent] = [*disruption, *shutdown, *self.retries.feed(sample)]
        ages = self.ages.feed(sample) if through_lb else []
        felt = self.felt.feed(sample, events)
        return [*events, *felt, *ages, *self.instances.feed(sample)]

    def close(
        self, end_t: float, end_ts: str
    ) -> list[Interval | Window | Retried | Felt | Instance | ConnectionAges]:
        """End the run at `end_t`: the intervals still open, the windows, the retries, what a
        client felt of every interval not yet decided, the restarted instances not yet
        written, and the connection-age table."""
        paths = (self.lb, self.same_node)
        intervals = [i for p in paths for i in p.disruption.close(end_t, end_ts)]
        lb_windows = self.lb.shutdown.close(end_t)
        self._closed(lb_windows)
        closed: list[Interval | Window | Retried | Felt] = [
            *intervals,
            *lb_windows,
            *self.same_node.shutdown.close(end_t),
            *self.retries.close(end_t),
        ]
        felt = self.felt.take(closed)
        return [*closed, *felt, *self.instances.close(), self.ages.close(end_t)]

    def _closed(self, events: Sequence[ShutdownEvent]) -> None:
        """The LB path's windows, as they close, to the connection-age tracker."""
        for event in events:
            if isinstance(event, Window):
                self.ages.closed(event)

    @property
    def restarting(self) -> frozenset[str]:
        """Hosts shutting down, or back and not yet served through every LB: the event log
        keeps every answer meanwhile, and the streams stay at the window rate."""
        return self.instances.restarting

    @property
    def open_hosts(self) -> frozenset[str]:
        """Hosts with a window open on either path."""
        return self.lb.shutdown.open_hosts | self.same_node.shutdown.open_hosts

    def disrupted(self, stream: str) -> bool:
        return self.lb.disruption.is_open(stream) or self.same_node.disruption.is_open(stream)

    def calm(self, stream: str) -> tuple[bool, tuple[float, float] | None]:
        """Whether the stream is settled on both paths (`ShutdownTracker.settled`), and else
        from when until when it rests on every path where it is not (`ShutdownTracker.rests`):
        what `core.pace` lets a stream go quiet by. A prober with no same-node samples gets
        its LB path's answers unchanged."""
        stream_id = StreamId.parse(stream)
        fresh = stream_id.connection is Connection.NEW
        if fresh and self.instances.waiting_on(stream_id.target, stream_id.lb):
            return False, None  # its fresh connections are what show the add-back
        trackers = (self.lb.shutdown, self.same_node.shutdown)
        unsettled = [tracker for tracker in trackers if not tracker.settled(stream)]
        if not unsettled:
            return True, None
        spans = [span for tracker in unsettled if (span := tracker.rests(stream)) is not None]
        if len(spans) < len(unsettled):
            return False, None
        return False, (max(lo for lo, _ in spans), min(hi for _, hi in spans))
