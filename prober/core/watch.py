"""Watch streams, the pure side: what a watch through an LB records, and what those records
add up to. One watch stream per LB x protocol runs client-go's reflector loop
(`core.reflector`) on the prober's heartbeat Lease, which the prober renews about once a
second (`Heartbeat` records, one per write).

- `WatchAttempt`: a LIST or a WATCH was sent: how it went, and which apiserver answered
  (the shutdown header rides on the answer); one the daemon's stop cut before its answer is
  still recorded, as `stopped` (no failure: the tracker counts only what was established).
  A WATCH that got its stream on a server already answering `shutdown=true` is *doomed*:
  the watch twin of a readiness violation.
- `WatchEnd`: an established watch ended, and how (`END_HOWS`).
- `WatchSeen`: the stream saw a version of the heartbeat (an event, or a LIST); joined with
  the `Heartbeat` of that revision it gives the lag: arrival minus the write's
  acknowledgement, and arrival minus its send bounds it from above (the event cannot have
  left the server before the write was made).

`WatchTracker` is fed them in order (the daemon and `prober analyze` alike) and gives each
stream's `WatchResult`: establishments, ends by how, times to re-establish, doomed re-watches,
relists by cause, lag percentiles and blind intervals (a write not seen within
`blind_after` of its acknowledgement; a period with no acknowledged write is the writer's
outage, never a watch's blindness).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from prober.core.clientgo import timer
from prober.core.models import OMIT_NONE, WatchLimits
from prober.core.stats import percentile_cont
from prober.core.streamkind import KindSpec, KindStreamId, kind_identity
from prober.core.watchsync import SyncResult, WatchSync, not_ready

WATCH = "watch"  # the kind's name: streams are `<target>-<protocol>-<lb>-watch`
# The daemon stopped: how an established watch ended, the outcome of a LIST or WATCH the stop
# cut before its answer, the detail of a heartbeat write it cut. Never a failure of the LB.
STOPPED = "stopped"
END_HOWS = (
    "timeout",  # the server ended it cleanly (timeoutSeconds, or a drain)
    "closed",  # the connection closed under it (EOF, a cut)
    "reset",  # a TCP reset
    "goaway",  # HTTP/2 GOAWAY with an error, or the stream reset
    "ping",  # the connection's PING went unanswered: dropped by client-go's health check
    "stall",  # an event begun and not ended
    "gone",  # an ERROR event of 410
    "error",  # another ERROR event
    "too_large",  # an event past the size limit, or more unread than the queue holds
    "bad_event",  # a line that is not a watch event
    STOPPED,  # the daemon stopped
)


WATCH_STEPS = ("watch", "watch_list")  # the steps that open a watch (`core.reflector.Step`)


def _identity() -> dict[str, object]:
    return kind_identity(WATCH)


@dataclass(frozen=True, slots=True)
class WatchAttempt:
    KIND: ClassVar[str] = "watch_attempt"
    t: float  # run time the request was sent
    stream_id: KindStreamId = field(metadata=_identity())
    step: str  # "list", "watch" or "watch_list" (`core.reflector.Step`)
    outcome: str  # core.reflector.Outcome, or STOPPED: cut by the daemon's stop
    status: int | None = None
    server: str | None = None  # the APIServerID of the shutdown header
    shutdown: bool | None = None  # the header's shutdown flag
    elapsed: float | None = None  # the header's elapsed
    version: str = ""  # watched from, or the list's
    detail: str = ""
    relist_cause: str = ""
    dur: float = 0.0  # seconds from sending to the answer (a watch: to its stream's head)
    # The connection it went on, "ip:port" each, where it got one: what the lab joins to the
    # server's record of the watch (the client's address, as a pass-through LB keeps it).
    local: str | None = field(default=None, metadata=OMIT_NONE)
    peer: str | None = field(default=None, metadata=OMIT_NONE)

    @property
    def stream(self) -> str:
        return self.stream_id.name

    @property
    def doomed(self) -> bool:
        return self.step in WATCH_STEPS and self.outcome == "ok" and bool(self.shutdown)


@dataclass(frozen=True, slots=True)
class WatchEnd:
    KIND: ClassVar[str] = "watch_end"
    t: float  # run time it ended
    stream_id: KindStreamId = field(metadata=_identity())
    started: float  # run time its attempt was sent
    how: str  # END_HOWS
    server: str | None = None
    events: int = 0
    detail: str = ""

    @property
    def stream(self) -> str:
        return self.stream_id.name


@dataclass(frozen=True, slots=True)
class WatchSeen:
    KIND: ClassVar[str] = "watch_seen"
    RAW: ClassVar[bool] = True  # an observation, like a sample: not in the compact stream
    t: float  # run time of the arrival
    stream_id: KindStreamId = field(metadata=_identity())
    revision: int

    @property
    def stream(self) -> str:
        return self.stream_id.name


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One write of the heartbeat Lease: sent at `t`, acknowledged at `ack` (None: it failed,
    or the daemon's stop cut it: `detail` STOPPED) with etcd's `revision`."""

    KIND: ClassVar[str] = "heartbeat"
    RAW: ClassVar[bool] = True
    t: float
    ack: float | None
    revision: int | None
    detail: str = ""
    blind_after: float = 0.0  # the daemon's threshold, so that a replay judges the same


WATCHES = KindSpec(WATCH, records=(WatchAttempt, WatchEnd, WatchSeen, Heartbeat, WatchSync))


class Doomed(NamedTuple):
    """A watch that landed on a server already shutting down, and when its connection took
    its first request (None: not known): whether the LB chose that server before its
    shutdown began."""

    attempt: WatchAttempt
    opened: float | None


@dataclass(slots=True)
class WatchResult:
    """What one watch stream's records add up to."""

    stream: str
    established: int = 0
    doomed: int = 0
    ends: Counter[str] = field(default_factory=Counter)
    relists: Counter[str] = field(default_factory=Counter)
    servers: Counter[str] = field(default_factory=Counter)
    reestablish: list[float] = field(default_factory=list)  # end -> next established watch
    lags: list[float] = field(default_factory=list)  # arrival - acknowledgement, seconds
    blind: list[tuple[float, float]] = field(default_factory=list)  # (from, to), run time
    # What the report draws and the verdicts cite, each in run time: the spans a watch was
    # established (to None: still at the run's end), its ends, its doomed landings.
    spans: list[tuple[float, float | None]] = field(default_factory=list)
    ended: list[WatchEnd] = field(default_factory=list)
    doomed_at: list[Doomed] = field(default_factory=list)
    # At the run's end: seconds since an end no watch followed (None: every end was followed).
    unrestored: float | None = None
    syncs: SyncResult = field(default_factory=SyncResult)  # `core.watchsync`

    @property
    def blind_seconds(self) -> float:
        return sum(end - start for start, end in self.blind)

    def lag(self, q: float) -> float | None:
        return percentile_cont(self.lags, q) if self.lags else None


def _blind(result: WatchResult, start: float, end: float) -> None:
    """Add [start, end] to the stream's blind intervals, merged with the last one it meets
    (each unseen write of a blind spell adds its own, overlapping the others)."""
    if end <= start:
        return
    if result.blind and start <= result.blind[-1][1]:
        last = result.blind[-1]
        result.blind[-1] = (last[0], max(last[1], end))
    else:
        result.blind.append((start, end))


@dataclass(slots=True)
class _Stream:
    result: WatchResult
    ended_at: float | None = None  # the last end not yet followed by an established watch
    seen: int = 0  # the newest heartbeat revision seen
    next_write: int = 0  # the first acknowledged write not yet seen
    # The connection its requests go on ("ip:port"), and when it took its first: a stream
    # sends one request at a time, so a new address is a new connection.
    local: str | None = None
    opened: float | None = None


class WatchTracker:
    """`blind_after` None: the threshold the heartbeat records carry (a replay)."""

    def __init__(self, blind_after: float | None = None) -> None:
        self.blind_after = blind_after if blind_after is not None else math.inf
        self._streams: dict[str, _Stream] = {}
        self._writes: list[tuple[int, float]] = []  # (revision, ack), acknowledged, in order

    def stream(self, name: str) -> WatchResult:
        return self._of(name).result

    def feed(self, record: WatchAttempt | WatchEnd | WatchSeen | Heartbeat | WatchSync) -> None:
        if isinstance(record, Heartbeat):
            if math.isinf(self.blind_after) and record.blind_after > 0:
                self.blind_after = record.blind_after
            if record.ack is not None and record.revision is not None:
                self._written(record.revision, record.ack)
            return
        state = self._of(record.stream)
        result = state.result
        if isinstance(record, WatchAttempt):
            self._attempt(state, record)
        elif isinstance(record, WatchSync):
            result.syncs.add(record)
        elif isinstance(record, WatchEnd):
            result.ends[record.how] += 1
            result.ended.append(record)
            if result.spans and result.spans[-1][1] is None:
                result.spans[-1] = (result.spans[-1][0], record.t)
            # The daemon's own stop ends its watches: nothing for a client to re-establish.
            state.ended_at = None if record.how == "stopped" else record.t
        else:
            self._seen(state, record)

    @staticmethod
    def _attempt(state: _Stream, record: WatchAttempt) -> None:
        result = state.result
        if record.local != state.local:
            state.local, state.opened = record.local, record.t
        if record.step == "list" and record.relist_cause:
            result.relists[record.relist_cause] += 1
        if record.step == "list" and record.outcome == "ok":
            result.syncs.listed_ok(record.relist_cause)
        result.syncs.not_ready += not_ready(record.outcome, record.shutdown)
        if record.step in WATCH_STEPS and record.outcome == "ok":
            result.established += 1
            result.doomed += record.doomed
            result.spans.append((record.t + record.dur, None))
            if record.doomed:
                opened = None if record.local is None else state.opened
                result.doomed_at.append(Doomed(record, opened))
            if record.server:
                result.servers[record.server] += 1
            if state.ended_at is not None:
                result.reestablish.append(record.t + record.dur - state.ended_at)
                state.ended_at = None

    def _written(self, revision: int, ack: float) -> None:
        """A write acknowledged: streams that saw its revision already (the event came before
        the write's answer) saw it with no lag."""
        self._writes.append((revision, ack))
        for state in self._streams.values():
            if state.next_write == len(self._writes) - 1 and state.seen >= revision:
                state.next_write += 1
                state.result.lags.append(0.0)

    def _seen(self, state: _Stream, seen: WatchSeen) -> None:
        """Every acknowledged write up to this revision is now seen by the stream."""
        writes = self._writes
        while state.next_write < len(writes) and writes[state.next_write][0] <= seen.revision:
            revision, ack = writes[state.next_write]
            state.next_write += 1
            if revision <= state.seen:
                continue
            lag = seen.t - ack
            state.result.lags.append(max(0.0, lag))
            if lag > self.blind_after:
                _blind(state.result, ack + self.blind_after, seen.t)
        state.seen = max(state.seen, seen.revision)

    def close(self, t: float) -> dict[str, WatchResult]:
        """The results at run time `t`: a write acknowledged and never seen by a stream makes
        it blind from that write's deadline to `t`."""
        for state in self._streams.values():
            if state.ended_at is not None:
                state.result.unrestored = max(0.0, t - state.ended_at)
            if state.next_write < len(self._writes):
                _, ack = self._writes[state.next_write]
                if t - ack > self.blind_after:
                    _blind(state.result, ack + self.blind_after, t)
        return {name: state.result for name, state in self._streams.items()}

    def _of(self, name: str) -> _Stream:
        if name not in self._streams:
            self._streams[name] = _Stream(WatchResult(name))
        return self._streams[name]


# What the watch tests allow with client-go's timers (`report.verdicts.watch_verdicts` says why).
REESTABLISH_WITHIN = 5.0
BLIND_WITHIN = 15.0


# What never scales: a re-watch is a LIST and a WATCH, requests whose round trips take what
# the node gives them (on a busy 2-core node, a few hundred ms each), and a blind interval
# starts only past the blind threshold. Scaled limits stay at or above this.
UNSCALED_FLOOR = 1.0


def watch_limits(backoff_initial: float, ping_timeout: float) -> WatchLimits:
    """The watch tests' limits as a daemon with these timers implies them: client-go's, scaled
    as its backoff and its ping timeout are (the lab scales them with `--time-scale`), never
    below what the requests of a re-watch take unscaled (`UNSCALED_FLOOR`)."""
    return WatchLimits(
        max(REESTABLISH_WITHIN * backoff_initial / timer("watch_backoff_initial"), UNSCALED_FLOOR),
        max(BLIND_WITHIN * ping_timeout / timer("http2_ping_timeout"), UNSCALED_FLOOR),
    )
