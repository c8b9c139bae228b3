"""Every outcome of one request, mapped to one `ErrorClass` (or success) exactly once, here.

The wire client raises a small typed tree (`wire.errors`), each foreign exception already
mapped where it met the client; the deadline raises `TimeoutError`. Anything else is a bug in
the probe and reaches the scheduler, which restarts the stream's task (and says so), rather
than being passed off as a network fault.

An HTTP/2 GOAWAY with NO_ERROR is the graceful close of a draining (or re-balancing)
apiserver and gets its own class; with an error code the peer tore the connection down, which
is a reset. An answer is classified by its status and its shutdown header.
"""

from __future__ import annotations

from collections.abc import Sequence

from prober.core.clientgo import retry_after_detail
from prober.core.header import (
    RESPONSE_HEADER,
    HeaderInvalid,
    ShutdownHeader,
    find_header,
    parse_shutdown_header,
)
from prober.core.models import ErrorClass
from prober.probe.wire.errors import (
    ConnectFailed,
    ConnectFailure,
    ConnectionClosed,
    GoAway,
    ProtocolViolation,
    StreamReset,
    WireError,
)

MAX_DETAIL = 160

Outcome = tuple[ErrorClass | None, str, ShutdownHeader | None]
_CONNECT = {
    ConnectFailure.REFUSED: ErrorClass.CONNECT_REFUSED,
    ConnectFailure.DNS: ErrorClass.DNS,
    ConnectFailure.TLS: ErrorClass.TLS,
    ConnectFailure.RESET: ErrorClass.CONNECTION_RESET,
    ConnectFailure.OTHER: ErrorClass.OTHER,
}


def classify_response(status: int, headers: Sequence[tuple[bytes, bytes]]) -> Outcome:
    """An answered request: its class (None for success), detail, and parsed shutdown header."""
    raw = find_header(headers, RESPONSE_HEADER)
    shutdown: ShutdownHeader | None = None
    problem = ""
    if raw is not None:
        try:
            shutdown = parse_shutdown_header(raw)
        except HeaderInvalid as exc:
            problem = str(exc)
    if 200 <= status < 300:
        if raw is None:
            return ErrorClass.HEADER_MISSING, f"HTTP {status} without {RESPONSE_HEADER}", None
        if problem:
            return ErrorClass.HEADER_INVALID, clip(problem), None
        return None, "", shutdown
    retry_after = find_header(headers, "retry-after")
    if status in (429, 503) and retry_after is not None:
        return ErrorClass.RETRY_AFTER, clip(retry_after_detail(status, retry_after)), shutdown
    if status >= 500:
        return ErrorClass.HTTP_5XX, f"HTTP {status}", shutdown
    if status >= 400:
        return ErrorClass.HTTP_4XX, f"HTTP {status}", shutdown
    return ErrorClass.OTHER, f"HTTP {status}", shutdown


def classify_error(exc: WireError | TimeoutError) -> tuple[ErrorClass, str]:
    """A request that ended without an answer: its class and what to say about it."""
    if isinstance(exc, TimeoutError):
        return ErrorClass.TIMEOUT, "TimeoutError: no answer in time"
    if isinstance(exc, ConnectFailed):
        return _CONNECT[exc.kind], clip(exc.detail)
    if isinstance(exc, GoAway):
        return (ErrorClass.GOAWAY if exc.graceful else ErrorClass.CONNECTION_RESET), str(exc)
    if isinstance(exc, StreamReset | ConnectionClosed):
        return ErrorClass.CONNECTION_RESET, clip(str(exc))
    if isinstance(exc, ProtocolViolation):
        return ErrorClass.OTHER, clip(f"protocol violation: {exc}")
    return ErrorClass.OTHER, clip(f"{type(exc).__name__}: {exc}")


def clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."
