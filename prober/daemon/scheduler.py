"""Ticks for one stream: `workers` probers sampling in turn, so the stream's sampling gap is
interval / workers. Each tick starts a request as its own task, so a slow answer never delays
the next tick; a worker already waiting on `max_in_flight` answers skips its tick instead. If
the event loop fell behind, missed ticks are skipped, not fired in a burst.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

from prober.core.models import Sample, StreamId
from prober.daemon.clock import Clock

log = structlog.get_logger("prober.scheduler")


class SampleSource(Protocol):
    async def sample(self) -> Sample: ...

    def expire(self) -> None:
        """End the requests in flight now, each still as a sample (a timeout)."""


class StreamScheduler:
    def __init__(
        self,
        stream: StreamId,
        workers: Sequence[SampleSource],
        *,
        interval: float,
        max_in_flight: int,
        clock: Clock,
        emit: Callable[[Sample], None],
    ) -> None:
        self.stream = stream
        self._workers = list(workers)
        self._gap = interval / len(workers)
        self._max_in_flight = max_in_flight
        self._clock = clock
        self._emit = emit
        self._in_flight: list[set[asyncio.Task[None]]] = [set() for _ in workers]
        self._crashed: BaseException | None = None
        self.ticks = 0
        self.skipped = 0  # ticks not taken: the worker was full or the loop fell behind
        self.started = 0  # requests sent: each must end as exactly one emitted sample

    @property
    def in_flight(self) -> int:
        return sum(len(tasks) for tasks in self._in_flight)

    async def run(self) -> None:
        """Tick until cancelled; raises if a request raised something that is not a sample."""
        start = self._clock.monotonic()
        tick = 0
        full = False
        while True:
            await self._clock.sleep_until(start + tick * self._gap)
            if self._crashed is not None:
                crashed, self._crashed = self._crashed, None
                raise crashed
            worker = tick % len(self._workers)
            if len(self._in_flight[worker]) < self._max_in_flight:
                self._start(worker)
                full = False
            else:
                self.skipped += 1
                if not full:  # once per episode, not once per tick
                    log.warning(
                        "ticks_skipped",
                        stream=self.stream.name,
                        reason="max_in_flight",
                        in_flight=self.in_flight,
                    )
                full = True
            self.ticks += 1
            tick += 1
            now = self._clock.monotonic()
            if now - (start + tick * self._gap) > self._gap:  # a whole gap late: skip ahead
                due = math.floor((now - start) / self._gap) + 1
                self.skipped += due - tick
                tick = due

    def _start(self, worker: int) -> None:
        task = asyncio.create_task(self._one(worker), name=f"{self.stream.name}/{worker}")
        self._in_flight[worker].add(task)
        self.started += 1

    async def _one(self, worker: int) -> None:
        try:
            sample = await self._workers[worker].sample()
        except Exception as exc:  # a bug, not a network fault: the stream task restarts
            self._crashed = exc
            return
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._in_flight[worker].discard(task)
        self._emit(sample)

    async def drain(self, timeout: float, grace: float = 1.0) -> int:
        """Wait up to `timeout` for requests in flight, then make the rest end as timeouts
        (recorded like any sample) and wait up to `grace` for that. What still runs then is
        cancelled and produces no sample; returns how many were."""
        pending = {t for tasks in self._in_flight for t in tasks}
        if not pending:
            return 0
        _, still = await asyncio.wait(pending, timeout=timeout)
        if still:
            for worker in self._workers:
                worker.expire()
            _, still = await asyncio.wait(still, timeout=grace)
        for task in still:
            task.cancel()
        if still:
            await asyncio.wait(still)
        return len(still)
