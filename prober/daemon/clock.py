"""The daemon's view of time, injectable so that scheduling and back-off are tested on a fake
clock. Samples carry their own times, read by the probe; this clock only paces the work."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep_until(self, deadline: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep_until(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
