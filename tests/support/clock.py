"""A fake monotonic clock for scheduling logic: time moves only when a test advances it."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self.now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in deadline order and letting each settle."""
        target = self.now + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, deadline)
            if not future.done():
                future.set_result(None)
            await settle()
        self.now = target
        await settle()

    async def jump(self, seconds: float) -> None:
        """Move time forward at once, as if the event loop had been blocked: every sleeper
        that is due wakes at the new time."""
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
        await settle()


async def settle(rounds: int = 20) -> None:
    """Let every ready task run until they all wait again (no I/O is involved)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
