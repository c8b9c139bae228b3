"""The truth log's records: what an apiserver did and when, for the lab to judge the prober by.

Written by the fake apiserver (`fakeapiserver/truth.py`) and, for upstream's kube-apiserver,
by the lab from its main's lines (`lab/infra/upstream.py`); read by the lab's checks
(`lab/infra/truth.py` `read_truth`). One JSON object per line through the event log's codec
(`core.eventlog`): `{"v": 1, "kind": ..., <fields>}`, each record a frozen dataclass whose
fields are its JSON fields, named by its `KIND` (the event names the file has always had).

Every record begins with its stamp (`TruthRecord`): `host` (the hostname), `apiserver` (its
APIServerID), `wall` (epoch seconds), `ts` (RFC 3339) and `mono` (CLOCK_MONOTONIC seconds,
comparable across processes on one Linux machine), filled in by the writer (`stamp`). A
restart appends to the same file: each process's records begin with its `listening`
(`processes`). The kinds: the startup instants `listening`, `ready` (/readyz went true) and
`serving` (it can serve); every lifecycle signal by its upstream name (`LifecycleSignal`);
the connections' `connection_opened`, `goaway`, `connection_closed`, `LateConnections`,
`protocol_error`, `peer_goaway`; `early_answer`, a request answered before the server could
serve; each real watch's `watch_started` and `watch_ended`, the synthetic ones summed in
`synthetic_watches_ended`; the store's `lease_written` and `compacted`; at a process's end
`retry_after_total`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from prober.core.models import OMIT_EMPTY, rfc3339
from prober.core.phase import ShutdownPhase

R = TypeVar("R", bound="TruthRecord")


@dataclass(frozen=True, slots=True, kw_only=True)
class TruthRecord:
    """The stamp every record carries; empty until its writer stamps it (`stamp`)."""

    KIND: ClassVar[str]
    host: str = ""
    apiserver: str = ""
    wall: float = 0.0
    ts: str = ""
    mono: float = 0.0


def stamp(record: R, *, host: str, apiserver: str, wall: float, mono: float) -> R:
    """`record` as its writer stamps it: this server, at this instant on both clocks."""
    return dataclasses.replace(
        record, host=host, apiserver=apiserver, wall=wall, ts=rfc3339(wall), mono=mono
    )


# -- startup (`fakeapiserver/lifecycle.py` `Startup`) ---------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Listening(TruthRecord):
    """The process accepts connections: the first record of each process."""

    KIND: ClassVar[str] = "listening"
    port: int
    plain_port: int | None = None
    holder: str  # the identity Lease's holder: this process's identity
    early_ready: float = 0.0  # seconds /readyz says ok before it can serve (0: not that mode)
    early_answer: str = field(default="", metadata=OMIT_EMPTY)  # 500, 403, hang: the fake's


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupInstant(TruthRecord):
    holder: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready(StartupInstant):
    """/readyz went true: T1."""

    KIND: ClassVar[str] = "ready"


@dataclass(frozen=True, slots=True, kw_only=True)
class Serving(StartupInstant):
    """It can serve (the instant it listened, unless in the early-ready mode)."""

    KIND: ClassVar[str] = "serving"


STARTUP_TYPES: Mapping[str, type[StartupInstant]] = {Ready.KIND: Ready, Serving.KIND: Serving}


# -- graceful termination: each signal by its upstream name ----------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleSignal(TruthRecord):
    """One of upstream's lifecycle signals fired."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownInitiated(LifecycleSignal):
    KIND: ClassVar[str] = "ShutdownInitiated"
    trigger: str = field(default="", metadata=OMIT_EMPTY)  # the fake's: SIGTERM, api, admin
    delay: float  # --shutdown-delay-duration, seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class PreShutdownHooksFinished(LifecycleSignal):
    KIND: ClassVar[str] = "TerminationPreShutdownHooksFinished"


@dataclass(frozen=True, slots=True, kw_only=True)
class PreShutdownHooksStopped(LifecycleSignal):
    KIND: ClassVar[str] = "PreShutdownHooksStopped"  # upstream's main names it so


@dataclass(frozen=True, slots=True, kw_only=True)
class AfterShutdownDelayDuration(LifecycleSignal):
    KIND: ClassVar[str] = "AfterShutdownDelayDuration"


@dataclass(frozen=True, slots=True, kw_only=True)
class NotAcceptingNewRequest(LifecycleSignal):
    KIND: ClassVar[str] = "NotAcceptingNewRequest"  # 429 + Connection: close from here


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlightRequestsDrained(LifecycleSignal):
    KIND: ClassVar[str] = "InFlightRequestsDrained"


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPServerStoppedListening(LifecycleSignal):
    KIND: ClassVar[str] = "HTTPServerStoppedListening"  # new connections refused from here


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminationGracefulTerminationFinished(LifecycleSignal):
    KIND: ClassVar[str] = "TerminationGracefulTerminationFinished"


SIGNAL_TYPES: Mapping[str, type[LifecycleSignal]] = {
    cls.KIND: cls
    for cls in (
        ShutdownInitiated, PreShutdownHooksFinished, PreShutdownHooksStopped,
        AfterShutdownDelayDuration, NotAcceptingNewRequest, InFlightRequestsDrained,
        HTTPServerStoppedListening, TerminationGracefulTerminationFinished,
    )
}  # fmt: skip


# -- connections ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionOpened(TruthRecord):
    KIND: ClassVar[str] = "connection_opened"
    conn: int
    peer: str  # ip:port as the server saw it
    tls: bool
    protocol: str | None  # h1, h2; None: not chosen yet
    late: bool  # accepted in the delay's last 20 %


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionClosed(TruthRecord):
    KIND: ClassVar[str] = "connection_closed"
    conn: int
    protocol: str | None
    by: str
    reason: str
    requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GoawaySent(TruthRecord):
    KIND: ClassVar[str] = "goaway"
    conn: int
    last_stream_id: int
    error_code: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionFault(TruthRecord):
    """What went wrong on a connection, from the client's side, and why."""

    conn: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolError(ConnectionFault):
    KIND: ClassVar[str] = "protocol_error"


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerGoaway(ConnectionFault):
    KIND: ClassVar[str] = "peer_goaway"


@dataclass(frozen=True, slots=True, kw_only=True)
class LateConnection(TruthRecord):
    """A late connection's first request (upstream's LateConnections audit annotation)."""

    KIND: ClassVar[str] = "LateConnections"
    conn: int
    path: str
    user_agent: str


@dataclass(frozen=True, slots=True)
class EarlyRequest:
    """A request that arrived before the server could serve, as the truth keeps it."""

    audit_id: str
    conn: int
    stream: int
    protocol: str
    method: str
    path: str
    peer: str
    user_agent: str
    received: float  # wall, its headers arrived
    after_ready: bool  # /readyz was true when it arrived


@dataclass(frozen=True, slots=True, kw_only=True)
class EarlyAnswered(TruthRecord):
    """A request answered (or held) before the server could serve (`fakeapiserver/early.py`),
    stamped when it was settled."""

    KIND: ClassVar[str] = "early_answer"
    request: EarlyRequest
    answer: str  # the mode: 500, 403 or hang
    status: int | None  # what it sent; None: nothing (a hang)
    how: str  # answered, client-gone, timeout, cut


# -- watches ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class WatchStarted(TruthRecord):
    """A real watch began (`mono`: when); (`conn`, `stream`) names it in its process.
    Upstream's main numbers no connection: its `conn` is 0 and its streams are unique."""

    KIND: ClassVar[str] = "watch_started"
    conn: int
    stream: int
    peer: str
    protocol: str  # h1, h2
    path: str
    phase: ShutdownPhase  # of the server's own shutdown then


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchEnded(TruthRecord):
    KIND: ClassVar[str] = "watch_ended"
    conn: int
    stream: int
    how: str  # timeout, drained, cut, reset, client-gone, too-slow, gone, relisted
    phase: ShutdownPhase
    events: int  # events sent (upstream's main counts none: 0)
    seconds: float  # since it began
    drain_rank: int | None = None  # its place among the ends of the drain


@dataclass(frozen=True, slots=True, kw_only=True)
class InitialEventsEnd(TruthRecord):
    """A watch-list's initial events were sent (`mono`: then): its end marker with them, at
    `revision`, or `withheld` (`--withhold-initial-events-end`): then none ever comes."""

    KIND: ClassVar[str] = "initial_events_end"
    conn: int
    stream: int
    events: int  # initial ADDED events
    revision: int
    withheld: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticWatchesEnded(TruthRecord):
    """The informers' stand-ins a process held (`fakeapiserver/watches.py`), summed up."""

    KIND: ClassVar[str] = "synthetic_watches_ended"
    ended: Mapping[str, int]  # by how: drained, cut
    first: float  # mono of the first end
    last: float  # and of the last


# -- storage and the end ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseWritten(TruthRecord):
    KIND: ClassVar[str] = "lease_written"
    verb: str  # the API's verb, or `identity` for the identity Lease's controller
    namespace: str | None
    name: str | None
    revision: int
    holder: str | None
    renew_time: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted(TruthRecord):
    KIND: ClassVar[str] = "compacted"
    revision: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryAfterTotal(TruthRecord):
    """Requests refused while draining, by status: never audited, and `/metrics` goes with
    the process."""

    KIND: ClassVar[str] = "retry_after_total"
    codes: Mapping[str, int]


_OTHER_TYPES: tuple[type[TruthRecord], ...] = (
    Listening, Ready, Serving, ConnectionOpened, ConnectionClosed, GoawaySent, ProtocolError,
    PeerGoaway, LateConnection, EarlyAnswered, WatchStarted, WatchEnded, SyntheticWatchesEnded,
    LeaseWritten, Compacted, RetryAfterTotal, InitialEventsEnd,
)  # fmt: skip
# Every kind of the truth log, for its reader (`core.eventlog.EventLogReader(types=...)`).
TRUTH_TYPES: Mapping[str, type[TruthRecord]] = {
    cls.KIND: cls for cls in (*_OTHER_TYPES, *SIGNAL_TYPES.values())
}


def processes(records: Iterable[TruthRecord]) -> list[list[TruthRecord]]:
    """The records of each server process in one truth file, in order: a restart appends to
    the same file, and each process begins with its `listening`."""
    found: list[list[TruthRecord]] = []
    for record in records:
        if isinstance(record, Listening) or not found:
            found.append([])
        found[-1].append(record)
    return found


def of_kind(records: Iterable[TruthRecord], kind: type[R]) -> list[R]:
    return [r for r in records if isinstance(r, kind)]


def first(records: Iterable[TruthRecord], kind: type[R]) -> R | None:
    """The first record of that kind, or None."""
    return next((r for r in records if isinstance(r, kind)), None)
