"""A raw HTTP/2 client (hyperframe + hpack, no state machine) for what httpx does not do on
purpose: hold a stream open with its body pending, keep reading streams after a GOAWAY as
Go's client does (h2's client refuses to), watch each frame arrive."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


async def open_tls(
    port: int, ca: Path, alpn: list[str]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(alpn)
    return await asyncio.open_connection("127.0.0.1", port, ssl=context)


@dataclass
class Stream:
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    ended: bool = False
    reset: int | None = None

    @property
    def status(self) -> int | None:
        return int(self.headers[":status"]) if ":status" in self.headers else None


class RawH2:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.encoder, self.decoder = hpack.Encoder(), hpack.Decoder()
        self.streams: dict[int, Stream] = {}
        self.frames: list[Frame] = []
        self.goaway: GoAwayFrame | None = None
        self.closed = False
        self._next_stream = 1
        self._buffer = b""
        self._header_block: tuple[int, bytes, bool] | None = None

    @classmethod
    async def connect(cls, port: int, ca: Path) -> RawH2:
        reader, writer = await open_tls(port, ca, ["h2"])
        client = cls(reader, writer)
        writer.write(PREFACE + SettingsFrame(0).serialize())
        await writer.drain()
        return client

    async def send(self, *frames: Frame) -> None:
        self.writer.write(b"".join(f.serialize() for f in frames))
        await self.writer.drain()

    async def request(
        self, path: str, headers: list[tuple[str, str]] | None = None, end: bool = True
    ) -> int:
        stream_id, self._next_stream = self._next_stream, self._next_stream + 2
        fields = [(":method", "GET"), (":scheme", "https"), (":authority", "127.0.0.1")]
        frame = HeadersFrame(
            stream_id, self.encoder.encode([*fields, (":path", path), *(headers or [])])
        )
        frame.flags.add("END_HEADERS")
        if end:
            frame.flags.add("END_STREAM")
        self.streams[stream_id] = Stream()
        await self.send(frame)
        return stream_id

    async def end_stream(self, stream_id: int, data: bytes = b"") -> None:
        frame = DataFrame(stream_id, data)
        frame.flags.add("END_STREAM")
        await self.send(frame)

    async def read_until(self, done: Callable[[RawH2], bool], timeout: float = 10.0) -> None:
        """Read frames until `done(self)` holds or the server closes the connection."""
        async with asyncio.timeout(timeout):
            while not done(self) and not self.closed:
                data = await self.reader.read(65536)
                if not data:
                    self.closed = True
                    break
                self._buffer += data
                await self._parse()

    async def _parse(self) -> None:
        while len(self._buffer) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self._buffer[:9]))
            if len(self._buffer) < 9 + length:
                return
            frame.parse_body(memoryview(self._buffer[9 : 9 + length]))
            self._buffer = self._buffer[9 + length :]
            self.frames.append(frame)
            await self._on_frame(frame)

    async def _on_frame(self, frame: Frame) -> None:
        if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            await self.send(SettingsFrame(0, flags=["ACK"]))
        elif isinstance(frame, PingFrame) and "ACK" not in frame.flags:
            await self.send(PingFrame(0, frame.opaque_data, flags=["ACK"]))
        elif isinstance(frame, HeadersFrame | ContinuationFrame):
            stream_id = frame.stream_id
            block = frame.data if isinstance(frame, HeadersFrame) else b""
            if isinstance(frame, ContinuationFrame) and self._header_block:
                stream_id, block, _ = self._header_block
                block += frame.data
            end = "END_STREAM" in frame.flags or bool(self._header_block and self._header_block[2])
            if "END_HEADERS" in frame.flags:
                self._header_block = None
                stream = self.streams.setdefault(stream_id, Stream())
                stream.headers.update(
                    (
                        k.decode() if isinstance(k, bytes) else k,
                        v.decode() if isinstance(v, bytes) else v,
                    )
                    for k, v in self.decoder.decode(block)
                )
                stream.ended = stream.ended or end
            else:
                self._header_block = (stream_id, block, end)
        elif isinstance(frame, DataFrame):
            stream = self.streams.setdefault(frame.stream_id, Stream())
            stream.body += frame.data
            stream.ended = stream.ended or "END_STREAM" in frame.flags
            if frame.flow_controlled_length:
                await self.send(
                    WindowUpdateFrame(0, window_increment=frame.flow_controlled_length),
                    WindowUpdateFrame(
                        frame.stream_id, window_increment=frame.flow_controlled_length
                    ),
                )
        elif isinstance(frame, GoAwayFrame):
            self.goaway = frame
        elif isinstance(frame, RstStreamFrame):
            self.streams.setdefault(frame.stream_id, Stream()).reset = frame.error_code

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()
