"""Wait for a condition that the system under test will make true, with a generous timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not condition():  # noqa: ASYNC110 - metric values signal nothing
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
