"""The daemon's side of witness bursts: send what `core.burst`'s planner asks for.

The pipeline feeds each sample to the planner after the trackers; a burst it returns comes
here, and goes out as requests of the LB's new-connection streams (`StreamScheduler.extra`,
taking turns), at most `parallel` of them in flight at once over every LB, so that no LB and
no apiserver sees more than that many burst requests from one prober; a free slot goes to a
request that bounds a reaction before one that confirms a bound, then to the oldest burst.
Before each request the planner is asked whether to go on (it stops a burst that met the
server); when the burst is over, the planner hears how many samples it made, and counts them
in as they are fed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence

from prober.core.burst import Burst, BurstPlanner
from prober.core.models import LB, Connection
from prober.daemon.requests.scheduler import StreamScheduler
from prober.daemon.supervisor import Supervisor


class Slots:
    """At most `size` held at once; waiters served by priority (lowest first), then in turn."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting: list[tuple[tuple[int, int], int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def acquire(self, priority: tuple[int, int]) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._order), waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot as it was cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, waiter = heapq.heappop(self._waiting)
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class BurstSender:
    def __init__(
        self,
        planner: BurstPlanner,
        schedulers: Sequence[StreamScheduler],
        *,
        parallel: int,
        supervisor: Supervisor,
        now: Callable[[], float],
    ) -> None:
        self._planner = planner
        self._fresh: dict[tuple[str, LB], list[StreamScheduler]] = {}
        for scheduler in schedulers:
            stream = scheduler.stream
            if stream.connection is Connection.NEW:
                self._fresh.setdefault((stream.target, stream.lb), []).append(scheduler)
        self._slots = Slots(parallel)
        self._supervisor = supervisor
        self._now = now
        self._closed = False

    def close(self) -> None:
        """The daemon stops: no burst starts from now on. The pipeline still feeds samples
        while the schedulers drain, and a burst it asked for then would send requests that
        no drain waits for (started, never recorded)."""
        self._closed = True

    def send(self, burst: Burst) -> None:
        """Called by the pipeline as the planner asks; the burst runs as its own task."""
        streams = None if self._closed else self._fresh.get((burst.target, burst.lb))
        if not streams:  # the planner only asks for LBs the samples came through
            self._planner.stopped(burst.number, 0, self._now())
            return
        self._supervisor.spawn_once(f"burst-{burst.number}", lambda: self._run(burst, streams))

    async def _run(self, burst: Burst, streams: list[StreamScheduler]) -> None:
        try:
            made = await self._requests(burst, streams)
        except Exception:
            self._planner.stopped(burst.number, 0, self._now())  # the LB may burst again
            raise
        self._planner.stopped(burst.number, made, self._now())

    async def _requests(self, burst: Burst, streams: list[StreamScheduler]) -> int:
        """Send the burst's requests; how many made a sample. Cancelled (the daemon stops),
        the requests sent are the schedulers' to drain."""
        tasks: list[asyncio.Task[bool]] = []
        for index in range(burst.count):
            # The bounding requests of every burst first, then the oldest burst's.
            await self._slots.acquire((0 if index < burst.bounding else 1, burst.number))
            if not self._planner.going(burst.number):
                self._slots.release()
                break
            task = streams[index % len(streams)].extra(burst.number)
            task.add_done_callback(lambda _task: self._slots.release())
            tasks.append(task)
        if tasks:
            await asyncio.wait(tasks)
        return sum(1 for t in tasks if not t.cancelled() and t.result())
