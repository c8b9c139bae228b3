"""HTTP/1.1 for a prober, sans I/O: a request's bytes out, an answer's bytes in.

Only what a client of kube-apiserver meets: a status line, headers, and a body framed by
Content-Length, chunked transfer coding or the connection's close. Anything else a server
sends is a `ProtocolViolation` naming it, never an exception of another kind: the fuzz tests
(`tests/reliability/test_header_fuzz.py`) feed it arbitrary header bytes from a real server.
Limits are h11's: a head of at most 64 KiB; bodies read whole are bounded too, since a prober
never needs more than a few kilobytes of them. A streamed body (a watch) goes to its consumer
piece by piece as it arrives, and the consumer bounds it (`wire.stream`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto

from prober.probe.wire.errors import ConnectionClosed, ProtocolViolation

MAX_HEAD = 64 * 1024
MAX_BODY = 8 * 1024 * 1024
_STATUS = re.compile(rb"HTTP/1\.([01]) (\d{3})(?: [^\r\n]*)?")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:;[^\r\n]*)?")

Headers = list[tuple[bytes, bytes]]  # names lower-cased, values stripped


def format_request(
    target: str,
    authority: str,
    headers: list[tuple[str, str]],
    *,
    method: str = "GET",
    body: bytes = b"",
) -> bytes:
    """A request, with a body when one is given. Values come from the probe's own
    configuration, never from a server, but a line break in one would still split the
    request: refused here."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    for name, value in headers:
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name} holds a line break")
        lines.append(f"{name}: {value}")
    if body or method in ("PUT", "POST"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Headers
    body: bytes
    keep_alive: bool  # the connection may carry the next request


class _More(Enum):
    MORE = auto()  # a step made progress and there may be more to do


_MORE = _More.MORE
_Step = Response | None | _More


class _State(Enum):
    HEAD = auto()
    LENGTH = auto()
    CHUNK_SIZE = auto()
    CHUNK_DATA = auto()
    CHUNK_END = auto()  # the CRLF after a chunk's data
    TRAILERS = auto()
    UNTIL_CLOSE = auto()
    DONE = auto()  # a response without a body, whole with its head


class ResponseReader:
    """Fed the bytes of one answer as they come; `feed` returns the response once whole.
    With `on_body`, the body goes there as it arrives instead (the response's `body` is then
    empty), and `on_head` hears the status and headers first, as soon as they are in."""

    def __init__(
        self,
        on_body: Callable[[bytes], None] | None = None,
        on_head: Callable[[int, Headers], None] | None = None,
    ) -> None:
        self._sink = on_body
        self._on_head = on_head
        self._buffer = bytearray()
        self._state = _State.HEAD
        self._head: tuple[int, Headers, bool] | None = None
        self._body = bytearray()
        self._left = 0
        self.answered = False  # a byte of the answer has arrived

    @property
    def head(self) -> tuple[int, Headers, bool] | None:
        """Status, headers and keep-alive, once the head is read."""
        return self._head

    def feed(self, data: bytes) -> Response | None:
        if data:
            self.answered = True
            self._buffer += data
        while True:
            step = self._step()
            if not isinstance(step, _More):
                return step

    def eof(self) -> Response:
        """The peer closed: the answer if the close is what ends its body, else the error."""
        if self._state is _State.UNTIL_CLOSE and self._head is not None:
            self._take(bytes(self._buffer))
            self._buffer.clear()
            return self._finish()
        raise ConnectionClosed(
            "server closed the connection before the answer was complete"
            if self.answered
            else "server closed the connection without sending an answer",
            reset=False,
            answered=self.answered,
        )

    def _step(self) -> _Step:
        read = _READERS.get(self._state)
        if read is not None:
            return read(self)
        self._take(bytes(self._buffer))  # UNTIL_CLOSE: everything up to the close
        self._buffer.clear()
        return None

    def _read_head(self) -> _Step:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD:
                raise ProtocolViolation(f"response head larger than {MAX_HEAD // 1024} KiB")
            return None
        if end > MAX_HEAD:
            raise ProtocolViolation(f"response head larger than {MAX_HEAD // 1024} KiB")
        head = bytes(self._buffer[:end])
        del self._buffer[: end + 4]
        status, version, headers = _parse_head(head)
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolViolation("101 Switching Protocols to a plain GET")
            return _MORE  # an interim answer: the real one follows
        keep_alive = version == 1 and not _has_token(headers, b"connection", b"close")
        self._head = (status, headers, keep_alive)
        if self._on_head is not None:
            self._on_head(status, headers)  # before a byte of the body goes to `on_body`
        self._state = self._framing(status, headers)
        return self._finish() if self._state is _State.DONE else _MORE

    def _framing(self, status: int, headers: Headers) -> _State:
        if status in (204, 304):
            return _State.DONE
        codings = [v for n, v in headers if n == b"transfer-encoding"]
        if codings:
            last = codings[-1].split(b",")[-1].strip().lower()
            if last != b"chunked":
                raise ProtocolViolation(f"transfer coding {last.decode('latin-1')!r}")
            return _State.CHUNK_SIZE
        lengths = {v for n, v in headers if n == b"content-length"}
        if len(lengths) > 1 or any(not v.isdigit() or len(v) > 12 for v in lengths):
            raise ProtocolViolation(f"bad Content-Length {b', '.join(sorted(lengths))!r}")
        if lengths:
            self._left = int(lengths.pop())
            if self._left > MAX_BODY and self._sink is None:
                raise ProtocolViolation(f"body of {self._left} bytes, more than a probe reads")
            return _State.LENGTH
        return _State.UNTIL_CLOSE

    def _read_length(self) -> _Step:
        if self._sink is None and len(self._buffer) < self._left:
            return None  # read whole: wait for all of it
        piece = bytes(self._buffer[: self._left])
        del self._buffer[: len(piece)]
        self._left -= len(piece)
        if piece:
            self._take(piece)
        return self._finish() if not self._left else None

    def _read_chunk_size(self) -> _Step:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) > 1024:
                raise ProtocolViolation("chunk size line too long")
            return None
        match = _CHUNK_SIZE.fullmatch(bytes(self._buffer[:end]))
        if match is None:
            raise ProtocolViolation("bad chunk size line")
        del self._buffer[: end + 2]
        self._left = int(match[1], 16)
        # Checked before a byte of it is buffered: FFFFFFFFFFFFFFFF would otherwise be read
        # up to the timeout (44 MB -> 444 MB in one request).
        if self._sink is None and len(self._body) + self._left > MAX_BODY:
            raise ProtocolViolation(f"chunk of {self._left} bytes, more than a probe reads")
        self._state = _State.CHUNK_DATA if self._left else _State.TRAILERS
        return _MORE

    def _read_chunk_data(self) -> _Step:
        """A chunk's data as far as it has come: a streamed body never waits for a whole
        chunk, so a huge one is never held here."""
        piece = bytes(self._buffer[: self._left])
        if not piece:
            return None
        del self._buffer[: len(piece)]
        self._left -= len(piece)
        self._take(piece)
        if self._left:
            return None
        self._state = _State.CHUNK_END
        return _MORE

    def _read_chunk_end(self) -> _Step:
        if len(self._buffer) < 2:
            return None
        if self._buffer[:2] != b"\r\n":
            raise ProtocolViolation("chunk not followed by CRLF")
        del self._buffer[:2]
        self._state = _State.CHUNK_SIZE
        return _MORE

    def _read_trailers(self) -> _Step:
        if self._buffer[:2] == b"\r\n":
            del self._buffer[:2]
            return self._finish()
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buffer) > MAX_HEAD:
                raise ProtocolViolation("trailers too long")
            return None
        del self._buffer[: end + 4]  # trailers carry nothing a probe reads
        return self._finish()

    def _take(self, piece: bytes) -> None:
        if self._sink is not None:
            self._sink(piece)
            return
        self._body += piece
        if len(self._body) > MAX_BODY:
            raise ProtocolViolation(f"body larger than {MAX_BODY // (1024 * 1024)} MiB")

    def _finish(self) -> Response:
        assert self._head is not None
        status, headers, keep_alive = self._head
        if self._state is _State.UNTIL_CLOSE:
            keep_alive = False
        if self._buffer:
            keep_alive = False  # bytes nobody asked for: the connection is not to be trusted
        return Response(status, headers, bytes(self._body), keep_alive)


# What each state reads next; past them, the body runs until the close (`_step`).
_READERS: dict[_State, Callable[[ResponseReader], _Step]] = {
    _State.HEAD: ResponseReader._read_head,
    _State.LENGTH: ResponseReader._read_length,
    _State.CHUNK_SIZE: ResponseReader._read_chunk_size,
    _State.CHUNK_DATA: ResponseReader._read_chunk_data,
    _State.CHUNK_END: ResponseReader._read_chunk_end,
    _State.TRAILERS: ResponseReader._read_trailers,
}


def _parse_head(head: bytes) -> tuple[int, int, Headers]:
    lines = head.split(b"\r\n")
    match = _STATUS.fullmatch(lines[0])
    if match is None:
        shown = lines[0][:40].decode("latin-1")
        raise ProtocolViolation(f"not an HTTP/1.x status line: {shown!r}")
    headers: Headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            shown = line[:40].decode("latin-1")
            raise ProtocolViolation(f"malformed header line {shown!r}")
        value = value.strip(b" \t")
        if b"\r" in value or b"\n" in value or b"\x00" in value:
            raise ProtocolViolation(f"header {name.decode('latin-1')} holds a control byte")
        headers.append((name.lower(), value))
    return int(match[2]), int(match[1]), headers


def _has_token(headers: Headers, name: bytes, token: bytes) -> bool:
    return any(
        token in (part.strip().lower() for part in value.split(b","))
        for n, value in headers
        if n == name
    )
