"""The HTTP/1.1 sans-IO layer: bytes in, events out, net/http's answers to bad input."""

from __future__ import annotations

from http import HTTPStatus

import h11
import pytest

from prober.fakeapiserver.events import (
    Answer,
    BodyReceived,
    PeerClosed,
    ProtocolFailed,
    RequestEnded,
    RequestStarted,
)
from prober.fakeapiserver.http1 import Http1Protocol

GET = b"GET /readyz HTTP/1.1\r\nHost: api\r\nUser-Agent: t\r\n\r\n"


def parse_responses(data: bytes) -> list[tuple[int, dict[bytes, bytes], bytes]]:
    client = h11.Connection(h11.CLIENT)
    responses = []
    client.receive_data(data)
    while True:
        client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        client.send(h11.EndOfMessage())
        event = client.next_event()
        if event is h11.NEED_DATA:
            return responses
        assert isinstance(event, h11.Response)
        body = b""
        while not isinstance(part := client.next_event(), h11.EndOfMessage):
            assert isinstance(part, h11.Data)
            body += part.data
        responses.append((event.status_code, dict(event.headers), body))
        if client.our_state is h11.MUST_CLOSE or client.their_state is h11.MUST_CLOSE:
            return responses
        client.start_next_cycle()


def answer(proto: Http1Protocol, stream_id: int, body: bytes = b"ok", close: bool = False) -> None:
    proto.send_response(Answer(stream_id, 200, [("X-Backend", "m0")], body, close=close))


def test_a_request_becomes_started_and_ended_events_and_keeps_the_connection() -> None:
    proto = Http1Protocol()
    events = proto.receive_data(GET)
    assert events == [
        RequestStarted(1, "GET", "/readyz", [("host", "api"), ("user-agent", "t")], "api", True),
        RequestEnded(1),
    ]
    assert proto.open_streams == 1
    answer(proto, 1)
    wire = proto.data_to_send()
    assert wire.startswith(b"HTTP/1.1 200 OK\r\nX-Backend: m0\r\nContent-Length: 2\r\n")
    assert parse_responses(wire) == [(200, {b"x-backend": b"m0", b"content-length": b"2"}, b"ok")]
    assert not proto.wants_close
    assert proto.open_streams == 0


def test_pipelined_requests_wait_for_the_response_before_them() -> None:
    proto = Http1Protocol()
    events = proto.receive_data(GET + GET.replace(b"/readyz", b"/livez"))
    assert [type(e) for e in events] == [RequestStarted, RequestEnded]
    answer(proto, 1)
    following = proto.next_events()
    assert isinstance(following[0], RequestStarted)
    assert following[0].target == "/livez"
    assert following[0].stream_id == 2


def test_a_request_body_is_read_before_the_request_ends() -> None:
    proto = Http1Protocol()
    head = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nab"
    events = proto.receive_data(head)
    assert [type(e) for e in events] == [RequestStarted, BodyReceived]
    assert not events[0].ended
    assert events[1] == BodyReceived(1, b"ab")
    assert proto.receive_data(b"cd") == [BodyReceived(1, b"cd"), RequestEnded(1)]


def test_close_adds_connection_close_and_ends_the_connection() -> None:
    proto = Http1Protocol()
    proto.receive_data(GET)
    answer(proto, 1, close=True)
    _status, headers, _ = parse_responses(proto.data_to_send())[0]
    assert headers[b"connection"] == b"close"
    assert proto.wants_close


def test_graceful_close_closes_an_idle_connection_at_once() -> None:
    proto = Http1Protocol()
    proto.receive_data(GET)
    answer(proto, 1)
    proto.data_to_send()
    assert proto.start_graceful_close() is None
    assert proto.wants_close


def test_graceful_close_of_a_busy_connection_waits_for_the_response() -> None:
    proto = Http1Protocol()
    proto.receive_data(GET)
    proto.start_graceful_close()
    assert not proto.wants_close
    answer(proto, 1)
    _, headers, _ = parse_responses(proto.data_to_send())[0]
    assert headers[b"connection"] == b"close"
    assert proto.wants_close


def test_a_streamed_response_is_chunked_until_it_ends() -> None:
    proto = Http1Protocol()
    proto.receive_data(GET)
    proto.send_response(Answer(1, 200, [], b'{"type":"ADDED"}\n', end=False))
    assert proto.open_streams == 1
    proto.send_data(1, b"", end=True)
    wire = proto.data_to_send()
    assert b"Transfer-Encoding: chunked" in wire
    assert wire.endswith(b"0\r\n\r\n")
    assert proto.open_streams == 0
    assert not proto.wants_close


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (1 << 20) + b"a" * 5000, 431),
    ],
    ids=["no-request-line", "header-without-colon", "bad-content-length", "header-over-1MB"],
)
def test_bad_input_gets_net_http_answer_and_close(data: bytes, status: int) -> None:
    proto = Http1Protocol()
    events = proto.receive_data(data)
    assert len(events) == 1
    assert isinstance(events[0], ProtocolFailed)
    wire = proto.data_to_send()
    assert wire.startswith(f"HTTP/1.1 {status} ".encode())
    assert b"Connection: close" in wire
    assert wire.endswith(f"\r\n\r\n{status} {HTTPStatus(status).phrase}".encode())
    assert proto.wants_close


def test_a_100_kb_header_is_accepted_as_go_does() -> None:
    proto = Http1Protocol()
    events = proto.receive_data(GET.replace(b"User-Agent: t", b"X-Big: " + b"a" * 100_000))
    assert [type(e) for e in events] == [RequestStarted, RequestEnded]


def test_partial_headers_are_awaiting_and_eof_is_reported() -> None:
    proto = Http1Protocol()
    assert not proto.awaiting_headers
    proto.receive_data(b"GET / HTTP/1.1\r\nHo")
    assert proto.awaiting_headers
    events = proto.receive_data(b"")
    assert isinstance(events[0], ProtocolFailed)  # EOF inside a request


def test_eof_between_requests_is_a_clean_close() -> None:
    proto = Http1Protocol()
    proto.receive_data(GET)
    answer(proto, 1)
    assert proto.receive_data(b"") == [PeerClosed("eof")]
    assert proto.wants_close
