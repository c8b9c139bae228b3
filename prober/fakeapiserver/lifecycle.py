"""A server's life as k8s.io/apiserver sequences it, apart from any socket: readiness going
true after it listens (`Startup`), and graceful termination (`Lifecycle`).

The signals fire in upstream order (k8s.io/apiserver `pkg/server/lifecycle_signals.go`). What
each phase does to connections is asked of a `Drainer` (the server), and every wait goes through
the injected `Clock`, so the whole sequence runs under a manual clock in unit tests.

    ShutdownInitiated -> TerminationPreShutdownHooksFinished -> (delay)
    -> AfterShutdownDelayDuration -> NotAcceptingNewRequest
    retry-after mode:    -> InFlightRequestsDrained -> HTTPServerStoppedListening
    no-retry-after mode: -> HTTPServerStoppedListening -> InFlightRequestsDrained
    -> TerminationGracefulTerminationFinished
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from prober.common.clock import Clock
from prober.core.phase import LATE_FRACTION, ShutdownPhase, phase_at

WATCH_DRAIN_MIN_QPS = 200.0  # upstream floor for closing watches during shutdown
DRAIN_TICK = 0.005  # seconds between the watch drain's batches, at the least


class Signal(StrEnum):
    SHUTDOWN_INITIATED = "ShutdownInitiated"
    PRE_SHUTDOWN_HOOKS_FINISHED = "TerminationPreShutdownHooksFinished"
    AFTER_SHUTDOWN_DELAY = "AfterShutdownDelayDuration"
    NOT_ACCEPTING_NEW_REQUEST = "NotAcceptingNewRequest"
    IN_FLIGHT_REQUESTS_DRAINED = "InFlightRequestsDrained"
    HTTP_SERVER_STOPPED_LISTENING = "HTTPServerStoppedListening"
    TERMINATION_FINISHED = "TerminationGracefulTerminationFinished"


class Drainer(Protocol):
    """What the lifecycle asks of the server at each phase."""

    def stop_listening(self) -> None:
        """Close the listeners, GOAWAY HTTP/2 connections, close idle HTTP/1.1 ones."""

    async def wait_requests_drained(self) -> None:
        """Return when no non-long-running request is in flight."""

    def open_watches(self) -> int: ...

    def end_watches(self, count: int | None) -> None:
        """End `count` open watches cleanly (all of them when None)."""

    async def wait_connections_closed(self) -> None: ...

    def abort_connections(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SignalTime:
    mono: float
    wall: float


SignalListener = Callable[[Signal, SignalTime, str], None]


@dataclass(frozen=True, slots=True)
class Timing:
    delay: float
    send_retry_after: bool = True
    request_timeout: float = 60.0  # bounds the in-flight drain and the final connection close
    watch_grace: float = 0.0  # --shutdown-watch-termination-grace-period
    watch_min_qps: float = WATCH_DRAIN_MIN_QPS
    # How long the HTTP server's Shutdown waits for connections before the process exits and
    # cuts what is left (open watches among them); None: the request timeout.
    shutdown_timeout: float | None = None


Name = TypeVar("Name", bound=str)


class Instants(Generic[Name]):
    """When each of a server's named instants came (a signal, readiness), on both clocks,
    and a wait for each."""

    def __init__(self, names: Iterable[Name], clock: Clock) -> None:
        self.clock = clock
        self.times: dict[Name, SignalTime] = {}
        self._events = {name: asyncio.Event() for name in names}

    async def wait(self, name: Name) -> SignalTime:
        await self._events[name].wait()
        return self.times[name]

    def _stamp(self, name: Name) -> SignalTime:
        stamp = SignalTime(self.clock.monotonic(), self.clock.wall())
        self.times[name] = stamp
        self._events[name].set()
        return stamp


class Lifecycle(Instants[Signal]):
    """The signals, when each fired, and the per-request facts that depend on them."""

    def __init__(self, timing: Timing, clock: Clock, listener: SignalListener) -> None:
        super().__init__(Signal, clock)
        self.timing = timing
        self._listener = listener
        self.trigger = ""

    # -- facts the request path asks for -------------------------------------------------
    @property
    def shutdown_started(self) -> bool:
        return Signal.SHUTDOWN_INITIATED in self.times

    @property
    def not_accepting(self) -> bool:
        return Signal.NOT_ACCEPTING_NEW_REQUEST in self.times

    @property
    def stopped_listening(self) -> bool:
        return Signal.HTTP_SERVER_STOPPED_LISTENING in self.times

    def elapsed(self, mono: float) -> float:
        """Seconds since ShutdownInitiated at `mono`; 0 before it."""
        start = self.times.get(Signal.SHUTDOWN_INITIATED)
        return 0.0 if start is None else max(0.0, mono - start.mono)

    def is_late(self, accepted_mono: float) -> bool:
        """Whether a connection accepted at `accepted_mono` came after 80 % of the delay."""
        start = self.times.get(Signal.SHUTDOWN_INITIATED)
        if start is None:
            return False
        return accepted_mono - start.mono > LATE_FRACTION * self.timing.delay

    def phase(self, mono: float) -> ShutdownPhase:
        """Where `mono` falls in the shutdown (`core.phase`): before it, in the delay's first
        80 % or its last 20 % (where new connections are "late"), or after the delay."""
        start = self.times.get(Signal.SHUTDOWN_INITIATED)
        if start is None:
            return ShutdownPhase.BEFORE
        return phase_at(mono, start.mono, self.timing.delay)

    def threshold_percent(self, mono: float) -> int:
        """Elapsed as a whole percentage of the delay (100 when there is no delay)."""
        if self.timing.delay <= 0:
            return 100
        return int(self.elapsed(mono) / self.timing.delay * 100)

    def signaled(self, signal: Signal) -> bool:
        return signal in self.times

    # -- transitions ---------------------------------------------------------------------
    def initiate(self, trigger: str) -> bool:
        """Start graceful termination (SIGTERM, the admin endpoint, the API); idempotent."""
        if self.shutdown_started:
            return False
        self.trigger = trigger
        self._fire(Signal.SHUTDOWN_INITIATED)
        # Our pre-shutdown hooks (readiness; the identity Lease's deletion, begun by the
        # server as this fires) finish at once.
        self._fire(Signal.PRE_SHUTDOWN_HOOKS_FINISHED)
        return True

    def _fire(self, signal: Signal) -> None:
        if signal not in self.times:
            self._listener(signal, self._stamp(signal), self.trigger)

    async def run(self, drainer: Drainer) -> None:
        """The whole sequence, from waiting for the trigger to the last connection closed."""
        start = await self.wait(Signal.SHUTDOWN_INITIATED)
        await self.clock.sleep(start.mono + self.timing.delay - self.clock.monotonic())
        self._fire(Signal.AFTER_SHUTDOWN_DELAY)
        self._fire(Signal.NOT_ACCEPTING_NEW_REQUEST)
        if not self.timing.send_retry_after:
            self._fire(Signal.HTTP_SERVER_STOPPED_LISTENING)
            drainer.stop_listening()
        await self._bounded(drainer.wait_requests_drained(), self.timing.request_timeout)
        await self._drain_watches(drainer)
        self._fire(Signal.IN_FLIGHT_REQUESTS_DRAINED)
        if self.timing.send_retry_after:
            self._fire(Signal.HTTP_SERVER_STOPPED_LISTENING)
            drainer.stop_listening()
        timing = self.timing
        final = (
            timing.request_timeout if timing.shutdown_timeout is None else timing.shutdown_timeout
        )
        if not await self._bounded(drainer.wait_connections_closed(), final):
            drainer.abort_connections()
        self._fire(Signal.TERMINATION_FINISHED)

    async def _drain_watches(self, drainer: Drainer) -> None:
        """End watches cleanly at max(count / grace, floor) per second, within the grace
        period. Without one (upstream's default) none is ended: they are cut when the server
        stops, as are those the grace period did not reach."""
        count = drainer.open_watches()
        grace = self.timing.watch_grace
        if not count or grace <= 0:
            return
        qps = max(count / grace, self.timing.watch_min_qps)
        start = self.clock.monotonic()
        ended = 0
        while True:
            # As many as the rate allows by now: a timer per watch would fall behind at
            # thousands per second, and the drain would take longer than upstream's.
            now = self.clock.monotonic()
            due = int((now - start) * qps) + 1 - ended
            if due > 0:
                drainer.end_watches(due)
                ended += due
            left = start + grace - now
            if not drainer.open_watches() or left <= 0:
                break
            await self.clock.sleep(min(max(start + ended / qps - now, DRAIN_TICK), left))

    async def _bounded(self, work: Awaitable[None], seconds: float) -> bool:
        """Await `work` for at most `seconds` of the injected clock; True if it finished."""
        work_task = asyncio.ensure_future(work)
        timer = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait({work_task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work_task, timer):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if work_task.done() and not work_task.cancelled():
            work_task.result()  # re-raise what the drainer raised
            return True
        return False


class Startup(Instants[str]):
    """Readiness going true. kube-apiserver listens, then runs its post-start hooks
    (k8s.io/apiserver `hooks.go`): each is a `poststarthook/<name>` check of /readyz, of
    /healthz and, after `--livez-grace-period`, of /livez, failing until the hook returns.
    One of them starts the identity Lease controller, whose first write is fast against the
    hooks that sync informers: so the new holder's first renewTime comes before /readyz goes
    true, and the fake waits for that write (`hooks`) as well as `--post-start-hooks-duration`.

    Requests are served from listening on, as upstream does; unless the server is in the
    early-ready mode (`--early-ready-duration`, the bug of openshift/kubernetes #2730, #2732):
    /readyz goes true on time, and the server can serve only that long after it. The instants
    `ready` and `serving` go to the listener, as the signals do."""

    READY = "ready"
    SERVING = "serving"

    def __init__(
        self,
        post_start_hooks: float,
        early_ready: float,
        livez_grace: float,
        clock: Clock,
        listener: Callable[[str, SignalTime], None],
    ) -> None:
        self.post_start_hooks, self.early_ready, self.livez_grace = (
            post_start_hooks,
            early_ready,
            livez_grace,
        )
        super().__init__((self.READY, self.SERVING), clock)
        self._listener = listener
        self.listened: float | None = None  # monotonic

    @property
    def order(self) -> tuple[str, str]:
        """The two instants in the order they come."""
        return (self.READY, self.SERVING) if self.early_ready > 0 else (self.SERVING, self.READY)

    @property
    def ready(self) -> bool:
        return self.READY in self.times

    @property
    def serving(self) -> bool:
        return self.SERVING in self.times

    def hooks_failing(self, endpoint: str, mono: float) -> bool:
        """Whether the post-start hooks' checks fail on `endpoint` (readyz, livez, healthz)."""
        if self.ready:
            return False
        listened = mono if self.listened is None else self.listened
        return not (endpoint == "livez" and mono - listened < self.livez_grace)

    def listening(self) -> None:
        self.listened = self.clock.monotonic()
        if self.early_ready <= 0:
            self._fire(self.SERVING)

    async def run(self, hooks: asyncio.Event | None = None) -> None:
        """From listening: the hooks (and `hooks` set), then ready, then (early-ready mode)
        serving."""
        listened = self.clock.monotonic() if self.listened is None else self.listened
        await self.clock.sleep_until(listened + self.post_start_hooks)
        if hooks is not None:
            await hooks.wait()
        self._fire(self.READY)
        if self.early_ready > 0:
            await self.clock.sleep(self.early_ready)
            self._fire(self.SERVING)

    def _fire(self, name: str) -> None:
        self._listener(name, self._stamp(name))
