"""In which phase of its server's shutdown each connection was opened, for every failure and
late answer met on it: upstream's rule that only connections opened in the last 20 % of the
shutdown delay should fail (cluster-kube-apiserver-operator #2222), measured.

An LB that keeps established flows (GCP, Azure, the service network) leaves a connection
opened before T0 on its old server until that server closes it at the end of its delay: it
gets late answers throughout the delay, then a graceful close that Go's transport resends.
One that resets them (AWS) cuts it when it marks the server down: a failure, or on HTTP/1.1
a resend. Either way the connection was opened before T0; the table says which, per stream.

What is counted, per sample (`Sample.stopped` ones never):

* `late`: an answer `shutdown=true`; its server is the header's `host`.
* `failed`: a failure (`Sample.failed`). Its server is the header's where it has one (a 429),
  else, on a kept connection (`reused`), the server of the newest-sent answer on that same
  connection (same stream and `local_port`: one connection is one server behind a
  pass-through or TCP-mode LB); a failure on a connection nothing answered on is `no_server`.
* `resent`: a request whose kept connection was cut as it went out and that was sent again
  on a new one, as Go's transport does (`retried`): counted against the connection it met
  (`replaced_port`), whose server and opening come from its newest-sent answer. The resend's
  own outcome counts as well, on its own connection.

Where: a connection was opened at `t - connection_age` (the start of its TCP connect, on the
run's clock; its server accepted it within that handshake's first round trip, which no sample
times). Each count is placed in the shutdown window of its server that it belongs to (sent no
later than the window's end, answered no earlier than its `t0_lo`) by `core.phase.phase_at`
over the window's bounds: T0 anywhere in `[t0_lo, t0_hi]`, the delay exact where the run's
settings give one that agrees with the header's, else the header's +- 0.5 s (it is rounded to
whole seconds). Where the bounds leave more than one phase possible the count says all of
them, joined by `|` (`before|delay_early`): never one guessed. `opened` is the connection's
phase; each count is also keyed by the phase it was itself met in (sent at `t`, ended at
`t + dur`; a late answer was met past T0, its header says). What cannot be placed says why:
`no_server`, `no_shutdown` (its server had no window around it), `no_age` (a log written
before ages were recorded); its own phase is then `unknown`.

Windows close after the samples that matter to them, so counts wait per server for its next
window to close (or for the run's end), and the table comes out once, at the end
(`ConnectionAges`). A failure or resend put down to a connection's answer emits `Attributed`,
so that the compactor logs that answer (`held`) before it and a replay attributes alike.
The table is a record of the event log, so `prober analyze` holds its replay against the
daemon's and reads it from a log without samples.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from prober.core.models import (
    LB,
    WITHOUT_TARGET,
    Connection,
    OfStream,
    Sample,
    StreamId,
    Window,
)
from prober.core.phase import ShutdownPhase, phase_at

HEADER_ROUNDING = 0.5  # the header's delay is whole seconds
LOOKBACK = 600.0  # longer than any platform's graceful termination
MAX_CONNECTIONS = 4096  # ports of kept connections remembered: a handful per stream are alive
SAME_OPENING = 1e-5  # `t` and `connection_age` are each rounded to the microsecond
MAX_HOSTS = 64  # hosts are the server's to name: windows remembered per host, hosts bounded
PHASES = tuple(ShutdownPhase)


class Seen(StrEnum):
    LATE = "late"
    FAILED = "failed"
    RESENT = "resent"


class Unplaced(StrEnum):
    """Why a count has no phase."""

    NO_SERVER = "no_server"  # no answer on its connection named a server
    NO_SHUTDOWN = "no_shutdown"  # its server had no shutdown window around it
    NO_AGE = "no_age"  # the sample does not say its connection's age (an older log)


@dataclass(frozen=True, slots=True)
class Attributed:
    """A failure or a resend on a kept connection, put down to the server of `by`, the newest
    answer on that connection: the compactor logs `by` before `sample`."""

    sample: Sample
    by: Sample


@dataclass(frozen=True, slots=True)
class AgeRow(OfStream):
    """What one stream met on connections opened in one phase of their server's shutdown:
    counts by the phase each was itself met in, and the failures' classes."""

    stream_id: StreamId = field(metadata=WITHOUT_TARGET)
    opened: str  # a phase, phases joined by "|", or an `Unplaced` reason
    late: Mapping[str, int] = field(default_factory=dict)
    failed: Mapping[str, int] = field(default_factory=dict)
    resent: Mapping[str, int] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConnectionAges:
    """The run's table, made at its end (`t`): an event-log record of the request kind, so
    that a log without samples (a compact pod log) still has it. Rows in stream, then phase
    order."""

    KIND: ClassVar[str] = "connection_ages"
    t: float
    rows: tuple[AgeRow, ...]


@dataclass(frozen=True, slots=True)
class _Met:
    """One count waiting for its server's window."""

    seen: Seen
    sample: Sample
    opened: float


@dataclass(frozen=True, slots=True)
class _Shutdown:
    """One closed window's T0 and delay as bounds, and the last instant it held."""

    t0_lo: float
    t0_hi: float
    delay_lo: float
    delay_hi: float
    end_t: float

    def holds(self, met: _Met) -> bool:
        return met.sample.end >= self.t0_lo and met.sample.t <= self.end_t

    def place(self, start: float, end: float, *, late: bool = False) -> str:
        """The phases an instant in [start, end] may be in, in order, joined by `|`; `late`:
        the server said it was past T0 then."""
        first = PHASES.index(phase_at(start, self.t0_hi, self.delay_hi))
        last = PHASES.index(phase_at(end, self.t0_lo, self.delay_lo))
        if late:
            first = max(first, PHASES.index(ShutdownPhase.DELAY_EARLY))
        return "|".join(PHASES[first : max(first, last) + 1])


def shutdown_of(window: Window, exact_delay: float | None) -> _Shutdown:
    """A window's T0 and delay, as bounds: the exact delay where one is known and agrees with
    the header's rounding, the header's +- 0.5 s else."""
    if exact_delay is not None and abs(exact_delay - window.delay) <= HEADER_ROUNDING:
        lo = hi = exact_delay
    else:
        lo, hi = max(window.delay - HEADER_ROUNDING, 0.0), window.delay + HEADER_ROUNDING
    return _Shutdown(window.t0_lo, window.t0_hi, lo, hi, window.end_t)


class _Answers:
    """Per kept connection, its newest-sent answer naming a server. A connection is its
    stream, local port and opening (`t - connection_age`): a port is taken again by later
    connections, and a fresh connection's first sample may not be in the event log, so it is
    not what says that the port's last connection is gone (a resend, always logged, is)."""

    def __init__(self) -> None:
        self._by_port: dict[tuple[str, int], list[Sample]] = {}
        self._newest = -math.inf

    def note(self, sample: Sample) -> None:
        if sample.connection is not Connection.REUSED or sample.local_port is None:
            return
        if sample.shutdown is None:
            return
        key = (sample.stream, sample.local_port)
        answers = self._by_port.pop(key, [])
        same = [i for i, known in enumerate(answers) if _same_connection(known, sample)]
        if not same:
            answers.append(sample)
        elif answers[same[0]].t <= sample.t:
            answers[same[0]] = sample
        self._by_port[key] = answers  # last in the dict: forgotten last
        self._newest = max(self._newest, sample.t)
        self._expire()

    def of(self, asking: Sample, port: int, *, same: bool) -> Sample | None:
        """The newest answer on that port of `asking`'s stream sent within LOOKBACK seconds
        before it; `same`: over the connection `asking` went over (else any)."""
        answers = [
            a for a in self._by_port.get((asking.stream, port), [])
            if a.t >= asking.t - LOOKBACK and (not same or _same_connection(a, asking))
        ]  # fmt: skip
        return max(answers, key=lambda a: a.t, default=None)

    def forget(self, stream: str, port: int) -> None:
        """The connection at that port is gone, and every one before it."""
        self._by_port.pop((stream, port), None)

    def _expire(self) -> None:
        """Answers no sample can ask for any more (`of` looks back LOOKBACK from a sample
        that took at most a timeout to arrive): a bounded memory, alike live and on replay."""
        horizon = self._newest - 2 * LOOKBACK
        for key in list(self._by_port)[:2]:  # the least recently answered ports first
            kept = [a for a in self._by_port[key] if a.t >= horizon]
            if kept:
                self._by_port[key] = kept
            else:
                del self._by_port[key]
        _bound(self._by_port, MAX_CONNECTIONS)


def _opened(sample: Sample) -> float | None:
    return None if sample.connection_age is None else sample.t - sample.connection_age


def _same_connection(a: Sample, b: Sample) -> bool:
    """Whether two samples of one stream and port went over one connection: opened at one
    instant (to the microseconds each figure is rounded to), or both of unknown age."""
    opened_a, opened_b = _opened(a), _opened(b)
    if opened_a is None or opened_b is None:
        return opened_a is opened_b
    return abs(opened_a - opened_b) <= SAME_OPENING


class _Counts:
    def __init__(self) -> None:
        self.by: dict[Seen, Counter[str]] = {seen: Counter() for seen in Seen}
        self.errors: Counter[str] = Counter()


class ConnectionAgeTracker:
    """Fed every sample; told of every window as it closes (`closed`)."""

    def __init__(self, exact_delay: float | None = None) -> None:
        self._exact_delay = exact_delay
        self._answers = _Answers()
        self._waiting: dict[str, deque[_Met]] = defaultdict(deque)
        self._shutdowns: dict[str, deque[_Shutdown]] = {}
        self._counts: dict[tuple[StreamId, str], _Counts] = {}
        self._newest = -math.inf

    def feed(self, sample: Sample) -> list[Attributed]:
        if sample.stopped:
            return []
        events: list[Attributed] = []
        met_port = sample.replaced_port if sample.retried is not None else None
        cut = None  # the answer on the kept connection a resend met, gone since
        if met_port is not None and not sample.held:
            cut = self._server(sample, met_port, events, own=False)
            self._answers.forget(sample.stream, met_port)
        self._answers.note(sample)
        if sample.held:
            return []  # fed again only for the answer it carries
        if sample.late:
            self._met(Seen.LATE, sample, sample)
        if sample.failed:
            self._met(Seen.FAILED, sample, self._server(sample, sample.local_port, events))
        if met_port is not None:
            self._met(Seen.RESENT, sample, cut)
        return events

    def closed(self, window: Window) -> None:
        """A window closed: place what waited for it."""
        shutdown = shutdown_of(window, self._exact_delay)
        kept = self._shutdowns.setdefault(window.host, deque(maxlen=4))
        kept.append(shutdown)
        _bound(self._shutdowns, MAX_HOSTS)
        waiting = self._waiting.pop(window.host, deque())
        for met in waiting:
            if shutdown.holds(met):
                self._place(met, shutdown)
            elif met.sample.end < shutdown.t0_lo:
                self._count(met, Unplaced.NO_SHUTDOWN)
            else:  # sent after it ended: the server's next shutdown may hold it
                self._waiting[window.host].append(met)

    def close(self, end_t: float) -> ConnectionAges:
        """The run's end at `end_t`, after its last windows closed: what still waits had
        none."""
        for waiting in self._waiting.values():
            for met in waiting:
                self._count(met, Unplaced.NO_SHUTDOWN)
        self._waiting.clear()
        rows = [
            AgeRow(
                stream_id=stream,
                opened=opened,
                late=_sorted(c.by[Seen.LATE]),
                failed=_sorted(c.by[Seen.FAILED]),
                resent=_sorted(c.by[Seen.RESENT]),
                errors=_sorted(c.errors),
            )
            for (stream, opened), c in self._counts.items()
        ]
        return ConnectionAges(end_t, tuple(sorted(rows, key=_row_order)))

    def _server(
        self, sample: Sample, port: int | None, events: list[Attributed], *, own: bool = True
    ) -> Sample | None:
        """The sample that names the server a failure or resend met: its own answer, or the
        newest answer on the kept connection it went over (`port`; for a resend, the one it
        met, whose opening it does not know: the port's newest)."""
        if own and sample.shutdown is not None:
            return sample
        if port is None or (own and sample.reused is not True):
            return None
        by = self._answers.of(sample, port, same=own)
        if by is not None:
            events.append(Attributed(sample, by))
        return by

    def _met(self, seen: Seen, sample: Sample, by: Sample | None) -> None:
        if by is None or by.shutdown is None:
            self._count(_Met(seen, sample, math.nan), Unplaced.NO_SERVER)
            return
        own = by if seen is Seen.RESENT else sample
        if own.connection_age is None:
            self._count(_Met(seen, sample, math.nan), Unplaced.NO_AGE)
            return
        met = _Met(seen, sample, own.t - own.connection_age)
        host = by.shutdown.host
        for shutdown in reversed(self._shutdowns.get(host, ())):
            if shutdown.holds(met):
                self._place(met, shutdown)
                return
        self._waiting[host].append(met)
        self._newest = max(self._newest, sample.t)
        self._expire()

    def _expire(self) -> None:
        """Counts no window took in LOOKBACK seconds had none (a bounded memory)."""
        horizon = self._newest - LOOKBACK
        for host, waiting in list(self._waiting.items()):
            while waiting and waiting[0].sample.t < horizon:
                self._count(waiting.popleft(), Unplaced.NO_SHUTDOWN)
            if not waiting:
                del self._waiting[host]

    def _place(self, met: _Met, shutdown: _Shutdown) -> None:
        at = shutdown.place(met.sample.t, met.sample.end, late=met.seen is Seen.LATE)
        self._count(met, shutdown.place(met.opened, met.opened), at)

    def _count(self, met: _Met, opened: str, at: str = "unknown") -> None:
        counts = self._counts.get((met.sample.stream_id, opened))
        if counts is None:
            counts = self._counts[(met.sample.stream_id, opened)] = _Counts()
        counts.by[met.seen][at] += 1
        if met.seen is Seen.FAILED and met.sample.error is not None:
            counts.errors[met.sample.error.value] += 1


def _sorted(counts: Counter[str]) -> dict[str, int]:
    return {key: counts[key] for key in sorted(counts, key=phase_order)}


def phase_order(key: str) -> tuple[int, str]:
    """Phases in their order, a span at its first, reasons last."""
    first = key.split("|", 1)[0]
    return (PHASES.index(ShutdownPhase(first)), key) if first in PHASES else (len(PHASES), key)


def _row_order(row: AgeRow) -> tuple[str, int, str, str, tuple[int, str]]:
    """As the summary lists its keys: target, LB, protocol, connection, then phase."""
    s = row.stream_id
    return (s.target, list(LB).index(s.lb), s.protocol, s.connection, phase_order(row.opened))


def _bound(per_key: dict[Any, Any], most: int) -> None:
    """Forget the keys met longest ago past `most`."""
    while len(per_key) > most:
        del per_key[next(iter(per_key))]
