"""etcd's JSON gateway (`/v3/...`), spoken over asyncio HTTP/1.1: what the fake apiserver
keeps its objects in, as kube-apiserver keeps them in etcd.

The gateway maps etcd's gRPC API to JSON: int64s are JSON strings, keys and values base64, and
proto3 defaults are left out (a PUT event has no `type`, a failed txn no `succeeded`). A watch
is one HTTP request whose chunked body is one JSON object per line; a watch from a compacted
revision answers 200, then `{"canceled": true, "compact_revision": ...}`.

Every failure of the socket, the HTTP framing or the JSON is mapped here, once, to
`EtcdUnavailable` or `EtcdError`: nothing above this module catches an OS or parsing error.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE = 8 << 20  # bytes of one response or watch message we accept
CONNECT_TIMEOUT = 5.0
CALL_TIMEOUT = 10.0
WHOLE_KEYSPACE = b"\x00"  # as key and range_end: every key (etcd's "from \0 to the end")


class EtcdError(Exception):
    """etcd answered, and said no (a compacted revision, a bad request)."""


class EtcdUnavailable(EtcdError):
    """etcd could not be reached, or the connection broke mid-answer."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    version: int


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: str  # "PUT" or "DELETE"
    kv: KeyValue
    prev: KeyValue | None


@dataclass(frozen=True, slots=True)
class WatchMessage:
    revision: int
    events: tuple[WatchEvent, ...] = ()
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def prefix_end(prefix: bytes) -> bytes:
    """The range_end that makes `prefix` a prefix query (etcd's clientv3.GetPrefixRangeEnd)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return WHOLE_KEYSPACE


def key_value(raw: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=base64.b64decode(raw.get("key", "")),
        value=base64.b64decode(raw.get("value", "")),
        create_revision=int(raw.get("create_revision", 0)),
        mod_revision=int(raw.get("mod_revision", 0)),
        version=int(raw.get("version", 0)),
    )


def watch_message(raw: dict[str, Any]) -> WatchMessage:
    result = raw.get("result")
    if not isinstance(result, dict):
        error = raw.get("error", raw)
        raise EtcdError(f"etcd watch: {error}")
    events = tuple(
        WatchEvent(
            kind=event.get("type", "PUT"),
            kv=key_value(event.get("kv", {})),
            prev=key_value(event["prev_kv"]) if "prev_kv" in event else None,
        )
        for event in result.get("events", [])
    )
    return WatchMessage(
        revision=int(result.get("header", {}).get("revision", 0)),
        events=events,
        created=bool(result.get("created", False)),
        canceled=bool(result.get("canceled", False)),
        compact_revision=int(result.get("compact_revision", 0)),
    )


class _Connection:
    """One HTTP/1.1 connection to the gateway: a request, then its answer, in turn."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        # asyncio.timeout, not wait_for: in 3.11 a wait_for cancelled as the connection
        # completes drops the connection it made, open, to the garbage collector.
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await asyncio.open_connection(host, port, limit=MAX_MESSAGE)
        return cls(reader, writer)

    async def send(self, path: str, body: dict[str, Any]) -> int:
        data = json.dumps(body, separators=(",", ":")).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        await self.writer.drain()
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        self._chunked, self._length = False, 0
        while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "transfer-encoding" and "chunked" in value.lower():
                self._chunked = True
            elif name == "content-length":
                self._length = int(value.strip())
        return status

    async def body(self) -> bytes:
        if not self._chunked:
            return await self.reader.readexactly(self._length)
        parts = [chunk async for chunk in self.chunks()]
        return b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size > MAX_MESSAGE:
                raise EtcdError(f"etcd: a chunk of {size} bytes")
            data = await self.reader.readexactly(size + 2)
            if size == 0:
                return
            yield data[:-2]

    def close(self) -> None:
        self.writer.close()


class EtcdClient:
    """Unary calls share a few kept connections; each watch has a connection of its own."""

    def __init__(self, endpoint: str) -> None:
        host, _, port = endpoint.removeprefix("http://").rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self._idle: list[_Connection] = []
        self._closed = False  # closed with its server: a call that ends after keeps nothing

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path`; the decoded answer, or a typed error."""
        connection = self._idle.pop() if self._idle else None
        try:
            if connection is None:
                connection = await _Connection.open(self.host, self.port)
            async with asyncio.timeout(CALL_TIMEOUT):
                status = await connection.send(path, body)
                data = await connection.body()
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                TimeoutError, ValueError, IndexError) as error:  # fmt: skip
            if connection is not None:
                connection.close()
            raise EtcdUnavailable(f"etcd {self.host}:{self.port}{path}: {error!r}") from None
        except asyncio.CancelledError:
            # Cut mid-call (a killed server's tasks): its answer may still come, so the
            # connection is no one's to use again; closed, not left to the collector.
            if connection is not None:
                connection.close()
            raise
        if self._closed:  # its server was killed while the call was out: no one to reuse it
            connection.close()
        else:
            self._idle.append(connection)
        answer = _decode(data, path)
        if status != 200:
            raise EtcdError(f"etcd {path}: {answer.get('message') or answer.get('error')}")
        return answer

    async def range(self, key: bytes, range_end: bytes | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"key": b64(key)}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        return await self.call("/v3/kv/range", body)

    async def txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]],
        failure: list[dict[str, Any]],
    ) -> dict[str, Any]:  # fmt: skip
        return await self.call(
            "/v3/kv/txn", {"compare": compare, "success": success, "failure": failure}
        )

    async def compact(self, revision: int) -> None:
        await self.call("/v3/kv/compaction", {"revision": str(revision)})

    async def watch(
        self, key: bytes, range_end: bytes, start_revision: int
    ) -> AsyncIterator[WatchMessage]:
        """Messages of one watch with previous values, until etcd ends it or it breaks."""
        request = {
            "create_request": {
                "key": b64(key),
                "range_end": b64(range_end),
                "start_revision": str(start_revision),
                "prev_kv": True,
            }
        }
        try:
            connection = await _Connection.open(self.host, self.port)
        except (OSError, TimeoutError) as error:
            raise EtcdUnavailable(f"etcd {self.host}:{self.port} watch: {error!r}") from None
        try:
            status = await connection.send("/v3/watch", request)
            if status != 200:
                raise EtcdError(f"etcd watch: HTTP {status}")
            pending = b""
            async for chunk in connection.chunks():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield watch_message(_decode(line, "/v3/watch"))
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, IndexError) as error:  # fmt: skip
            raise EtcdUnavailable(f"etcd {self.host}:{self.port} watch: {error!r}") from None
        finally:
            connection.close()
        raise EtcdUnavailable(f"etcd {self.host}:{self.port} watch: ended")

    def close(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def _decode(data: bytes, path: str) -> dict[str, Any]:
    try:
        answer = json.loads(data)
    except ValueError:
        raise EtcdError(f"etcd {path}: not JSON: {data[:80]!r}") from None
    if not isinstance(answer, dict):
        raise EtcdError(f"etcd {path}: not an object: {data[:80]!r}")
    return answer
