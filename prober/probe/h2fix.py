"""httpcore's HTTP/2 stream slots, without an event-loop round trip per slot.

httpcore opens every HTTP/2 connection by taking 99 of its 100 stream slots one `acquire()` at
a time, and its anyio semaphore yields to the event loop on every acquire. Idle, that costs
nothing; in a daemon with hundreds of ready tasks on a busy CI machine each yield is a full
pass of the loop, and a fresh HTTP/2 connection then waits seconds before its request is even
sent (measured: 4 s stalls and timeouts on 15 % of `http2` `new` requests with the two cores
saturated). An asyncio semaphore has the same counting and bound but returns at once when a
slot is free, so the setup costs no loop passes. `bench/daemon_cpu.py` and
`tests/probe/test_h2fix.py` show the difference.

And h2's memory of closed streams: an `H2Connection` keeps the id of every stream it closed,
up to 65,536 of them (about 8 MB), so that a late frame on one is recognised. A kept
connection reaches that after 65,536 requests, 1.8 hours at the default rate, and the daemon
keeps one per worker, HTTP/2 stream and LB: RSS grew by tens of MB over a long run before it
levelled off. The probe's requests end within their timeout, so a late frame comes within
seconds; a few hundred closed streams cover that (`tests/reliability/test_probe_boundary.py`).
"""

from __future__ import annotations

import asyncio

import h2.connection
import httpcore._async.http2 as _http2

CLOSED_STREAMS_KEPT = 512  # per HTTP/2 connection: many seconds of requests even at 4x rate


class EagerSemaphore:
    """The interface httpcore's `AsyncSemaphore` offers its HTTP/2 connection."""

    def __init__(self, bound: int) -> None:
        self._semaphore = asyncio.BoundedSemaphore(bound)

    async def acquire(self) -> None:
        await self._semaphore.acquire()

    async def release(self) -> None:
        self._semaphore.release()


def install() -> None:
    """Idempotent; the probe calls it at import, before any connection exists."""
    _http2.AsyncSemaphore = EagerSemaphore  # type: ignore[misc,assignment]
    h2.connection.H2Connection.MAX_CLOSED_STREAMS = CLOSED_STREAMS_KEPT
