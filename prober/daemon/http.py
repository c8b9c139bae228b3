"""The daemon's HTTP endpoints on one port: `/metrics`, `/healthz` (the process is alive),
`/readyz` (configuration loaded and every stream has produced a sample). A small h11 server:
three GET routes do not need a framework."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import h11
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

MAX_REQUEST = 16 * 1024


class StatusServer:
    def __init__(self, registry: CollectorRegistry, not_ready: Callable[[], list[str]]) -> None:
        self._registry = registry
        self._not_ready = not_ready  # what keeps /readyz from 200; empty when ready
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._handle, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

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
        if path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            waiting = self._not_ready()
            if not waiting:
                return 200, "text/plain", b"ok\n"
            body = "".join(f"[-] {reason}\n" for reason in waiting) + "not ready\n"
            return 503, "text/plain", body.encode()
        return 404, "text/plain", b"not found\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST)
        self._open.add(writer)
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    conn.receive_data(data)
                    if not data:
                        return
                elif isinstance(event, h11.Request):
                    status, content_type, body = self.route(
                        event.method.decode(), event.target.decode()
                    )
                    if event.method == b"HEAD":
                        body = b""
                    headers = [("content-type", content_type), ("content-length", str(len(body)))]
                    writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
                    writer.write(conn.send(h11.Data(data=body)) or b"")
                    writer.write(conn.send(h11.EndOfMessage()) or b"")
                    await writer.drain()
                elif isinstance(event, h11.EndOfMessage):
                    if conn.our_state is h11.MUST_CLOSE:
                        return
                    conn.start_next_cycle()
                else:
                    return
        except (h11.ProtocolError, ConnectionError):
            return
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
