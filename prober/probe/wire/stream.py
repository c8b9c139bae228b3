"""A response body read as it arrives, one line at a time: a watch, whose every event is a
JSON line. The reader's limits keep memory bounded whatever the server sends: an event longer
than `max_line` bytes, or more than `max_queued` complete events waiting to be read, ends the
stream with a `BodyLimit` naming it; an event begun but not ended within
`stall` seconds ends it with `Stalled`. Ending it cancels the HTTP/2 stream or closes the
HTTP/1.1 connection (`on_close`), so a server cannot keep the client reading.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prober.probe.wire.errors import BodyLimit, Stalled, WireError

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What a streamed body may hold (`wire.stream`)."""

    max_line: int = 4 << 20
    max_queued: int = 10_000


@dataclass(slots=True)
class Streamed:
    """A request whose answer is streamed: the future of its head, then its body."""

    head: asyncio.Future[BodyStream]
    limits: StreamLimits
    body: BodyStream | None = None


class BodyStream:
    def __init__(
        self,
        status: int,
        headers: Headers,
        http_version: str,
        *,
        max_line: int,
        max_queued: int,
        on_close: Callable[[], None],
    ) -> None:
        self.status, self.headers, self.http_version = status, headers, http_version
        self._max_line, self._max_queued = max_line, max_queued
        self._on_close = on_close
        self._loop = asyncio.get_running_loop()
        self._partial = bytearray()
        self._partial_since: float | None = None  # loop time of the current event's first byte
        self._lines: deque[bytes] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.ended = False
        self.error: WireError | None = None
        self.received = 0  # bytes of body so far

    # -- what the connection feeds ---------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.ended or self.error is not None:
            return
        self.received += len(data)
        if b"\n" not in data:  # the common piece of a long event: no copy of what came before
            self._partial += data
            if self._partial_since is None and data:
                self._partial_since = self._loop.time()
        else:
            *complete, rest = (bytes(self._partial) + data).split(b"\n")
            self._lines.extend(line for line in complete if line.strip())
            self._partial = bytearray(rest)
            self._partial_since = self._loop.time() if rest else None
        if len(self._partial) > self._max_line:
            self.fail(BodyLimit(f"an event longer than {self._max_line} bytes"))
        elif len(self._lines) > self._max_queued:
            self.fail(BodyLimit(f"more than {self._max_queued} events unread"))
        self._wake()

    def end(self) -> None:
        if self._partial.strip():
            self._lines.append(bytes(self._partial))
        self._partial.clear()
        self.ended = True
        self._wake()

    def fail(self, error: WireError) -> None:
        """The stream ends with `error` (a limit, or the connection breaking under it)."""
        if self.ended or self.error is not None:
            return
        self.error = error
        self._lines.clear()
        self._partial.clear()
        self._on_close()
        self._wake()

    # -- what the reader calls ---------------------------------------------------------------
    async def next_line(self, stall: float | None = None) -> bytes | None:
        """The next event line; None once the body ended. Raises the stream's error."""
        while True:
            if self._lines:
                return self._lines.popleft()
            if self.error is not None:
                raise self.error
            if self.ended:
                return None
            waiter = self._waiter = self._loop.create_future()
            timeout = None
            if stall is not None and self._partial_since is not None:
                timeout = max(0.0, self._partial_since + stall - self._loop.time())
            try:
                async with asyncio.timeout(timeout):
                    await waiter
            except TimeoutError:
                self.fail(Stalled(self._loop.time() - (self._partial_since or 0.0)))
            finally:
                self._waiter = None

    def close(self) -> None:
        """The reader is done with it: stop the answer."""
        if not self.ended and self.error is None:
            self.ended = True
            self._on_close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def feeder(streamed: Streamed) -> Callable[[bytes], None]:
    def feed(piece: bytes) -> None:
        if streamed.body is not None:
            streamed.body.feed(piece)

    return feed


def fail_streamed(streamed: Streamed, error: WireError) -> None:
    if streamed.body is not None:
        streamed.body.fail(error)
    elif not streamed.head.done():
        streamed.head.set_exception(error)


def consume(future: asyncio.Future[Any]) -> None:
    """A streamed request's own future: its outcome went to the stream; retrieve it so that
    asyncio does not call it unhandled."""
    if not future.cancelled():
        future.exception()
