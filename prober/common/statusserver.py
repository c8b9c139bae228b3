"""The HTTP endpoints of every long-running command (`prober run`, `prober audit follow`) on
one port: `/metrics`, `/healthz` and `/readyz`. A small h11 server: three GET routes do not
need a framework, and one server means a scraper meets the same behaviour everywhere
(keep-alive, HEAD, bounds on request heads, idle connections, slow heads, unread answers and
the number of connections).

A check returns what is wrong, one line each; an empty list is 200 `ok`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import h11
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_REQUEST = 16 * 1024

Check = Callable[[], list[str]]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may hold of the server: seconds, but `connections`."""

    # Prometheus keeps a scrape connection open between scrapes (default every 30-60 s); a
    # client silent for longer than this holds a connection and a task for nothing.
    idle: float = 120.0
    # Once a request has begun, its head must be whole within this (one byte every 0.8 s held
    # a head open for as long as the client liked), and an answer must be taken within `write`
    # (a pipelining client that never reads held its handler in drain()).
    head: float = 10.0
    write: float = 10.0
    connections: int = 64  # a scraper or two, a kubelet, a person with curl; past that, refused


def passing() -> list[str]:
    return []


class StatusServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        healthz: Check = passing,
        readyz: Check = passing,
        limits: Limits | None = None,
    ) -> None:
        self._limits = limits or Limits()
        self._registry = registry
        self._checks = {"/healthz": (healthz, "not healthy"), "/readyz": (readyz, "not ready")}
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        """Listen, and return the port (useful when asked for port 0)."""
        self._server = await asyncio.start_server(self._handle, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._open)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._open):  # idle keep-alive connections of scrapers
            writer.close()
        await asyncio.sleep(0)

    def route(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one request."""
        path = path.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path in self._checks:
            check, verdict = self._checks[path]
            problems = check()
            if not problems:
                return 200, "text/plain", b"ok\n"
            body = "".join(f"[-] {problem}\n" for problem in problems) + f"{verdict}\n"
            return 503, "text/plain", body.encode()
        return 404, "text/plain", b"not found: try /metrics, /healthz or /readyz\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self._limits.connections:
            writer.close()  # 3,000 were accepted, each with its task and buffers
            return
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST)
        self._open.add(writer)
        try:
            await self._serve(conn, reader, writer)
        except h11.RemoteProtocolError:
            with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
                writer.write(conn.send(h11.Response(status_code=400, headers=[])) or b"")
        except TimeoutError:
            # close() would wait to flush what the client does not read, for ever: drop it.
            writer.transport.abort()
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _serve(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        head_due: float | None = None  # when the request begun must have its whole head
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                wait = self._limits.idle if head_due is None else head_due - loop.time()
                data = await asyncio.wait_for(reader.read(65536), max(wait, 0.0))
                conn.receive_data(data)
                if not data:
                    return
                if head_due is None and conn.their_state is h11.IDLE:
                    head_due = loop.time() + self._limits.head
            elif isinstance(event, h11.Request):
                head_due = None
                await self._answer(conn, writer, event)
            elif isinstance(event, h11.EndOfMessage):
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
            else:
                return

    async def _answer(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request
    ) -> None:
        status, content_type, body = self.route(request.method.decode(), request.target.decode())
        if request.method == b"HEAD":
            body = b""
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        writer.write(conn.send(h11.Data(data=body)) or b"")
        writer.write(conn.send(h11.EndOfMessage()) or b"")
        await asyncio.wait_for(writer.drain(), self._limits.write)
