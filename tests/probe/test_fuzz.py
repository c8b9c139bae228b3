"""The wire client against what any server could send: Hypothesis over the byte stream of an
HTTP/1.1 answer and over HTTP/2 frame sequences. Each example ends in an answer, nothing yet, or
a classified error (`ProtocolViolation`, `ConnectionClosed`), never another exception, and the
client's buffers stay under a fixed cap. Derandomized: the same examples on every run."""

from __future__ import annotations

import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from prober.probe.wire.errors import ConnectionClosed, ProtocolViolation
from prober.probe.wire.http1 import MAX_BODY, MAX_HEAD, Response, ResponseReader
from prober.probe.wire.http2 import MAX_FRAME, Answer, Failed, H2Client

FUZZ = settings(derandomize=True, max_examples=300, deadline=None)
REQUEST = [(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "/")]

# HTTP/1.1: pieces an answer is made of, good and bad, in any order and split anywhere.
HEAD_PARTS = [
    b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.0 204 No Content\r\n",
    b"Content-Length: 2\r\n", b"Content-Length: 99999999999\r\n", b"Content-Length: \xb2\r\n",
    b"Transfer-Encoding: chunked\r\n", b"Connection: close\r\n", b"X: \x00\r\n", b"\r\n",
    b"2\r\n{}\r\n", b"0\r\n\r\n", b"FFFFFFFFFFFFFFFF\r\n", b"zz\r\n", b"{}", b"\r", b"\n",
]  # fmt: skip
BUFFER_CAP = MAX_BODY + MAX_HEAD + 2 * 4096  # what one answer may hold, plus one read


@st.composite
def answers(draw: st.DrawFn) -> list[bytes]:
    parts = draw(st.lists(st.sampled_from(HEAD_PARTS) | st.binary(max_size=64), max_size=24))
    data = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@FUZZ
@given(answers(), st.booleans())
def test_any_http1_byte_stream_gives_an_answer_or_a_classified_error(
    chunks: list[bytes], close: bool
) -> None:
    reader = ResponseReader()
    try:
        for chunk in chunks:
            answer = reader.feed(chunk)
            assert answer is None or isinstance(answer, Response)
            assert len(reader._buffer) + len(reader._body) <= BUFFER_CAP
            if answer is not None:
                return
        if close:
            assert isinstance(reader.eof(), Response)
    except (ProtocolViolation, ConnectionClosed):
        pass


def _frame(draw: st.DrawFn) -> bytes:
    sid = draw(st.sampled_from([0, 1, 3, 5, 2**31 - 1]))
    body = draw(st.binary(max_size=48))
    kind = draw(st.integers(0, 10))
    if kind == 10:  # any header: an unknown type, or a length that lies
        length = draw(st.integers(0, 2**24 - 1))
        kind_byte, flag_byte = draw(st.integers(0, 255)), draw(st.integers(0, 255))
        head = length.to_bytes(3, "big") + bytes([kind_byte, flag_byte]) + sid.to_bytes(4, "big")
        return head + body
    frame = _stream_frame(draw, kind, sid, body) if kind < 3 else _control_frame(draw, kind, sid)
    defined = {f.name for f in frame.defined_flags}
    for flag in draw(st.sets(st.sampled_from(["END_STREAM", "END_HEADERS", "ACK"]))):
        if flag in defined:
            frame.flags.add(flag)
    return frame.serialize()


def _stream_frame(draw: st.DrawFn, kind: int, sid: int, body: bytes) -> Frame:
    if kind == 0:
        return DataFrame(sid or 1, body)
    if kind == 1:
        return HeadersFrame(sid or 1, _header_block(draw))
    return ContinuationFrame(sid or 1, body)


def _control_frame(draw: st.DrawFn, kind: int, sid: int) -> Frame:
    code = draw(st.integers(0, 13))
    frames: dict[int, Frame] = {
        3: SettingsFrame(0),
        4: PingFrame(0, draw(st.binary(min_size=8, max_size=8))),
        5: GoAwayFrame(0, last_stream_id=sid, error_code=code),
        6: RstStreamFrame(sid or 1, error_code=code),
        7: WindowUpdateFrame(sid, window_increment=draw(st.integers(1, 2**31 - 1))),
        8: PushPromiseFrame(sid or 1, promised_stream_id=2, data=b""),
        9: PriorityFrame(sid or 1, depends_on=0, stream_weight=16),
    }
    frame = frames[kind]
    if isinstance(frame, SettingsFrame):
        names = st.sampled_from([1, 2, 3, 4, 5, 6, 99])
        values = st.sampled_from([0, 1, 4096, 16_384, 2**24, 2**31, 2**32 - 1])
        frame.settings = draw(st.dictionaries(names, values, max_size=4))
    return frame


def _header_block(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=32))  # not HPACK at all
    status = draw(st.sampled_from(["200", "429", "99", "²²²", "abc"]))
    return hpack.Encoder().encode([(":status", status), ("x-openshift-disruption", "x")])


def _settings_frame(values: dict[int, int]) -> bytes:
    frame = SettingsFrame(0)
    frame.settings = values
    return frame.serialize()


@st.composite
def frame_streams(draw: st.DrawFn) -> bytes:
    return b"".join(_frame(draw) for _ in range(draw(st.integers(0, 12))))


@FUZZ
@given(frame_streams(), st.integers(1, 40))
@example(_settings_frame({SettingsFrame.MAX_FRAME_SIZE: 0}), 40)  # made every request raise
@example(_settings_frame({SettingsFrame.HEADER_TABLE_SIZE: 2**32 - 1}), 40)
def test_any_http2_frame_sequence_gives_answers_or_a_classified_error(
    raw: bytes, split: int
) -> None:
    client = H2Client()
    for _ in range(3):
        client.start_request(REQUEST)
    client.data_to_send()
    for at in range(0, len(raw), split):
        for event in client.receive(raw[at : at + split]):
            assert isinstance(event, Answer | Failed)
            if isinstance(event, Failed):
                assert event.error is not None
        assert len(client._in) <= 9 + MAX_FRAME
        client.data_to_send()
        if client.accepts_streams:  # whatever the server set, a request can still go out
            client.start_request([*REQUEST, ("audit-id", "0" * 36)])
