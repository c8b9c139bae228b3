"""Every outcome of one request, mapped to one `ErrorClass` (or success) exactly once, here.

Exceptions are classified by their root cause, found by walking `__cause__`, `__context__` and
exception groups: httpx wraps httpcore, which wraps anyio, which wraps the `OSError` or
`ssl.SSLError` the kernel or OpenSSL raised, and a connect may fail once per address.
An HTTP/2 GOAWAY reaches us as httpcore's `RemoteProtocolError` carrying h2's
`ConnectionTerminated` event: with NO_ERROR it is the graceful close of a draining (or
re-balancing) apiserver and gets its own class; with an error code the peer tore the
connection down, which is a reset.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator, Sequence

import anyio
import h2.errors
import h2.events
import httpx

from prober.core.header import (
    RESPONSE_HEADER,
    HeaderInvalid,
    ShutdownHeader,
    find_header,
    parse_shutdown_header,
)
from prober.core.models import ErrorClass

# What a request may raise. httpx maps most failures to `httpx.HTTPError`, but not all: anyio's
# EndOfStream and ClosedResourceError, and h2's own state-machine KeyError on a frame after a
# GOAWAY, escape it under load. Whatever a server makes the library raise is an outcome to
# classify, never a reason for a stream's task to die, so the boundary takes every Exception.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (Exception,)
MAX_DETAIL = 160
_BROKEN_BY_US = (anyio.BrokenResourceError, anyio.ClosedResourceError)

Outcome = tuple[ErrorClass | None, str, ShutdownHeader | None]


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
        return ErrorClass.RETRY_AFTER, clip(f"HTTP {status} Retry-After: {retry_after}"), shutdown
    if status >= 500:
        return ErrorClass.HTTP_5XX, f"HTTP {status}", shutdown
    if status >= 400:
        return ErrorClass.HTTP_4XX, f"HTTP {status}", shutdown
    return ErrorClass.OTHER, f"HTTP {status}", shutdown


def classify_exception(exc: BaseException, *, abandoned: bool = False) -> tuple[ErrorClass, str]:
    """A request that raised one of `NETWORK_ERRORS` (or the deadline's `TimeoutError`).

    `abandoned`: the request shared a kept HTTP/2 connection on which another request timed
    out. Cancelling that one mid-write leaves the TLS stream unusable (anyio marks it broken),
    so the others fail with a "broken" connection the server never broke: they are casualties
    of the timeout, and are classed as such rather than as a reset."""
    chain = list(_causes(exc))
    if abandoned and any(isinstance(link, _BROKEN_BY_US) for link in chain):
        return ErrorClass.TIMEOUT, "connection given up after another request on it timed out"
    for judge in (_classify_link, _closed_link):
        for link in chain:
            found = judge(link)
            if found is not None:
                return found[0], clip(found[1])
    return ErrorClass.OTHER, clip(f"{type(chain[-1]).__name__}: {_text(chain[-1])}")


def _classify_link(exc: BaseException) -> tuple[ErrorClass, str] | None:
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return ErrorClass.TIMEOUT, f"{type(exc).__name__}: no answer in time"
    terminated = _h2_event(exc)
    if isinstance(terminated, h2.events.ConnectionTerminated):
        code = _code_name(terminated.error_code)
        text = f"GOAWAY {code} last_stream_id={terminated.last_stream_id}"
        graceful = terminated.error_code == h2.errors.ErrorCodes.NO_ERROR
        return (ErrorClass.GOAWAY if graceful else ErrorClass.CONNECTION_RESET), text
    if isinstance(terminated, h2.events.StreamReset):
        return ErrorClass.CONNECTION_RESET, f"RST_STREAM {_code_name(terminated.error_code)}"
    if isinstance(exc, ConnectionRefusedError):
        return ErrorClass.CONNECT_REFUSED, _text(exc)
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return ErrorClass.CONNECTION_RESET, _text(exc)
    if isinstance(exc, socket.gaierror):
        return ErrorClass.DNS, _text(exc)
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
        return ErrorClass.CONNECTION_RESET, f"closed during TLS: {_text(exc)}"
    if isinstance(exc, ssl.SSLError):
        return ErrorClass.TLS, _text(exc)
    if isinstance(exc, httpx.RemoteProtocolError) and "disconnected" in str(exc):
        return ErrorClass.CONNECTION_RESET, f"server closed the connection: {_text(exc)}"
    if isinstance(exc, httpx.ConnectError) and _only_end_of_stream(exc):
        return ErrorClass.CONNECTION_RESET, "closed during TLS handshake"
    return None


def _closed_link(exc: BaseException) -> tuple[ErrorClass, str] | None:
    """Second choice, when no link says more: the library found its connection closed."""
    if isinstance(exc, anyio.EndOfStream | anyio.ClosedResourceError | anyio.BrokenResourceError):
        return (
            ErrorClass.CONNECTION_RESET,
            f"connection closed under the request ({type(exc).__name__})",
        )
    if isinstance(exc, KeyError) and "ConnectionState.CLOSED" in str(exc):
        return ErrorClass.CONNECTION_RESET, "a frame arrived after the HTTP/2 connection closed"
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception and everything behind it, outermost first, each once."""
    seen: set[int] = set()
    queue = [exc]
    while queue:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)
        for behind in (current.__cause__, current.__context__):
            if behind is not None:
                queue.append(behind)


def _h2_event(exc: BaseException) -> object:
    """httpcore raises `RemoteProtocolError(event)` for GOAWAY and RST_STREAM."""
    args = getattr(exc, "args", ())
    return args[0] if args else None


def _only_end_of_stream(exc: BaseException) -> bool:
    return any(type(c).__name__ == "EndOfStream" for c in _causes(exc))


def _code_name(code: object) -> str:
    return getattr(code, "name", str(code))


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."
