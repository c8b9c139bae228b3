"""Waits for the next thing that satisfies a predicate: a process's output line, an LB's
state change. Whoever sees the things offers each one; each waiter takes the first it wants."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Waiters(Generic[T]):
    def __init__(self) -> None:
        self._waiting: list[tuple[Callable[[T], bool], asyncio.Future[T]]] = []
        self._failed: Exception | None = None

    def offer(self, item: T) -> None:
        """Hand `item` to every waiter that wants it."""
        for predicate, future in self._waiting:
            if not future.done() and predicate(item):
                future.set_result(item)

    def fail(self, error: Exception) -> None:
        """End every wait with `error`, and every later one: nothing it wants will come."""
        self._failed = error
        for _, future in self._waiting:
            if not future.done():
                future.set_exception(error)

    async def wait(self, predicate: Callable[[T], bool], timeout: float) -> T:
        """The next item offered that satisfies `predicate`; TimeoutError after `timeout`."""
        if self._failed is not None:
            raise self._failed
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.append((predicate, future))
        try:
            # Not wait_for: on 3.11 it returns the result when the task is cancelled just as
            # the future completes, and a Ctrl-C in that instant was lost (the lab ran on).
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self._waiting = [(p, f) for p, f in self._waiting if f is not future]
