"""The HTTP/2 sans-IO layer against h2's client: requests, flow control, and Go's graceful
GOAWAY (NO_ERROR, last stream id = highest seen, earlier streams completed, later refused)."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
from h2.errors import ErrorCodes
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, RstStreamFrame

from prober.fakeapiserver.events import (
    Answer,
    PeerClosed,
    ProtocolFailed,
    RequestEnded,
    RequestStarted,
    StreamAborted,
)
from prober.fakeapiserver.http2 import MAX_CONCURRENT_STREAMS, Http2Protocol

REQUEST = [(":method", "GET"), (":path", "/readyz"), (":scheme", "https"), (":authority", "api")]


def frames(data: bytes) -> list[Frame]:
    """The frames in a run of server bytes."""
    found = []
    while data:
        frame, length = Frame.parse_frame_header(memoryview(data[:9]))
        frame.parse_body(memoryview(data[9 : 9 + length]))
        found.append(frame)
        data = data[9 + length :]
    return found


class Pair:
    """A server protocol wired to an h2 client, moving bytes by hand."""

    def __init__(self) -> None:
        self.server = Http2Protocol()
        self.client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.client.initiate_connection()
        self.server_events = self.to_server()
        self.to_client()

    def to_server(self) -> list:
        return self.server.receive_data(self.client.data_to_send())

    def to_client(self) -> list:
        return self.client.receive_data(self.server.data_to_send())

    def request(self, end: bool = True, extra: list | None = None) -> int:
        stream_id = self.client.get_next_available_stream_id()
        self.client.send_headers(stream_id, REQUEST + (extra or []), end_stream=end)
        return stream_id


def test_settings_advertise_go_limits() -> None:
    pair = Pair()
    settings = pair.client.remote_settings
    assert settings.max_concurrent_streams == MAX_CONCURRENT_STREAMS
    assert settings.max_header_list_size == (1 << 20) + 320
    assert not pair.server.awaiting_headers


def test_request_and_response_round_trip() -> None:
    pair = Pair()
    stream = pair.request(extra=[("user-agent", "t")])
    events = pair.to_server()
    assert events == [
        RequestStarted(stream, "GET", "/readyz", [("user-agent", "t")], "api", True),
        RequestEnded(stream),
    ]
    assert pair.server.open_streams == 1
    headers = [("X-Backend", "m0"), ("Connection", "x")]  # hop-by-hop: dropped on HTTP/2
    pair.server.send_response(Answer(stream, 200, headers, b"ok", end=True))
    client_events = pair.to_client()
    response = next(e for e in client_events if isinstance(e, h2.events.ResponseReceived))
    expected = [(b":status", b"200"), (b"x-backend", b"m0"), (b"content-length", b"2")]
    assert response.headers == expected
    assert any(isinstance(e, h2.events.StreamEnded) for e in client_events)
    assert pair.server.open_streams == 0
    assert not pair.server.wants_close


def test_graceful_goaway_completes_streams_at_or_below_last_and_refuses_later_ones() -> None:
    pair = Pair()
    first = pair.request()
    second = pair.request(end=False)  # its body is still coming
    pair.to_server()
    last = pair.server.start_graceful_close()
    assert last == second
    goaway_bytes = pair.server.data_to_send()
    goaway = [f for f in frames(goaway_bytes) if isinstance(f, GoAwayFrame)]
    assert [(f.last_stream_id, f.error_code) for f in goaway] == [(second, 0)]
    # The rest of the request body was already on its way (h2's client cannot send after
    # reading a GOAWAY, Go's can); both streams below the GOAWAY are still answered.
    pair.client.send_data(second, b"body", end_stream=True)
    assert RequestEnded(second) in pair.to_server()
    pair.server.send_response(Answer(first, 200, [], b"one", end=True))
    assert not pair.server.wants_close
    pair.server.send_response(Answer(second, 200, [], b"two", end=True))
    answered = frames(pair.server.data_to_send())
    ended = [f.stream_id for f in answered if isinstance(f, DataFrame) and "END_STREAM" in f.flags]
    assert ended == [first, second]
    assert pair.server.wants_close
    assert pair.server.start_graceful_close() is None, "one GOAWAY per connection"


def test_a_stream_opened_after_the_goaway_is_refused() -> None:
    pair = Pair()
    pair.request()
    pair.to_server()
    pair.server.start_graceful_close()
    # The client has not read the GOAWAY yet and opens another stream.
    late = pair.client.get_next_available_stream_id()
    pair.client.send_headers(late, REQUEST, end_stream=True)
    assert pair.to_server() == []
    resets = [f for f in frames(pair.server.data_to_send()) if isinstance(f, RstStreamFrame)]
    assert [(r.stream_id, r.error_code) for r in resets] == [(late, ErrorCodes.REFUSED_STREAM)]
    assert pair.server.open_streams == 1


def test_a_large_body_waits_for_the_flow_control_window() -> None:
    pair = Pair()
    stream = pair.request()
    pair.to_server()
    body = b"x" * 100_000  # more than the initial 65535-byte window
    pair.server.send_response(Answer(stream, 200, [], body, end=True))
    received = b""
    for _ in range(10):
        for event in pair.to_client():
            if isinstance(event, h2.events.DataReceived):
                received += event.data
                pair.client.acknowledge_received_data(event.flow_controlled_length, stream)
        pair.to_server()
        if len(received) == len(body):
            break
    assert received == body
    assert pair.server.open_streams == 0


def test_client_reset_and_client_goaway_are_reported() -> None:
    pair = Pair()
    stream = pair.request()
    pair.to_server()
    pair.client.reset_stream(stream, ErrorCodes.CANCEL)
    assert pair.to_server() == [StreamAborted(stream)]
    pair.server.send_response(Answer(stream, 200, [], b"late", end=True))  # ignored, no error
    pair.client.close_connection()
    events = pair.to_server()
    assert isinstance(events[0], PeerClosed)
    assert pair.server.wants_close


def test_an_invalid_preface_fails_the_connection() -> None:
    server = Http2Protocol()
    assert server.awaiting_headers
    events = server.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(events) == 1
    assert isinstance(events[0], ProtocolFailed)
    assert server.wants_close


def test_a_100_kb_header_is_accepted() -> None:
    pair = Pair()
    stream = pair.request(extra=[("x-big", "a" * 100_000)])
    events = pair.to_server()
    assert isinstance(events[0], RequestStarted)
    assert events[0].stream_id == stream
