"""A listening socket that can be closed at any moment without losing a connection.

`asyncio.Server.close()` on Python 3.11 races with its own accept: a connection the kernel
handed over in the same loop pass is wrapped by a task that runs after the close, fails an
assertion in `Server._attach`, and leaves the accepted socket open and unowned until the
garbage collector finds it. The client meanwhile sits on an established connection nobody
answers, where a real apiserver's closed listener would have reset it. Here every accepted
socket is handed to asyncio in the same callback that accepted it, and `close()` stops the
accepting synchronously, so a connection is either served or was never accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable

ACCEPTS_PER_WAKEUP = 128  # like asyncio's backlog-sized accept batch


class Listener:
    def __init__(
        self,
        factory: Callable[[], asyncio.BaseProtocol],
        sock: socket.socket,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self._factory = factory
        self._sock: socket.socket | None = sock
        self._context = context
        self._loop = asyncio.get_running_loop()
        self._handshakes: set[asyncio.Task[None]] = set()
        self.port: int = sock.getsockname()[1]
        self._loop.add_reader(sock.fileno(), self._accept)

    @classmethod
    async def open(
        cls,
        factory: Callable[[], asyncio.BaseProtocol],
        host: str,
        port: int,
        *,
        context: ssl.SSLContext | None = None,
        backlog: int = 1024,
    ) -> Listener:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=backlog)
        sock.setblocking(False)
        return cls(factory, sock, context)

    @property
    def closed(self) -> bool:
        return self._sock is None

    def close(self) -> None:
        """Stop accepting now: later connection attempts are refused, the backlog is reset."""
        if self._sock is None:
            return
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            if self._sock is None:
                return
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # EMFILE and friends: the connection stays in the backlog for the next
                # wakeup, as asyncio's own server does.
                return
            conn.setblocking(False)
            task = self._loop.create_task(self._connect(conn), name="listener handshake")
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn, ssl=self._context)
        except (OSError, ssl.SSLError, TimeoutError):
            # A handshake that failed or a client that left: asyncio closed the transport.
            with contextlib.suppress(OSError):
                conn.close()
