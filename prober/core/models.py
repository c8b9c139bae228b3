"""The records that travel from the probe to the trackers, the sinks and the event log.

Every record is a frozen dataclass whose fields are exactly the event-log fields of its kind
(docs/ARCHITECTURE.md, "The event log"), so the codec can be written once for all of them.
Times: `t` fields are seconds since run start on a monotonic clock (request start for samples);
`ts` fields are RFC 3339 UTC strings made by whoever read the wall clock.
"""

from __future__ import annotations

import datetime as _dt
import functools
import typing
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from prober.core.header import ShutdownHeader
from prober.core.latency import PhaseLatency


class ErrorClass(StrEnum):
    """Why a request did not count as a plain success; also the `result` metric label."""

    TIMEOUT = "timeout"
    CONNECT_REFUSED = "connect_refused"
    CONNECTION_RESET = "connection_reset"
    TLS = "tls"
    DNS = "dns"
    GOAWAY = "goaway"  # an HTTP/2 GOAWAY ended the request
    RETRY_AFTER = "retry_after"  # 429/503 with Retry-After while the server drains
    HTTP_5XX = "http_5xx"
    HTTP_4XX = "http_4xx"
    HEADER_MISSING = "header_missing"  # asked for the shutdown header, got none
    HEADER_INVALID = "header_invalid"
    OTHER = "other"
    # Cut by the daemon's own stop, past its grace: it says nothing of the LB or the server,
    # so every tracker passes over it as over a sampling gap (`Sample.stopped`).
    STOPPED = "stopped"

    @property
    def is_disruption(self) -> bool:
        """Whether a client saw the request fail. A 2xx whose shutdown header is missing or
        malformed was served: it costs us the measurement, not the user their request. A
        request the daemon's stop cut did not fail either: nobody learnt how it would end."""
        return self not in NOT_DISRUPTION


NOT_DISRUPTION = frozenset(
    {ErrorClass.HEADER_MISSING, ErrorClass.HEADER_INVALID, ErrorClass.STOPPED}
)


class Protocol(StrEnum):
    HTTP1 = "http1"
    HTTP2 = "http2"


class LB(StrEnum):
    EXTERNAL = "external-lb"
    INTERNAL = "internal-lb"
    SERVICE_NETWORK = "service-network"
    LOCALHOST = "localhost"


class Connection(StrEnum):
    NEW = "new"
    REUSED = "reused"


class Replacement(StrEnum):
    """Why a `reused` worker's request went over a connection it had just opened."""

    FIRST = "first"  # the worker had no connection yet
    CLOSED = "closed"  # the server or the LB closed the kept one (Connection: close, EOF)
    FAILED = "failed"  # the last request on the kept one failed, so it was dropped
    TIMEOUT = "timeout"  # the last request on it timed out, so it was given up


class Pace(StrEnum):
    """How fast the streams sample (`core.pace`)."""

    QUIET = "quiet"
    WINDOW = "window"
    FAST = "fast"  # one stream, faster than the window rate (`core.pace`)


class ClosedBy(StrEnum):
    RECOVERED = "recovered"  # the host answered shutdown=false again
    TIMEOUT = "timeout"  # delay + grace after it was first seen
    END = "end"  # the run ended with the window open


class StreamNameError(ValueError):
    """A string that is not the name of a stream: `<target>-<protocol>-<lb>-<tail>`, where a
    request stream's tail is `<connection>-connections` and another kind's is its kind."""


def split_stream_name(name: str, tail: str) -> tuple[str, Protocol, LB] | None:
    """`<target>-<protocol>-<lb>-<tail>` into its head, or None. The target may itself hold
    dashes, so the name is read from the right."""
    if not name.endswith(f"-{tail}"):
        return None
    head = name[: -len(tail) - 1]
    for lb in LB:
        for protocol in Protocol:
            end = f"-{protocol}-{lb}"
            if head.endswith(end) and len(head) > len(end):
                return head[: -len(end)], protocol, lb
    return None


# How a record's `stream_id` is written: its name as `stream`, then the fields of the identity
# that record kind has always carried beside it (the codec reads them back and checks that
# they agree with the name). One identity on the record; the log's bytes are unchanged.
WITH_TARGET: dict[str, tuple[str, ...]] = {
    "keys": ("stream", "target", "lb", "protocol", "connection")
}
WITHOUT_TARGET: dict[str, tuple[str, ...]] = {"keys": ("stream", "lb", "protocol", "connection")}
# A field left out of its line while empty: a reader takes its default, and the samples of a
# run that never stopped mid-request keep their bytes.
OMIT_EMPTY: dict[str, bool] = {"omit_empty": True}
# A field left out of its line while None, for a field whose empty values (0) mean something.
OMIT_NONE: dict[str, bool] = {"omit_none": True}


class StreamIdentity:
    """What an identity of a stream of any kind spells out of itself, as a log line or the
    event log writes it: `stream` (its name) and its other `FIELDS`."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]]

    @property
    @abstractmethod
    def name(self) -> str: ...

    def fields(self) -> dict[str, str]:
        """The identity spelled out: name first."""
        return {key: self.value_of(key) for key in self.FIELDS}

    def value_of(self, key: str) -> str:
        """A field of the identity as the event log writes it: `stream` is the name."""
        if key == "stream":
            return self.name
        return str(getattr(self, key))


@dataclass(frozen=True, slots=True)
class StreamId(StreamIdentity):
    """target x protocol x LB x connection mode: one independently tracked series of samples."""

    FIELDS: ClassVar[tuple[str, ...]] = WITHOUT_TARGET["keys"]
    target: str
    protocol: Protocol
    lb: LB
    connection: Connection

    @property
    def name(self) -> str:
        return f"{self.target}-{self.protocol}-{self.lb}-{self.connection}-connections"

    @property
    def key(self) -> tuple[LB, Protocol, Connection]:
        """What metrics, thresholds and verdicts key on: a target is one per cluster."""
        return (self.lb, self.protocol, self.connection)

    @classmethod
    def parse(cls, name: str) -> StreamId:
        """Invert `name`; the target may itself contain dashes, so parse from the right."""
        return _parse_stream_name(name) if cls is StreamId else cls._parse(name)

    @classmethod
    def _parse(cls, name: str) -> StreamId:
        suffix = "-connections"
        if not name.endswith(suffix):
            raise StreamNameError(f"stream name {name!r} does not end in {suffix!r}")
        for connection in Connection:
            split = split_stream_name(name, f"{connection}-connections")
            if split is not None:
                return cls(*split, connection)
        raise StreamNameError(
            f"stream name {name!r} is not <target>-<protocol>-<lb>-<conn>-connections"
        )


# A log names a handful of streams hundreds of thousands of times: each name is parsed once.
# Identities are frozen, so one may be shared; a bad name raises and is not kept.
_parse_stream_name = functools.lru_cache(maxsize=4096)(StreamId._parse)


class OfStream:
    """What every record of one stream derives from its `stream_id`."""

    __slots__ = ()
    stream_id: StreamId

    @property
    def stream(self) -> str:
        return self.stream_id.name

    @property
    def target(self) -> str:
        return self.stream_id.target

    @property
    def lb(self) -> LB:
        return self.stream_id.lb

    @property
    def protocol(self) -> Protocol:
        return self.stream_id.protocol

    @property
    def connection(self) -> Connection:
        return self.stream_id.connection


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """What a config says of one LB's health check and flows, where it differs from the
    platform's row of `core.budgets`; None: the row's."""

    interval: float | None = None
    timeout: float | None = None
    unhealthy: int | None = None
    healthy: int | None = None
    connections: str | None = None  # `core.budgets.Flows`: reset or kept
    fastinter: float | None = None  # HAProxy's interval while a state change is in progress
    sync_delay: float | None = None  # the service network's: its proxies' reprogramming
    # A master's own requests to this LB's address are answered by its own apiserver
    # (`core.budgets.LBProfile.hairpin`); None: the row's.
    hairpin: bool | None = None


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """What the watch tests allow, in seconds, as the daemon's own client-go timers imply
    (`core.watch.watch_limits`): a run whose timers are scaled (the lab's) is judged by its
    own scale, and `prober analyze` of its log judges it the same."""

    reestablish: float
    blind: float


@dataclass(frozen=True, slots=True)
class LBSettings:
    """A cluster's own LB settings and shutdown timing (config key `lb_settings`), written
    into the run record so that every later analysis judges by them."""

    shutdown_delay: float | None = None  # the exact --shutdown-delay-duration
    graceful_termination: float | None = None
    lbs: Mapping[LB, CheckSettings] = field(default_factory=dict)


REQUEST = "request"  # the request kind, by its name in a run record


@dataclass(frozen=True, slots=True)
class RunRecord:
    KIND: ClassVar[str] = "run"
    run_id: str
    ts: str
    platform: str
    version: str
    # The streams of each kind (`core.streamkind`), by kind: the request kind's under
    # "request". Logs written before kept those apart, in a `streams` list, which the codec
    # reads into this (`core.eventlog`).
    kind_streams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Left out while None: a run without them keeps its bytes, and older readers skip it.
    lb_settings: LBSettings | None = field(default=None, metadata=OMIT_EMPTY)
    # The node the prober runs on (config `node`, the downward API's spec.nodeName); None:
    # not known, and no sample is same-node (`core.samenode`).
    node: str | None = field(default=None, metadata=OMIT_EMPTY)
    # Config `early_for`: how long after T1 a restarted apiserver's failures are early
    # (`core.instances`); None in logs written before, which had none.
    early_for: float | None = field(default=None, metadata=OMIT_EMPTY)
    # What the watch tests allow, from the daemon's timers; None in logs written before.
    watch_limits: WatchLimits | None = field(default=None, metadata=OMIT_EMPTY)
    # Config `slow_floor` (`core.latency.slow_but_up`); None in logs written before.
    slow_floor: float | None = field(default=None, metadata=OMIT_EMPTY)

    def streams_of(self, kind: str) -> tuple[str, ...]:
        return tuple(self.kind_streams.get(kind, ()))


@dataclass(frozen=True, slots=True)
class ApiserverNode:
    """The daemon learnt which node an apiserver runs on: its APIServerID (the `host` of the
    shutdown header) and the node its identity Lease names (`k8s.discovery.HostDecoder`), at
    run time `t`. Written once per host, when first learnt."""

    KIND: ClassVar[str] = "apiserver"
    t: float
    ts: str
    host: str
    node: str


@dataclass(frozen=True, slots=True)
class IdentitySeen:
    """The daemon read an apiserver's identity Lease under a holder it had not seen for that
    host: a new apiserver process (a restart takes the host's Lease over under a new holder
    identity), or, at the run's first read, the one already running. Written once per host
    and holder (`k8s.discovery.HostDecoder`); `core.instances` ties it to the instance the
    samples show.

    Times are run times. `renew_t` is the Lease's `spec.renewTime` (the apiserver's clock)
    moved onto the run's clock at the read; `before_t` the send time of the newest read that
    showed the host under another holder or without a Lease (None: this is the run's first
    read of it). `first` says that `renew_t` is the new holder's first write: the read before
    came less than one renew interval ahead of it, so no earlier renewal fits between. The
    first write comes from a post-start hook, before `/readyz` goes true: a lower bound on T1.
    """

    KIND: ClassVar[str] = "identity"
    t: float  # run time the read that saw it was answered
    ts: str
    host: str  # the Lease's name: the APIServerID, the `host` of the shutdown header
    node: str | None
    holder: str  # spec.holderIdentity: this process's own
    renew_t: float | None
    before_t: float | None
    first: bool


@dataclass(frozen=True, slots=True)
class ReadyzAnswer:
    """What the prober's own node's apiserver said to `GET /readyz` on the direct path
    (localhost), asked only while an apiserver restarts (`daemon.requests.readyz`): the tightest
    bracket of T1 a pod can have, for its own node's apiserver (`core.instances`). Run
    times; `status` None where it failed unanswered (`error`)."""

    KIND: ClassVar[str] = "readyz"
    t: float
    ts: str
    dur: float
    status: int | None
    error: ErrorClass | None
    shutdown: ShutdownHeader | None
    audit_id: str

    @property
    def end(self) -> float:
        return self.t + self.dur


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The daemon's stop path ran to its end: written last, after every record it closed. A
    run whose log has none ended abruptly (SIGKILL, an OOM kill, a node gone) at its last
    whole record."""

    KIND: ClassVar[str] = "run_end"
    t: float
    ts: str
    reason: str  # why it stopped: the signal, or "stopped"


@dataclass(frozen=True, slots=True)
class Sample(OfStream):
    """One request's outcome. `t` is when it was sent, `dur` how long until it ended."""

    KIND: ClassVar[str] = "sample"
    ts: str
    t: float
    dur: float
    stream_id: StreamId = field(metadata=WITH_TARGET)
    reused: bool | None  # observed, not asked for; None when the client could not tell
    http_version: str | None
    status: int | None
    error: ErrorClass | None
    detail: str
    shutdown: ShutdownHeader | None
    audit_id: str
    local_port: int | None = None
    peer: str | None = None
    # A `reused` stream's worker keeps one connection; a sample that had to open one says
    # why (`Replacement`), so that a fresh connection under a reused name is never silent.
    replaced: Replacement | None = None
    replaced_port: int | None = None  # the local port of the kept connection it replaced
    # Sent again once on a new connection, as Go's transport would: `goaway` (an HTTP/2 stream
    # the server never processed) or `closed_idle` (a kept HTTP/1.1 connection closed as the
    # request went out); the first attempt's error is in `detail`.
    retried: str | None = None
    # Written to the event log after later samples, only for the bound it puts on a shutdown's
    # T0 (see `core.compaction`); a replay must not let it touch disruption intervals.
    held: bool = False
    # Sent as part of a witness burst (`core.burst`): that burst's number in this run.
    burst: int | None = None
    # A request the stop cut (`ErrorClass.STOPPED`): what of it had happened, in seconds
    # after `t` (`connected`: TCP and TLS up, one step in asyncio; `sent`: the request
    # written). Empty for every other sample, and then not written at all.
    phases: Mapping[str, float] = field(default_factory=dict, metadata=OMIT_EMPTY)
    # Answered by the apiserver on the prober's own node through an LB, or failed unanswered
    # through an LB that hairpins from there (`core.samenode`): no evidence of the LB, so its
    # own trackers take it (`core.trackers`). Left out of the line while false.
    same_node: bool = field(default=False, metadata=OMIT_EMPTY)
    # How old its connection was: seconds from the start of that connection's TCP connect to
    # `t` (0 for the request that opened it). None where it had none (the connect failed),
    # and in logs written before it was recorded, which keep their bytes.
    connection_age: float | None = field(default=None, metadata=OMIT_NONE)
    # A failed answer from an apiserver restarted in the run, in its first seconds after its
    # /readyz went true (`core.instances`): routed to it before it could serve. Set by the
    # trackers as they take the sample; left out of the line while false.
    early: bool = field(default=False, metadata=OMIT_EMPTY)
    # Its connection's local address (the port is `local_port`): with `peer`, what the lab
    # joins to the server's record of the connection. None in logs written before it was.
    local_ip: str | None = field(default=None, metadata=OMIT_NONE)
    # On a connection it opened: seconds of the TCP connect, then of the TLS handshake, both
    # within `dur` (`core.latency` counts them apart). None elsewhere, and then not written.
    connect: float | None = field(default=None, metadata=OMIT_NONE)
    tls: float | None = field(default=None, metadata=OMIT_NONE)

    @property
    def end(self) -> float:
        return self.t + self.dur

    @property
    def stopped(self) -> bool:
        """Cut by the daemon's stop: recorded and counted, but no observation of the LB, so
        the trackers never see it as a success, a failure or a late answer."""
        return self.error is ErrorClass.STOPPED

    @property
    def failed(self) -> bool:
        return self.error is not None and self.error.is_disruption

    @property
    def late(self) -> bool:
        """Answered by a server that had already started shutting down."""
        return self.shutdown is not None and self.shutdown.shutdown


@dataclass(frozen=True, slots=True)
class Interval(OfStream):
    """A closed disruption interval of one stream: first failure to first later success."""

    KIND: ClassVar[str] = "interval"
    stream_id: StreamId = field(metadata=WITHOUT_TARGET)
    start_t: float
    end_t: float
    start_ts: str
    end_ts: str
    error: ErrorClass
    detail: str
    samples: int
    # Where the true edges lie, from the sampling (see `core.disruption`); None: unbounded.
    start_lo: float | None = None
    start_hi: float | None = None
    end_lo: float | None = None
    end_hi: float | None = None
    same_node: bool = field(default=False, metadata=OMIT_EMPTY)  # of same-node samples only
    early: int = field(default=0, metadata=OMIT_EMPTY)  # its early failures (`Sample.early`)

    @property
    def seconds(self) -> float:
        return self.end_t - self.start_t


@dataclass(frozen=True, slots=True)
class WindowStream(OfStream):
    """What one stream saw of one shutdown window."""

    stream_id: StreamId = field(metadata=WITHOUT_TARGET)
    late: int
    max_elapsed: float | None
    last_late_t: float | None
    reaction: float | None  # last_late_t - t0; None when the stream saw no late request
    failures: int
    # Where the true reaction lies given the sampling gaps and T0's own bound (see
    # `core.shutdown`); lo is None without a late request, hi None when nothing after the
    # last late request showed the LB had stopped. `bound_by` names what set hi.
    reaction_lo: float | None = None
    reaction_hi: float | None = None
    bound_by: str | None = None


@dataclass(frozen=True, slots=True)
class Window:
    """A closed shutdown window of one apiserver, with the per-stream measurements."""

    KIND: ClassVar[str] = "window"
    host: str
    node: str | None
    delay: float
    first_seen_t: float
    t0: float
    t0_lo: float
    t0_hi: float
    closed_by: ClosedBy
    end_t: float
    streams: tuple[WindowStream, ...]
    same_node: bool = field(default=False, metadata=OMIT_EMPTY)  # of same-node samples only


@dataclass(frozen=True, slots=True)
class StreamCounters:
    stream: str
    samples: int
    failures: int
    late: int
    disruption_seconds: float
    results: Mapping[str, int] = field(default_factory=dict)
    # The sampling gap achieved (on-wire time between consecutive requests), and the ticks
    # the scheduler did not send, by reason: a starved daemon says so here.
    gap_p50: float | None = None
    gap_p99: float | None = None
    gap_max: float | None = None
    skipped: Mapping[str, int] = field(default_factory=dict)
    # How many of `samples` were same-node (`core.samenode`); left out of the line while 0.
    same_node: int = field(default=0, metadata=OMIT_EMPTY)
    # Proof of completeness (`core.coverage`): the ticks the schedule made due and the requests
    # started (witness bursts too); `samples` is what was counted. None in older logs.
    due: int | None = field(default=None, metadata=OMIT_NONE)
    started: int | None = field(default=None, metadata=OMIT_NONE)
    # A kept HTTP/2 stream's answers by apiserver host, cumulative, and the kept connections
    # it holds now (`core.rebalancing`): the shares compaction would lose. Left out while empty.
    kept_answers: Mapping[str, int] = field(default_factory=dict, metadata=OMIT_EMPTY)
    kept_connections: int = field(default=0, metadata=OMIT_EMPTY)
    # The answer times by run phase (`core.latency`), as histograms: compaction drops plain
    # successes from the log, so only these give a re-analysis the live p50 and p99.
    latency: Mapping[str, PhaseLatency] = field(default_factory=dict, metadata=OMIT_EMPTY)


@dataclass(frozen=True, slots=True)
class Summary:
    """Periodic per-stream counters, so a reader knows what was sampled even if not logged."""

    KIND: ClassVar[str] = "summary"
    ts: str
    t: float
    streams: tuple[StreamCounters, ...]


@dataclass(frozen=True, slots=True)
class PaceChange:
    """The sampling rate changed at run time `t`, and why: of every stream, or of one."""

    KIND: ClassVar[str] = "pace"
    t: float
    ts: str
    pace: Pace
    reason: str
    stream: str | None = None  # None: every stream


class LogRecord(typing.Protocol):
    """Any record of the event log, of any kind of stream: a frozen dataclass whose fields are
    exactly its JSON fields, named by `KIND` (`core.eventlog` encodes every one alike)."""

    KIND: ClassVar[str]


Record = RunRecord | Sample | Interval | Window | Summary | PaceChange
RECORD_TYPES: tuple[type[Record], ...] = (RunRecord, Sample, Interval, Window, Summary, PaceChange)


def rfc3339(epoch_seconds: float) -> str:
    """Wall-clock seconds since the epoch as RFC 3339 UTC with microseconds."""
    stamp = _dt.datetime.fromtimestamp(epoch_seconds, tz=_dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> float:
    """Inverse of `rfc3339`; accepts any offset Python's ISO parser does."""
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
