"""Three things httpcore 1.0 does that a daemon probing for hours cannot live with.

HTTP/2 stream slots, without an event-loop round trip per slot.

httpcore opens every HTTP/2 connection by taking 99 of its 100 stream slots one `acquire()` at
a time, and its anyio semaphore yields to the event loop on every acquire. Idle, that costs
nothing; in a daemon with hundreds of ready tasks on a busy CI machine each yield is a full
pass of the loop, and a fresh HTTP/2 connection then waits seconds before its request is even
sent (measured: 4 s stalls and timeouts on 15 % of `http2` `new` requests with the two cores
saturated). An asyncio semaphore has the same counting and bound but returns at once when a
slot is free, so the setup costs no loop passes. `bench/daemon_cpu.py` and
`tests/probe/test_httpcore_fixes.py` show the difference.

And h2's memory of closed streams: an `H2Connection` keeps the id of every stream it closed,
up to 65,536 of them (about 8 MB), so that a late frame on one is recognised. A kept
connection reaches that after 65,536 requests, 1.8 hours at the default rate, and the daemon
keeps one per worker, HTTP/2 stream and LB: RSS grew by tens of MB over a long run before it
levelled off. The probe's requests end within their timeout, so a late frame comes within
seconds; a few hundred closed streams cover that (`tests/reliability/test_probe_boundary.py`).

And a request cancelled in its TLS handshake: the probe's deadline (and `expire()` when the
daemon stops) cancels the request task, and httpcore closes the TCP stream under a failed
handshake only for exceptions, not for cancellation, so each such request left an open socket
(`tests/probe/test_prober.py`: a server that never answers the ClientHello).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

import h2.connection
import httpcore._async.http2 as _http2
from httpcore._backends.anyio import AnyIOStream

CLOSED_STREAMS_KEPT = 512  # per HTTP/2 connection: many seconds of requests even at 4x rate


class EagerSemaphore:
    """The interface httpcore's `AsyncSemaphore` offers its HTTP/2 connection."""

    def __init__(self, bound: int) -> None:
        self._semaphore = asyncio.BoundedSemaphore(bound)

    async def acquire(self) -> None:
        await self._semaphore.acquire()

    async def release(self) -> None:
        self._semaphore.release()


_start_tls = AnyIOStream.start_tls


async def _start_tls_or_close(
    self: AnyIOStream,
    ssl_context: ssl.SSLContext,
    server_hostname: str | None = None,
    timeout: float | None = None,
) -> Any:
    try:
        return await _start_tls(self, ssl_context, server_hostname, timeout)
    except BaseException:
        # anyio's aclose closes the transport before its first await, so a second
        # cancellation arriving there cannot leave the socket open.
        with contextlib.suppress(BaseException):
            await self.aclose()
        raise


def install() -> None:
    """Idempotent; the probe calls it at import, before any connection exists."""
    _http2.AsyncSemaphore = EagerSemaphore  # type: ignore[misc,assignment]
    h2.connection.H2Connection.MAX_CLOSED_STREAMS = CLOSED_STREAMS_KEPT
    AnyIOStream.start_tls = _start_tls_or_close  # type: ignore[method-assign]
