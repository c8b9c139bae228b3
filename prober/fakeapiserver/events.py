"""What the sans-IO protocol layers report to the server, the same shape for HTTP/1.1 and HTTP/2.

HTTP/1.1 requests on one connection are numbered 1, 2, 3... as their `stream_id`, so the rest
of the server treats both protocols alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# Go's http.DefaultMaxHeaderBytes; net/http allows 4096 bytes of slack on top.
MAX_HEADER_BYTES = 1 << 20


@dataclass(slots=True)
class RequestStarted:
    stream_id: int
    method: str
    target: str
    headers: list[tuple[str, str]]  # names lowercased, in arrival order
    authority: str
    ended: bool  # True when no request body follows


@dataclass(frozen=True, slots=True)
class Answer:
    """A response to send on `stream_id`: `end` False leaves the body open (a watch), `close`
    ends the connection after it."""

    stream_id: int
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    end: bool = True
    close: bool = False


@dataclass(slots=True)
class StreamEvent:
    """What became of the request on `stream_id` after its headers."""

    stream_id: int


@dataclass(slots=True)
class BodyReceived(StreamEvent):
    """A piece of the request body."""

    data: bytes


class RequestEnded(StreamEvent):
    """The request body is complete."""

    __slots__ = ()


class StreamAborted(StreamEvent):
    """The client reset this stream (HTTP/2 RST_STREAM)."""

    __slots__ = ()


@dataclass(slots=True)
class ConnectionEnding:
    """The connection is ending, and why, in words the truth log keeps."""

    reason: str


class ProtocolFailed(ConnectionEnding):
    """The peer broke the protocol; whatever answer is possible is queued, then close."""

    __slots__ = ()


class PeerClosed(ConnectionEnding):
    """The peer closed its side (EOF, or an HTTP/2 GOAWAY)."""

    __slots__ = ()


Event = RequestStarted | BodyReceived | RequestEnded | StreamAborted | ProtocolFailed | PeerClosed


class ServerProtocol(Protocol):
    """The sans-IO connection both `Http1Protocol` and `Http2Protocol` implement."""

    name: str  # "h1" or "h2"

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer (b"" at EOF); get what they completed."""

    def next_events(self) -> list[Event]:
        """Events that became available without new input (HTTP/1.1 pipelining)."""

    def send_response(self, answer: Answer) -> int | None:
        """Answer a request; with `close` the connection ends after it (HTTP/1.1
        `Connection: close`, HTTP/2 GOAWAY after the response). Returns the last stream id
        of a GOAWAY this call sent."""

    def send_data(self, stream_id: int, data: bytes, *, end: bool) -> None: ...

    def start_graceful_close(self) -> int | None:
        """Stop taking requests: HTTP/2 sends GOAWAY (returns its last stream id), HTTP/1.1
        closes when idle or after the response in progress."""

    def data_to_send(self) -> bytes: ...

    @property
    def wants_close(self) -> bool:
        """The transport should close once the queued bytes are written."""

    @property
    def open_streams(self) -> int:
        """Requests started whose response has not ended."""

    @property
    def awaiting_headers(self) -> bool:
        """Bytes of a request (or the HTTP/2 preface) arrived but its headers are incomplete."""
