"""Every way a request can end, as plain tables: the wire client's errors, then the answers."""

from __future__ import annotations

import pytest

from prober.core.models import ErrorClass
from prober.probe.classify import classify_error, classify_response
from prober.probe.wire.errors import (
    ConnectFailed,
    ConnectFailure,
    ConnectionClosed,
    GoAway,
    ProtocolViolation,
    StreamReset,
)

ERRORS = [
    (TimeoutError(), ErrorClass.TIMEOUT, "TimeoutError: no answer in time"),
    (ConnectFailed(ConnectFailure.REFUSED, "[Errno 111] refused"), ErrorClass.CONNECT_REFUSED,
     "[Errno 111] refused"),
    (ConnectFailed(ConnectFailure.DNS, "[Errno -2] Name or service not known"), ErrorClass.DNS,
     "[Errno -2] Name or service not known"),
    (ConnectFailed(ConnectFailure.TLS, "[SSL: CERTIFICATE_VERIFY_FAILED] ..."), ErrorClass.TLS,
     "[SSL: CERTIFICATE_VERIFY_FAILED] ..."),
    (ConnectFailed(ConnectFailure.RESET, "closed during TLS: EOF"), ErrorClass.CONNECTION_RESET,
     "closed during TLS: EOF"),
    (ConnectFailed(ConnectFailure.OTHER, "OSError: unreachable"), ErrorClass.OTHER,
     "OSError: unreachable"),
    (ConnectionClosed("connection reset by peer: [Errno 104]", reset=True, answered=False),
     ErrorClass.CONNECTION_RESET, "connection reset by peer: [Errno 104]"),
    (GoAway(0, "NO_ERROR", 5, 7), ErrorClass.GOAWAY, "GOAWAY NO_ERROR last_stream_id=5"),
    (GoAway(2, "INTERNAL_ERROR", 5, 5), ErrorClass.CONNECTION_RESET,
     "GOAWAY INTERNAL_ERROR last_stream_id=5"),
    (StreamReset(2, "INTERNAL_ERROR"), ErrorClass.CONNECTION_RESET, "RST_STREAM INTERNAL_ERROR"),
    (ProtocolViolation("response head larger than 64 KiB"), ErrorClass.OTHER,
     "protocol violation: response head larger than 64 KiB"),
    (ConnectFailed(ConnectFailure.TLS, "x" * 500), ErrorClass.TLS, "x" * 157 + "..."),
]  # fmt: skip


@pytest.mark.parametrize(("exc", "error", "detail"), ERRORS)
def test_each_wire_error_has_one_class(exc: BaseException, error: ErrorClass, detail: str):
    assert classify_error(exc) == (error, detail)  # type: ignore[arg-type]


def test_a_goaway_says_whether_the_stream_was_processed() -> None:
    assert GoAway(0, "NO_ERROR", 5, 7).unprocessed
    assert not GoAway(0, "NO_ERROR", 5, 5).unprocessed


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
