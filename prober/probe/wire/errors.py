"""What can end a request on the wire, as a small typed tree (httpcore's model).

Foreign exceptions (OSError, ssl.SSLError, socket.gaierror) are mapped to these once, where
the client meets them (`wire.connection`); the probe classifies only these, plus the
deadline's `TimeoutError`.
"""

from __future__ import annotations

from enum import StrEnum


def text(exc: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class WireError(Exception):
    """A request ended without an answer, because of the network or the peer."""


class ConnectFailed(WireError):
    """No connection was made: `kind` says why, `detail` in the kernel's or OpenSSL's words."""

    def __init__(self, kind: ConnectFailure, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class ConnectFailure(StrEnum):
    REFUSED = "refused"
    DNS = "dns"
    TLS = "tls"
    RESET = "reset"  # closed or reset before the TLS handshake finished
    OTHER = "other"


class ConnectionClosed(WireError):
    """The connection ended under the request. `reset`: by a TCP RST (else an orderly close);
    `answered`: a byte of the answer had arrived; `idle`: it was a kept connection that had
    answered before, and not a byte of this request's answer came (what Go's transport
    retries as "server closed idle connection")."""

    def __init__(self, detail: str, *, reset: bool, answered: bool, idle: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reset = reset
        self.answered = answered
        self.idle = idle


class ProtocolViolation(WireError):
    """The peer broke HTTP: a malformed answer, an oversized header block, a bad frame."""


class BodyLimit(ProtocolViolation):
    """A streamed body past what its reader takes (`wire.stream`): an event too long, or too
    many unread."""


class Http2Ended(WireError):
    """A frame of the peer's with an HTTP/2 error code (`code_name` its name) ended the
    request: a GOAWAY or an RST_STREAM."""

    def __init__(self, message: str, error_code: int, code_name: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.code_name = code_name


class GoAway(Http2Ended):
    """An HTTP/2 GOAWAY ended the request. A graceful one (NO_ERROR) promises every stream up
    to `last_stream_id` its answer, so only a stream above it ends this way: the server never
    processed it (`unprocessed`), and it may be sent again on a new connection."""

    def __init__(self, error_code: int, code_name: str, last_stream_id: int, stream_id: int):
        message = f"GOAWAY {code_name} last_stream_id={last_stream_id}"
        super().__init__(message, error_code, code_name)
        self.last_stream_id = last_stream_id
        self.unprocessed = stream_id > last_stream_id

    @property
    def graceful(self) -> bool:
        return self.error_code == 0


class StreamReset(Http2Ended):
    """The peer reset the request's HTTP/2 stream (RST_STREAM)."""

    def __init__(self, error_code: int, code_name: str) -> None:
        super().__init__(f"RST_STREAM {code_name}", error_code, code_name)


class Stalled(WireError):
    """A streamed body stopped mid-event: its first byte came `seconds` ago, its end never
    (a server keeping a read alive one byte at a time)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"an event begun {seconds:.1f} s ago has not ended")
        self.seconds = seconds
