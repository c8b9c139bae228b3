"""Time, injectable: the system clock in production; in tests a fake that moves only when
the test says (`tests/support/clock.py`), so scheduling, back-off and an apiserver's shutdown
phases are tested without waiting for them.

Samples carry their own times, read where the request meets the network; this clock only
paces work and times lifecycle phases.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, deadline: float) -> None: ...


class SystemClock:
    """CLOCK_MONOTONIC is system-wide on Linux, so other processes can compare our `mono`."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
