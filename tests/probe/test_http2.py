"""The HTTP/2 client, sans I/O: frames a server sends in, answers, failures and frames out."""

from __future__ import annotations

import hpack
import pytest
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

from prober.probe.wire.errors import GoAway, ProtocolViolation, StreamReset
from prober.probe.wire.http2 import PREFACE, Answer, Failed, H2Client

REQUEST = [(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "/")]


class Server:
    """Encodes what a server would send, with its own HPACK table."""

    def __init__(self) -> None:
        self.encoder = hpack.Encoder()

    def headers(self, stream_id: int, status: int = 200, *, end: bool = False) -> bytes:
        block = self.encoder.encode([(":status", str(status)), ("x-openshift-disruption", "v")])
        flags = ["END_HEADERS", *(["END_STREAM"] if end else [])]
        return HeadersFrame(stream_id, block, flags=flags).serialize()


def data(stream_id: int, body: bytes = b"{}", *, end: bool = True) -> bytes:
    return DataFrame(stream_id, body, flags=["END_STREAM"] if end else []).serialize()


def frames(raw: bytes) -> list[Frame]:
    """The frames a client wrote (after the preface)."""
    raw = raw.removeprefix(PREFACE)
    out = []
    while raw:
        frame, length = Frame.parse_frame_header(memoryview(raw[:9]))
        frame.parse_body(memoryview(raw[9 : 9 + length]))
        out.append(frame)
        raw = raw[9 + length :]
    return out


def settings(**values: int) -> bytes:
    frame = SettingsFrame(0)
    frame.settings = {getattr(SettingsFrame, name): value for name, value in values.items()}
    return frame.serialize()


def client_with(streams: int) -> tuple[H2Client, list[int]]:
    client = H2Client()
    ids = [client.start_request(REQUEST) for _ in range(streams)]
    client.data_to_send()
    return client, ids


def test_an_answer_and_its_flow_control_credit() -> None:
    client, (sid,) = client_with(1)
    server = Server()
    (answer,) = client.receive(server.headers(sid) + data(sid, b'{"a": 1}'))
    assert answer == Answer(sid, 200, [(b"x-openshift-disruption", b"v")], b'{"a": 1}')
    (update,) = frames(client.data_to_send())
    assert isinstance(update, WindowUpdateFrame)
    assert (update.stream_id, update.window_increment) == (0, 8)


def test_the_first_bytes_are_the_preface_and_settings_without_push() -> None:
    client = H2Client()
    raw = client.data_to_send()
    assert raw.startswith(PREFACE)
    (settings,) = frames(raw)
    assert settings.settings[SettingsFrame.ENABLE_PUSH] == 0


def test_a_graceful_goaway_fails_only_the_streams_above_last_stream_id() -> None:
    client, (first, second) = client_with(2)
    server = Server()
    events = client.receive(GoAwayFrame(0, last_stream_id=first, error_code=0).serialize())
    assert [type(e) for e in events] == [Failed]
    (failed,) = events
    assert isinstance(failed.error, GoAway)
    assert (failed.stream_id, failed.error.unprocessed) == (second, True)
    assert not client.accepts_streams
    # The stream it took still gets its answer after the GOAWAY (h2 would refuse these frames).
    (answer,) = client.receive(server.headers(first) + data(first))
    assert (answer.stream_id, answer.status) == (first, 200)


def test_an_error_goaway_fails_every_stream() -> None:
    client, ids = client_with(2)
    events = client.receive(GoAwayFrame(0, last_stream_id=ids[1], error_code=2).serialize())
    assert [e.stream_id for e in events] == ids
    assert all(isinstance(e, Failed) and str(e.error).startswith("GOAWAY INTERNAL_ERROR")
               for e in events)  # fmt: skip


def test_rst_stream_fails_that_stream_only() -> None:
    client, (one, _two) = client_with(2)
    (failed,) = client.receive(RstStreamFrame(one, error_code=7).serialize())
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, StreamReset)
    assert str(failed.error) == "RST_STREAM REFUSED_STREAM"
    assert client.open_streams == 1


def test_ping_and_settings_are_acknowledged() -> None:
    client, _ = client_with(1)
    client.receive(PingFrame(0, b"12345678").serialize() + SettingsFrame(0).serialize())
    ping, settings = frames(client.data_to_send())
    assert isinstance(ping, PingFrame)
    assert (ping.flags, ping.opaque_data) == ({"ACK"}, b"12345678")
    assert isinstance(settings, SettingsFrame)
    assert settings.flags == {"ACK"}


def test_a_cancelled_stream_is_reset_and_its_late_answer_ignored() -> None:
    client, (sid,) = client_with(1)
    server = Server()
    client.cancel(sid)
    (reset,) = frames(client.data_to_send())
    assert isinstance(reset, RstStreamFrame)
    assert reset.error_code == 8  # CANCEL
    assert client.receive(server.headers(sid) + data(sid)) == []
    # The HPACK table stayed in step: a later stream's headers still decode.
    other = client.start_request(REQUEST)
    (answer,) = client.receive(server.headers(other, end=True))
    assert answer.status == 200


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (data(1), "DATA before the response headers"),
        (b"\x00\x40\x01\x00\x00\x00\x00\x00\x01", "a 16385-byte frame, above 16384"),
        (ContinuationFrame(1, b"").serialize(), "CONTINUATION without its HEADERS"),
        (
            HeadersFrame(1, b"\x88").serialize() + data(1),
            "a header block interrupted by another frame",
        ),
        (
            HeadersFrame(1, b"x" * 16000).serialize()
            + b"".join(ContinuationFrame(1, b"x" * 16000).serialize() for _ in range(4)),
            "header block larger than 64 KiB",
        ),
        (HeadersFrame(1, b"\xff\xff", flags=["END_HEADERS"]).serialize(), "bad HTTP/2 frame"),
        (settings(MAX_FRAME_SIZE=0), "SETTINGS_MAX_FRAME_SIZE 0, outside 16384 to 16777215"),
        (settings(MAX_FRAME_SIZE=2**24), "SETTINGS_MAX_FRAME_SIZE 16777216, outside 16384"),
        (settings(INITIAL_WINDOW_SIZE=2**31), "SETTINGS_INITIAL_WINDOW_SIZE 2147483648, above"),
        (settings(ENABLE_PUSH=2), "SETTINGS_ENABLE_PUSH 2, neither 0 nor 1"),
    ],
    ids=[
        "data first", "frame too big", "lone continuation", "interleaved", "huge block", "hpack",
        "max frame 0", "max frame 2^24", "window 2^31", "push 2",
    ],
)  # fmt: skip
def test_what_a_server_may_not_send_breaks_the_connection(raw: bytes, message: str) -> None:
    client, (_sid,) = client_with(1)
    (failed,) = client.receive(raw)
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, ProtocolViolation)
    assert str(failed.error).startswith(message)
    assert client.broken is failed.error
    assert not client.accepts_streams


def test_the_hpack_table_stays_at_4096_whatever_the_server_allows() -> None:
    """Every request's Audit-ID is new: in the table the server offers (2^31 bytes) each one
    would stay and be searched on every later request (15.8 ms a request after 5,000)."""
    client, _ = client_with(0)
    client.receive(settings(HEADER_TABLE_SIZE=2**31))
    decoder = hpack.Decoder()
    decoder.max_allowed_table_size = 2**31
    for n in range(200):
        client.start_request([*REQUEST, ("audit-id", f"{n:036d}")])
    sent = [f for f in frames(client.data_to_send()) if isinstance(f, HeadersFrame)]
    for frame in sent:
        decoder.decode(frame.data)
    assert decoder.header_table_size <= 4096
