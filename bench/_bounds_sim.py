"""A simulated cluster for the bound benchmarks: three apiservers behind four LBs, rolled one
at a time, sampled by 16 streams whose pace the real `PaceTracker` sets and whose witness
bursts the real `BurstPlanner` asks for. Samples are fed to the real trackers in the order
they end, as the daemon's pipeline feeds them.

The LBs, per shutdown (T0 = the server's `/readyz` going false):
* external and internal: stop routing new connections to the server R s after T0 (R drawn
  per LB and shutdown, 10 to 30 s: a cloud LB's health checks), and reset the kept
  connections to it then (AWS's connection termination);
* service network: stops routing after 1 to 3 s (the proxy's sync), keeps established
  connections until the server closes them at the end of its delay;
* localhost: master-0 only, until it stops listening at the end of its delay.
Each fresh connection goes to a server of the LB's rotation chosen at random; each stream's
kept connection is on the shutting-down server one time in three. The prober has one core,
and each request costs it CPU before it reaches the network (`HANDSHAKE` for a fresh
connection's TLS handshake), so a burst's requests queue behind each other and the ticks:
without that, parallel requests would be free, and the bursts' benefit overstated. The server
serves (late) until T0 + delay, then refuses connections; it is back `termination` + 10 s
after T0.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from collections import Counter
from dataclasses import dataclass, field, replace

from prober.config import Config
from prober.core.burst import PARALLEL, Burst, BurstPlanner
from prober.core.disruption import DisruptionTracker
from prober.core.header import ShutdownHeader
from prober.core.models import (
    LB,
    Connection,
    ErrorClass,
    Pace,
    Protocol,
    Replacement,
    Sample,
    StreamId,
    Window,
)
from prober.core.pace import PaceTracker
from prober.core.shutdown import ShutdownTracker, WindowOpened

HOSTS = ("master-0", "master-1", "master-2")
# The prober's CPU per request (bench/daemon_cpu.py: about 3.2 ms a fresh HTTP/1.1 request on
# uvloop, here; a kept one a fraction of it): a burst's requests queue for it.
HANDSHAKE, KEPT_CPU = 0.003, 0.0005
QUIET, WINDOW_GAP = 1.0, 0.05
STREAMS = [
    StreamId("kube-api", p, lb, c) for lb in LB for p in Protocol for c in Connection
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    bursts: bool  # witness bursts (`core.burst`)
    rests: bool  # streams waiting only for a shutdown delay rest (`ShutdownTracker.rests`)
    rise: float = 1.0  # fresh streams of an LB whose reaction is open sample this much faster


TODAY = Policy("today", bursts=False, rests=False)
NEW = Policy("bursts", bursts=True, rests=True, rise=Config().rise)


@dataclass(frozen=True, slots=True)
class Shutdown:
    host: str
    t0: float
    reactions: dict[LB, float]  # R: when after T0 the LB stops routing to the server


@dataclass(slots=True)
class Row:
    """One stream's bound on one shutdown, against the truth."""

    stream: StreamId
    truth: float
    lo: float | None
    hi: float | None

    @property
    def width(self) -> float | None:
        return None if self.lo is None or self.hi is None else self.hi - self.lo

    @property
    def inside(self) -> bool:
        return (self.lo is None or self.lo <= self.truth) and (
            self.hi is None or self.truth <= self.hi
        )


@dataclass(slots=True)
class Result:
    requests: int = 0
    burst_requests: int = 0
    per_window: list[int] = field(default_factory=list)  # requests sent while it was open
    window_requests: Counter[str] = field(default_factory=Counter)  # per stream, summed
    rows: list[Row] = field(default_factory=list)


@dataclass(slots=True)
class _Kept:
    host: str
    port: int
    broken: bool = False  # reset by the LB: the next request on it fails


def shutdowns(rng: random.Random, starts: list[float], delay: float, term: float) -> list[Shutdown]:
    """Each start rolls the three servers, each a minute after the previous is back."""
    out = []
    for start in starts:
        for n, host in enumerate(HOSTS):
            reactions = {
                LB.EXTERNAL: rng.uniform(10.0, 30.0),
                LB.INTERNAL: rng.uniform(10.0, 30.0),
                LB.SERVICE_NETWORK: rng.uniform(1.0, 3.0),
                LB.LOCALHOST: delay,
            }
            out.append(Shutdown(host, start + n * (term + 60.0), reactions))
    return out


@dataclass(frozen=True, slots=True)
class _Request:
    """One request as the cluster meets it: who sent it when, and which server is down."""

    stream: StreamId
    t: float
    dur: float
    down: str | None  # the server shutting down now
    since: float  # seconds since its T0
    burst: int | None = None


class Cluster:
    def __init__(self, rng: random.Random, plan: list[Shutdown], delay: float, term: float):
        self._rng = rng
        self._plan = plan
        self.delay, self._term = delay, term
        self._ports = itertools.count(40000)
        self._kept: dict[str, _Kept] = {}
        self._replacing: dict[str, Replacement] = {}  # why a stream's next kept one is opened
        self._gone: dict[str, int] = {}  # the port of the kept connection it replaces
        self._local: dict[str, int] = {}  # localhost's kept connections: their ports
        self._pinned_for: dict[str, int] = {}  # stream -> shutdown index its kept one is for

    def current(self, t: float) -> tuple[int, Shutdown | None]:
        which = max((n for n, s in enumerate(self._plan) if s.t0 <= t), default=-1)
        return which, (self._plan[which] if which >= 0 else None)

    def answer(self, stream: StreamId, t: float, burst: int | None = None) -> Sample:
        which, shutdown = self.current(t)
        fresh = stream.connection is Connection.NEW
        dur = self._rng.uniform(0.003, 0.02) if fresh else self._rng.uniform(0.001, 0.005)
        if shutdown is None or t >= shutdown.t0 + self._term + 10.0:
            req = _Request(stream, t, dur, None, math.inf, burst)
        else:
            req = _Request(stream, t, dur, shutdown.host, t - shutdown.t0, burst)
        if stream.lb is LB.LOCALHOST:
            return self._local_answer(req)
        if fresh:
            routes = shutdown is not None and req.since < shutdown.reactions[stream.lb]
            pool = [h for h in HOSTS if h != req.down or routes]
            return self._reply(req, self._rng.choice(pool), None)
        assert shutdown is not None or which < 0
        return self._kept_answer(req, which, shutdown)

    def _local_answer(self, req: _Request) -> Sample:
        """master-0 alone; a kept connection to it is closed at the end of its delay."""
        if req.stream.connection is Connection.NEW:
            return self._reply(req, "master-0", None)
        name = req.stream.name
        port = self._local.get(name)
        if port is not None and req.down == "master-0" and req.since >= self.delay:
            del self._local[name]  # the server closed it
            self._gone[name] = port
            port = None
        if port is None:
            port = self._local[name] = next(self._ports)
            why = Replacement.CLOSED if name in self._gone else Replacement.FIRST
            return self._opened(req, "master-0", port, why)
        return self._reply(req, "master-0", port)

    def _kept_answer(self, req: _Request, which: int, shutdown: Shutdown | None) -> Sample:
        name = req.stream.name
        kept = self._kept.get(name)
        if kept is not None and shutdown is not None and self._pinned_for.get(name) != which:
            # A new shutdown: where this stream's kept connection is, one time in three on it.
            self._pinned_for[name] = which
            kept.host = shutdown.host if self._rng.random() < 1 / 3 else _other(shutdown.host)
        replacing = None
        if kept is not None and shutdown is not None and req.down == kept.host:
            react = shutdown.reactions[req.stream.lb]
            if req.stream.lb is not LB.SERVICE_NETWORK and req.since >= react:
                kept.broken = True  # the LB reset it when it dropped the server
            if kept.broken:
                self._kept.pop(name)
                self._replacing[name] = Replacement.FAILED
                self._gone[name] = kept.port
                failed = self._sample(req, None, kept.port, reused=True)
                return _with(failed, dur=0.001, error=ErrorClass.CONNECTION_RESET, status=None)
            if req.since >= self.delay:  # the server closed it at the end of its delay
                self._kept.pop(name)
                self._gone[name] = kept.port
                kept, replacing = None, Replacement.CLOSED
        elif kept is None:
            replacing = self._replacing.pop(name, None)
        if kept is None:
            host = self._rng.choice([h for h in HOSTS if h != req.down])
            kept = self._kept[name] = _Kept(host, next(self._ports))
            self._pinned_for.setdefault(name, which)
            return self._opened(req, host, kept.port, replacing or Replacement.FIRST)
        return self._reply(req, kept.host, kept.port)

    def _opened(self, req: _Request, host: str, port: int, why: Replacement) -> Sample:
        """The first request over a kept connection just opened, naming the one it replaced."""
        gone = self._gone.pop(req.stream.name, None)
        reply = self._reply(req, host, port)
        return _with(reply, reused=False, replaced=why, replaced_port=gone)

    def _reply(self, req: _Request, host: str, port: int | None) -> Sample:
        if host == req.down and req.since >= self.delay:
            refused = self._sample(req, None, port, reused=port is not None)
            return _with(refused, dur=0.001, error=ErrorClass.CONNECT_REFUSED, status=None)
        late = host == req.down
        elapsed = _rounded(req.since + self._rng.uniform(0.0, req.dur)) if late else 0.0
        header = ShutdownHeader(late, self.delay, elapsed, host)
        return self._sample(req, header, port, reused=port is not None)

    def _sample(
        self, req: _Request, header: ShutdownHeader | None, port: int | None, *, reused: bool
    ) -> Sample:
        return Sample(
            ts="2026-12-02T00:00:00.000000Z", t=req.t, dur=req.dur, stream_id=req.stream,
            reused=reused, http_version="HTTP/2", status=200, error=None, detail="",
            shutdown=header, audit_id="", burst=req.burst,
            local_port=port if port is not None else next(self._ports),
        )  # fmt: skip


def _other(host: str) -> str:
    return HOSTS[(HOSTS.index(host) + 1) % len(HOSTS)]


def _with(s: Sample, **changes: object) -> Sample:
    return replace(s, **changes)  # type: ignore[arg-type]


def _rounded(seconds: float) -> float:
    return math.floor(seconds + 0.5)  # Go's Round for positive durations


@dataclass(slots=True)
class _Sending:
    burst: Burst
    streams: list[StreamId]
    remaining: int
    sent: int = 0

    def priority(self) -> tuple[int, int]:
        return (0 if self.sent < self.burst.bounding else 1, self.burst.number)


class Simulation:
    """One policy over one plan of shutdowns, from `start` to `end`."""

    def __init__(self, rng, policy: Policy, plan: list[Shutdown], delay: float, term: float):
        self.rng, self.policy, self.plan = rng, policy, plan
        self.cluster = Cluster(rng, plan, delay, term)
        self.shutdown, self.disruption = ShutdownTracker(), DisruptionTracker()
        self.pace = PaceTracker()
        self.planner = BurstPlanner()
        for stream in STREAMS:
            self.shutdown.add_stream(stream)
        self.events: list[tuple[float, int, str, object]] = []
        self.seq = itertools.count()
        self.result = Result()
        self.sends: list[tuple[float, str]] = []
        self.windows: list[Window] = []
        self.sending: list[_Sending] = []
        self.cpu_free = 0.0  # when the prober's core is free for the next request
        self.slots = PARALLEL

    def push(self, t: float, kind: str, data: object) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, data))

    def run(self, start: float, end: float) -> Result:
        for index in range(len(STREAMS)):
            self.push(start + self.rng.uniform(0, QUIET), "tick", index)
        while self.events:
            t, _, kind, data = heapq.heappop(self.events)
            if kind == "tick":  # one tick of each stream is queued at any time
                if t > end:
                    continue
                stream = STREAMS[data]  # type: ignore[index]
                self.send(stream, t)
                self.push(t + self.gap(stream) * self.rng.uniform(0.5, 1.5), "tick", data)
            else:
                self.feed(data, t)  # type: ignore[arg-type]
        self.windows += self.shutdown.close(end)
        self.score()
        return self.result

    def gap(self, stream: StreamId) -> float:
        """The stream's mean gap now, as `daemon.requests.pacer` gives it."""
        pace = self.pace.streams.get(stream.name, Pace.WINDOW)
        if self.pace.pace is Pace.QUIET or pace is Pace.QUIET:
            return QUIET
        return WINDOW_GAP / self.policy.rise if pace is Pace.FAST else WINDOW_GAP

    def send(self, stream: StreamId, t: float, burst: int | None = None) -> None:
        """One request, once the prober's one core gets to it: a fresh connection costs it
        `HANDSHAKE` of CPU (the TLS handshake), a kept one `KEPT_CPU`, one after another; the
        request reaches the network (`t`, where the LB chooses) when that is done."""
        fresh = stream.connection is Connection.NEW
        start = max(t, self.cpu_free)
        self.cpu_free = start + (HANDSHAKE if fresh else KEPT_CPU)
        t = self.cpu_free
        answer = self.cluster.answer(stream, t, burst)
        self.result.requests += 1
        self.result.burst_requests += burst is not None
        self.sends.append((t, stream.name))
        self.push(answer.end, "end", answer)

    def feed(self, sample: Sample, now: float) -> None:
        events = [*self.disruption.feed(sample), *self.shutdown.feed(sample)]
        self.windows += [e for e in events if isinstance(e, Window)]
        rests = self.shutdown.rests(sample.stream) if self.policy.rests else None
        changes = self.pace.feed(
            sample, windows_open=bool(self.shutdown.open_hosts),
            opened=any(isinstance(e, WindowOpened) for e in events),
            settled=self.shutdown.settled(sample.stream),
            disrupted=self.disruption.is_open(sample.stream), rests=rests,
            rising=self.policy.rise > 1 and self.shutdown.rising(sample.stream_id),
        )  # fmt: skip
        for change in changes:
            self.apply(change, now)
        if sample.burst is not None:
            self.slots += 1
        if self.policy.bursts:
            burst = self.planner.feed(sample, self.shutdown)
            if burst is not None:
                fresh = [t for t in STREAMS if t.lb is burst.lb and t.connection is Connection.NEW]
                self.sending.append(_Sending(burst, fresh, burst.count))
        self.send_bursts(now)

    def send_bursts(self, now: float) -> None:
        """As `daemon.requests.bursts` sends them: the LB's fresh streams in turn, `PARALLEL` in
        flight over every LB, the bounding requests of every burst first, then the oldest
        burst's, until the planner says stop."""
        for sending in list(self.sending):
            if not self.planner.going(sending.burst.number) or not sending.remaining:
                self.sending.remove(sending)
                self.planner.stopped(sending.burst.number, sending.sent, now)
        while self.slots and self.sending:
            sending = min(self.sending, key=_Sending.priority)
            self.slots -= 1
            stream = sending.streams[sending.sent % len(sending.streams)]
            self.send(stream, now + 0.0002 * (sending.sent + 1), sending.burst.number)
            sending.remaining -= 1
            sending.sent += 1
            if not sending.remaining:
                self.sending.remove(sending)
                self.planner.stopped(sending.burst.number, sending.sent, now)

    def apply(self, change, now: float) -> None:
        """Wake what the change makes faster, as `daemon.requests.pacer` does."""
        if change.stream is None and change.pace is Pace.WINDOW:
            woken = None  # every stream
        elif change.stream is not None and change.pace is not Pace.QUIET:
            woken = change.stream
        else:
            return
        self.events = [
            (min(t, now + self.rng.uniform(0, WINDOW_GAP)), n, k, d)
            if k == "tick" and (woken is None or STREAMS[d].name == woken) else (t, n, k, d)
            for t, n, k, d in self.events
        ]  # fmt: skip
        heapq.heapify(self.events)

    def score(self) -> None:
        """Each window against its shutdown: the requests sent while it was open (per
        stream), and each stream's bound against the truth."""
        self.sends.sort()
        times = [t for t, _ in self.sends]
        for window in self.windows:
            shutdown = _matching(self.plan, window)
            if shutdown is None:
                continue
            lo = bisect.bisect_left(times, window.first_seen_t)
            hi = bisect.bisect_right(times, window.end_t)
            self.result.per_window.append(hi - lo)
            self.result.window_requests.update(name for _, name in self.sends[lo:hi])
            for ws in window.streams:
                truth = _truth(ws.stream_id, shutdown, ws, self.cluster.delay)
                if truth is not None:
                    row = Row(ws.stream_id, truth, ws.reaction_lo, ws.reaction_hi)
                    self.result.rows.append(row)


def _matching(plan: list[Shutdown], window: Window) -> Shutdown | None:
    for shutdown in plan:
        if shutdown.host == window.host and abs(shutdown.t0 - window.t0) < 2.0:
            return shutdown
    return None


def _truth(stream: StreamId, shutdown: Shutdown, ws, delay: float) -> float | None:
    """How long after T0 this stream's LB still routed to the server; None: no reaction."""
    if stream.lb is LB.LOCALHOST:
        return delay if shutdown.host == "master-0" else None
    if stream.connection is Connection.REUSED:
        if ws.last_late_t is None:
            return None  # its kept connection was elsewhere
        if stream.lb is LB.SERVICE_NETWORK:
            return delay
        return min(shutdown.reactions[stream.lb], delay)
    return shutdown.reactions[stream.lb]
