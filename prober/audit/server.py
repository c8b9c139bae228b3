"""A small HTTP/1.1 server for `/metrics` and `/healthz`: one request per connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_REQUEST_HEAD = 16 * 1024
READ_TIMEOUT = 10.0


class ListenError(ValueError):
    """A `--listen` value that is not HOST:PORT."""


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `:PORT` (all interfaces)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. 0.0.0.0:9090")
    return host.removeprefix("[").removesuffix("]") or "0.0.0.0", int(port)


class MetricsServer:
    def __init__(
        self, registry: CollectorRegistry, healthy: Callable[[], bool] = lambda: True
    ) -> None:
        self._registry = registry
        self._healthy = healthy
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen, and return the port (useful when asked for port 0)."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_REQUEST_HEAD)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            status, ctype, body = self._answer(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, ctype, body = "400 Bad Request", "text/plain", b"bad request\n"
        except ConnectionError:
            writer.close()
            return
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode("latin-1")
            + body
        )
        try:
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path == "/healthz":
            if self._healthy():
                return "200 OK", "text/plain", b"ok\n"
            return "503 Service Unavailable", "text/plain", b"the follower has stopped\n"
        return "404 Not Found", "text/plain", b"not found: try /metrics or /healthz\n"
