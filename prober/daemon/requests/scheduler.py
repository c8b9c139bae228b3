"""Ticks for one stream: `workers` probers sampling in turn, so the stream's sampling gap is
interval / workers on average. Each tick starts a request as its own task, so a slow answer
never delays the next tick.

A tick is skipped, and counted by reason, rather than sent late or sent badly:
`busy` when the worker's kept connection still carries a request (a reused HTTP/1.1 worker
has `capacity` 1: queueing behind a hung request, or opening a second connection under a
reused name, would both falsify what the stream measures); `max_in_flight` when a worker
already waits on that many answers; `behind` when the event loop fell more than a gap behind
(missed ticks are skipped, not fired in a burst).

The mean gap is the pacer's (adaptive sampling, `daemon.requests.pacer`): the window gap while an
apiserver shuts down, a quiet gap otherwise; a quiet sleep is cut short when the window rate
engages.

The gaps are jittered: each is drawn uniformly from [1 - JITTER, 1 + JITTER] times the mean.
Periodic probes through a round-robin LB lock into phase with its rotation: in a lab run one
stream met only one of three servers for 84 requests in a row, and so never saw the others
shut down. With random gaps every request lands on any server in rotation, which is what the
bound on a reaction through a balancing LB assumes (`core.reaction`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from prober.common.clock import Clock
from prober.core.models import Sample, StreamId
from prober.daemon.metricspecs import BEHIND, BUSY, MAX_IN_FLIGHT
from prober.daemon.requests.pacer import Pacer

log = structlog.get_logger("prober.scheduler")

JITTER = 0.5


class SampleSource(Protocol):
    # How many requests it may have in flight at once (1: one kept HTTP/1.1 connection).
    capacity: int

    async def sample(self) -> Sample: ...

    def stop(self) -> None:
        """End the requests in flight now, and any begun later at once, each still as a
        sample (of class `stopped`)."""


class StreamScheduler:
    def __init__(
        self,
        stream: StreamId,
        workers: Sequence[SampleSource],
        *,
        interval: float,
        clock: Clock,
        emit: Callable[[Sample], None],
        on_skip: Callable[[StreamId, str, int], None] | None = None,
        jitter: float = JITTER,
        rng: random.Random | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.stream = stream
        self.stream_name = stream.name
        self._workers = list(workers)
        self._gap = interval / len(workers)
        self._clock = clock
        self._emit = emit
        self._on_skip = on_skip
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._pacer = pacer or Pacer(None)
        self._pacer.attach(self)
        self._sleeper: asyncio.Future[None] | None = None  # a quiet sleep, cut short by wake()
        self._in_flight: list[set[asyncio.Task[bool]]] = [set() for _ in workers]
        self._crashed: BaseException | None = None
        self.ticks = 0
        self.due = 0  # ticks that fell due: sent, skipped, or missed while behind
        self.skipped: Counter[str] = Counter()  # ticks not taken, by reason
        self.started = 0  # requests sent: each must end as exactly one emitted sample
        self.raised = 0  # of them, those whose probe raised (a bug): no sample, but counted
        self._extras = 0

    @property
    def in_flight(self) -> int:
        return sum(len(tasks) for tasks in self._in_flight)

    async def run(self) -> None:
        """Tick until cancelled; raises if a request raised something that is not a sample."""
        due = self._clock.monotonic()
        tick = 0
        blocked: list[str | None] = [None] * len(self._workers)  # per worker: its episode
        while True:
            if await self._sleep_until(due):
                # Woken: the window rate engaged. Within a window gap, not all streams at once.
                due = self._clock.monotonic() + self._rng.uniform(0.0, self._gap)
                continue
            if self._crashed is not None:
                crashed, self._crashed = self._crashed, None
                raise crashed
            worker = tick % len(self._workers)
            reason = self._blocked(worker)
            if reason is None:
                self._start(worker)
            else:
                self._skip(reason, 1, announce=reason != blocked[worker])
            blocked[worker] = reason
            self.ticks += 1
            self.due += 1
            tick += 1
            due += self._next_gap()
            now = self._clock.monotonic()
            gap = self._pacer.gap(self.stream_name, self._gap)
            if now - due > gap:  # more than a whole gap late: skip what fell due
                missed = math.floor((now - due) / gap) + 1
                self._skip(BEHIND, missed, announce=False)
                self.due += missed
                tick += missed
                due = now + self._next_gap()

    def _blocked(self, worker: int) -> str | None:
        capacity = self._workers[worker].capacity
        if len(self._in_flight[worker]) < capacity:
            return None
        return BUSY if capacity == 1 else MAX_IN_FLIGHT

    def _next_gap(self) -> float:
        gap = self._pacer.gap(self.stream_name, self._gap)
        if not self._jitter:
            return gap
        return gap * (1.0 + self._jitter * self._rng.uniform(-1.0, 1.0))

    async def _sleep_until(self, due: float) -> bool:
        """Sleep until `due`; True if woken earlier (the window rate engaged). Only a quiet
        sleep is wakeable: at the window rate a gap is short, and a task per tick would cost."""
        if self._pacer.gap(self.stream_name, self._gap) <= self._gap:
            await self._clock.sleep_until(due)
            return False
        sleeper = self._sleeper = asyncio.ensure_future(self._clock.sleep_until(due))
        try:
            await asyncio.wait([sleeper])
        finally:
            self._sleeper = None
            sleeper.cancel()
        return sleeper.cancelled()

    def wake(self) -> None:
        """The window rate engaged: a quiet sleep ends now."""
        if self._sleeper is not None:
            self._sleeper.cancel()

    def _skip(self, reason: str, count: int, *, announce: bool) -> None:
        self.skipped[reason] += count
        if self._on_skip is not None:
            self._on_skip(self.stream, reason, count)
        if announce:  # once per episode, not once per tick
            log.warning(
                "ticks_skipped", stream=self.stream.name, reason=reason, in_flight=self.in_flight
            )

    def _start(self, worker: int, burst: int | None = None) -> asyncio.Task[bool]:
        name = f"{self.stream.name}/{worker}" + ("" if burst is None else f"/burst-{burst}")
        task = asyncio.create_task(self._one(worker, burst), name=name)
        self._in_flight[worker].add(task)
        self.started += 1
        return task

    def extra(self, burst: int) -> asyncio.Task[bool]:
        """One request now, outside the ticks, as part of witness burst `burst`: a sample of
        this stream like any other, marked with the burst's number. The burst's sender
        bounds how many are in flight (`daemon.requests.bursts`), so no tick capacity applies; the
        workers take turns, and `drain` waits for these too. The task's result: whether it
        emitted its sample."""
        worker = self._extras % len(self._workers)
        self._extras += 1
        return self._start(worker, burst)

    async def _one(self, worker: int, burst: int | None = None) -> bool:
        try:
            sample = await self._workers[worker].sample()
        except Exception as exc:  # a bug, not a network fault: the stream task restarts
            self._crashed = exc
            self.raised += 1
            # Said now: at the stop the stream's task is cancelled before it can raise this.
            log.error("sample_raised", stream=self.stream_name, error=f"{type(exc).__name__}: "
                      f"{exc}", exc_info=exc)  # fmt: skip
            return False
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._in_flight[worker].discard(task)
        self._emit(sample if burst is None else dataclasses.replace(sample, burst=burst))
        return True

    async def drain(self, timeout: float, grace: float = 1.0) -> int:
        """Wait up to `timeout` (the stop's grace) for requests in flight, then cut the rest:
        each ends as a sample of class `stopped` (recorded and counted, no failure), and up
        to `grace` is given for that. What still runs then is cancelled and produces no
        sample (a request that ignored its own cancellation: a bug); returns how many were."""
        pending = {t for tasks in self._in_flight for t in tasks}
        if not pending:
            return 0
        _, still = await asyncio.wait(pending, timeout=timeout)
        if still:
            for worker in self._workers:
                worker.stop()
            _, still = await asyncio.wait(still, timeout=grace)
        for task in still:
            task.cancel()
        if still:
            await asyncio.wait(still)
        return len(still)
