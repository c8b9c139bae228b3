"""Time for the lifecycle: the system clock in production, a manual one in unit tests.

The lifecycle only ever asks for `monotonic()`, `wall()` and `sleep()`, so tests of the
phases advance time by hand instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """CLOCK_MONOTONIC is system-wide on Linux, so other processes can compare our `mono`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when `advance()` is called; sleepers wake in deadline order."""

    def __init__(self, start: float = 1000.0, wall_offset: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_offset
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), future))
        await future

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, future in self._sleepers if not future.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking each sleeper at its deadline and letting it run."""
        target = self._now + seconds
        await _settle()  # let tasks that are about to sleep register first
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
            await _settle()
        self._now = target
        await _settle()


async def _settle(rounds: int = 5) -> None:
    """Let woken coroutines run until they block again."""
    for _ in range(rounds):
        await asyncio.sleep(0)
