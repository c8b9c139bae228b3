"""The fake clock of every timing test (the daemon's scheduler and supervisor, the fake
apiserver's lifecycle): time moves only when a test advances it, and sleepers wake in
deadline order, each let run before the next wakes."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeClock:
    def __init__(self, start: float = 1000.0, wall_offset: float = 1_700_000_000.0) -> None:
        self.now = start
        self._wall_offset = wall_offset
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self.now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self.now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), future))
        await future

    @property
    def sleepers(self) -> int:
        return sum(1 for _, _, future in self._sleepers if not future.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in deadline order and letting each settle."""
        target = self.now + seconds
        await settle()  # let tasks that are about to sleep register first
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
