"""Named, guarded background tasks: a failure is logged with the task's name and the task is
restarted after an exponential back-off; the process stays up (kopf's model)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from prober.common.clock import Clock

log = structlog.get_logger("prober.supervisor")


@dataclass(frozen=True, slots=True)
class Backoff:
    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 30.0
    reset_after: float = 60.0  # a run this long forgives earlier failures

    def delay(self, failures: int) -> float:
        """The wait before restart number `failures` (1-based)."""
        return min(self.maximum, self.initial * self.factor ** max(0, failures - 1))


class Supervisor:
    def __init__(self, clock: Clock, backoff: Backoff | None = None) -> None:
        self._clock = clock
        self._backoff = backoff or Backoff()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.failures: Counter[str] = Counter()

    def spawn(self, name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run `run()` as task `name`, again and again while it fails, until it returns."""
        if name in self._tasks and not self._tasks[name].done():
            raise ValueError(f"task {name!r} is already running")
        task = asyncio.create_task(self._guard(name, run), name=name)
        self._tasks[name] = task
        return task

    def spawn_once(self, name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run `run()` once as task `name`, forgotten once it ended: a failure is logged with
        its name and counted, not restarted (a one-off job, such as a witness burst)."""
        task = asyncio.create_task(self._once(name, run), name=name)
        self._tasks[name] = task
        task.add_done_callback(lambda done: self._forget(name, done))
        return task

    def _forget(self, name: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(name) is task:
            del self._tasks[name]

    def running(self, prefix: str) -> list[str]:
        """The names of the tasks running now that start with `prefix`."""
        return [n for n, t in self._tasks.items() if n.startswith(prefix) and not t.done()]

    async def _once(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        try:
            await run()
        except Exception as exc:
            self.failures[name] += 1
            log.error("task_failed", task=name, error=f"{type(exc).__name__}: {exc}", exc_info=exc)

    async def _guard(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        failures = 0
        while True:
            started = self._clock.monotonic()
            try:
                await run()
                return
            except Exception as exc:
                if self._clock.monotonic() - started >= self._backoff.reset_after:
                    failures = 0
                failures += 1
                self.failures[name] += 1
                delay = self._backoff.delay(failures)
                log.error(
                    "task_failed",
                    task=name,
                    error=f"{type(exc).__name__}: {exc}",
                    failures=failures,
                    restart_in=delay,
                    exc_info=exc,
                )
            await self._clock.sleep_until(self._clock.monotonic() + delay)
            log.info("task_restarted", task=name, failures=failures)

    async def stop(self, *names: str) -> None:
        """Cancel the named tasks (all when none are named) and wait for them to end."""
        chosen = (
            [self._tasks[n] for n in names if n in self._tasks]
            if names
            else list(self._tasks.values())
        )
        for task in chosen:
            task.cancel()
        for task in chosen:
            with contextlib.suppress(asyncio.CancelledError):
                await task
