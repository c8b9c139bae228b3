"""The one way tests poll: for a state that has no event to await (a metric, a file, a
connection table), checked every few milliseconds until it holds or a generous timeout."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(
    condition: Callable[[], T | Awaitable[T]],
    what: str = "the condition",
    timeout: float = 15,
    every: float = 0.01,
) -> T:
    """The first truthy value of `condition()` (awaited when it is a coroutine: a scrape);
    an AssertionError naming `what` if none comes within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                await asyncio.sleep(every)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
