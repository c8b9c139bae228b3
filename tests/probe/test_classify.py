"""Root causes behind wrapped exceptions, and the response rules, as plain tables."""

from __future__ import annotations

import socket
import ssl

import anyio
import httpx
import pytest

from prober.core.models import ErrorClass
from prober.probe.classify import classify_exception, classify_response


def wrapped(outer: BaseException, *inner: BaseException) -> BaseException:
    """`outer` raised from the chain `inner[0]` <- `inner[1]` <- ..."""
    current = outer
    for cause in inner:
        current.__cause__ = cause
        current = cause
    return outer


def refused_on_every_address() -> BaseException:
    group = ExceptionGroup("attempts", [ConnectionRefusedError(111, "refused")] * 2)
    return wrapped(httpx.ConnectError("All connection attempts failed"), OSError("all"), group)


CHAINS = [
    (refused_on_every_address(), ErrorClass.CONNECT_REFUSED),
    (wrapped(httpx.ReadError(""), ConnectionResetError(104, "reset")), ErrorClass.CONNECTION_RESET),
    (wrapped(httpx.ConnectError(""), socket.gaierror(-2, "unknown")), ErrorClass.DNS),
    (wrapped(httpx.ConnectError(""), ssl.SSLError(1, "bad cert")), ErrorClass.TLS),
    (wrapped(httpx.ConnectError(""), ssl.SSLEOFError(8, "eof")), ErrorClass.CONNECTION_RESET),
    (httpx.ReadTimeout("slow"), ErrorClass.TIMEOUT),
    (TimeoutError(), ErrorClass.TIMEOUT),
    (httpx.RemoteProtocolError("Server disconnected"), ErrorClass.CONNECTION_RESET),
    (httpx.LocalProtocolError("we broke it"), ErrorClass.OTHER),
    (OSError(101, "Network is unreachable"), ErrorClass.OTHER),
    # Seen escaping httpx on a loaded machine: the stream's task must not die of them.
    (anyio.EndOfStream(), ErrorClass.CONNECTION_RESET),
    (wrapped(httpx.ReadError(""), anyio.ClosedResourceError()), ErrorClass.CONNECTION_RESET),
    (
        KeyError("(<ConnectionState.CLOSED: 3>, <ConnectionInputs.RECV_DATA: 13>)"),
        ErrorClass.CONNECTION_RESET,
    ),
    (ValueError("anything else a library raises"), ErrorClass.OTHER),
]


@pytest.mark.parametrize(("exc", "error"), CHAINS)
def test_the_root_cause_decides(exc: BaseException, error: ErrorClass) -> None:
    found, detail = classify_exception(exc)
    assert found is error
    assert detail
    assert len(detail) <= 160
    assert "\n" not in detail


RESPONSES = [
    (
        200,
        [
            (
                b"X-Openshift-Disruption",
                b"shutdown=false shutdown-delay-duration=70s elapsed=0s host=a",
            )
        ],
        None,
    ),
    (
        204,
        [
            (
                b"x-openshift-disruption",
                b"shutdown=true shutdown-delay-duration=0s elapsed=2s host=a",
            )
        ],
        None,
    ),
    (200, [], ErrorClass.HEADER_MISSING),
    (200, [(b"x-openshift-disruption", b"shutdown=true")], ErrorClass.HEADER_INVALID),
    (429, [(b"Retry-After", b"5")], ErrorClass.RETRY_AFTER),
    (503, [(b"retry-after", b"1")], ErrorClass.RETRY_AFTER),
    (500, [(b"retry-after", b"1")], ErrorClass.HTTP_5XX),
    (429, [], ErrorClass.HTTP_4XX),
    (101, [], ErrorClass.OTHER),
]


@pytest.mark.parametrize(("status", "headers", "error"), RESPONSES)
def test_response_rules(status: int, headers, error) -> None:
    assert classify_response(status, headers)[0] is error


def test_a_failed_answer_keeps_a_valid_header_and_ignores_an_invalid_one() -> None:
    late = [
        (b"x-openshift-disruption", b"shutdown=true shutdown-delay-duration=70s elapsed=3s host=a")
    ]
    assert classify_response(500, late)[2].elapsed == 3.0
    assert classify_response(500, [(b"x-openshift-disruption", b"junk")])[2] is None
