"""HTTP/2 for a prober, sans I/O: the client side of one connection, on hyperframe and hpack.

Written here rather than on h2's `H2Connection` for one behaviour: after a graceful GOAWAY
(NO_ERROR) a server still answers every stream up to `last_stream_id`, and Go's transport
(what openshift/origin's samplers use) lets them finish. h2 closes its connection state
machine on receiving GOAWAY and refuses the frames of those answers (a `KeyError` on
`(CLOSED, RECV_DATA)`), so a request the apiserver was answering became a failure. Here a
GOAWAY only stops new streams: the ones at or below `last_stream_id` run to their answer, the
ones above it fail as `GoAway(unprocessed=True)`, which the probe may send again.

It is also far less work per request than h2's per-frame state machines
(`bench/daemon_cpu.py`). What a prober's requests need and nothing more: SETTINGS (push off),
HEADERS and CONTINUATION with HPACK, a small request body in DATA, DATA with flow control given
back as it is read, PING answered and sent (client-go's health check of a connection that
carries watches), RST_STREAM, GOAWAY. A streamed answer (a watch) is handed over as it comes:
`Head`, then `Data` pieces, then its `Answer` with an empty body. Every way a peer can break
the protocol is a `ProtocolViolation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import hpack
import hyperframe.exceptions
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from prober.probe.wire.errors import GoAway, ProtocolViolation, StreamReset, WireError

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MAX_FRAME = 16_384  # what we accept (the protocol's default; we never raise it)
MAX_HEADER_TABLE = 4_096  # the HPACK encoder's table at most, as Go's transport keeps it
MAX_HEADER_BLOCK = 64 * 1024  # a header block larger than this is refused (h11's head limit)
MAX_BODY = 8 * 1024 * 1024
INITIAL_WINDOW = 65_535  # the protocol's initial flow-control window, for a request body
# SETTINGS or PING frames in a row, nothing of a stream between them: a peer flooding us with
# work (each asks for an acknowledgement) rather than answering. nghttp2 and Go's server
# guard the same way; a real apiserver sends a handful per connection.
MAX_CONTROL_FRAMES = 1000
ERROR_CODES = {
    0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR",
    4: "SETTINGS_TIMEOUT", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM",
    8: "CANCEL", 9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR", 11: "ENHANCE_YOUR_CALM",
    12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED",
}  # fmt: skip
CANCEL = 8

Headers = list[tuple[bytes, bytes]]


def code_name(code: int) -> str:
    return ERROR_CODES.get(code, f"0x{code:x}")


@dataclass(frozen=True, slots=True)
class Answer:
    """A stream's whole answer."""

    stream_id: int
    status: int
    headers: Headers  # without pseudo-headers
    body: bytes


@dataclass(frozen=True, slots=True)
class Head:
    """A streamed answer's status and headers; its body follows as `Data`."""

    stream_id: int
    status: int
    headers: Headers


@dataclass(frozen=True, slots=True)
class Data:
    """A piece of a streamed answer's body."""

    stream_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class PingAck:
    """The peer answered one of our PINGs."""

    opaque: bytes


@dataclass(frozen=True, slots=True)
class Failed:
    """A stream that ended without an answer."""

    stream_id: int
    error: WireError


Event = Answer | Failed | Head | Data | PingAck


@dataclass(slots=True)
class _Stream:
    status: int | None = None
    headers: Headers = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    streamed: bool = False


class H2Client:
    """Feed it received bytes (`receive`), take what to send (`data_to_send`)."""

    def __init__(self) -> None:
        self._encoder = hpack.Encoder()
        self._decoder = hpack.Decoder(max_header_list_size=MAX_HEADER_BLOCK)
        self._out = bytearray(PREFACE)
        self._in = bytearray()
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._peer_max_frame = MAX_FRAME
        self._block: tuple[int, bytearray, bool] | None = None  # stream, fragments, end_stream
        self._control = 0  # SETTINGS and PING frames since the last frame of a stream
        self._pings: set[bytes] = set()  # PINGs sent and not yet acknowledged
        self.goaway: GoAway | None = None  # the peer is going away: no new streams
        self.broken: WireError | None = None  # the connection is unusable
        settings = SettingsFrame(0)
        settings.settings = {
            SettingsFrame.ENABLE_PUSH: 0,
            SettingsFrame.MAX_HEADER_LIST_SIZE: MAX_HEADER_BLOCK,
        }
        self._out += settings.serialize()

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    @property
    def accepts_streams(self) -> bool:
        return self.goaway is None and self.broken is None

    def start_request(
        self, headers: list[tuple[str, str]], body: bytes = b"", *, streamed: bool = False
    ) -> int:
        """Queue a request, with a small body (within the initial flow-control window) when
        one is given; its stream id. `streamed`: its answer is handed over as it comes."""
        if len(body) > INITIAL_WINDOW:
            raise ValueError(f"a request body of {len(body)} bytes, above {INITIAL_WINDOW}")
        stream_id = self._next_id
        self._next_id += 2
        block = self._encoder.encode(headers)
        size = self._peer_max_frame
        first = HeadersFrame(stream_id, block[:size], flags=[] if body else ["END_STREAM"])
        rest = [block[i : i + size] for i in range(size, len(block), size)]
        if not rest:
            first.flags.add("END_HEADERS")
        self._out += first.serialize()
        for index, chunk in enumerate(rest):
            frame = ContinuationFrame(stream_id, chunk)
            if index == len(rest) - 1:
                frame.flags.add("END_HEADERS")
            self._out += frame.serialize()
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            self._out += DataFrame(
                stream_id, piece, flags=["END_STREAM"] if last else []
            ).serialize()
        self._streams[stream_id] = _Stream(streamed=streamed)
        return stream_id

    def ping(self, opaque: bytes) -> None:
        """Queue a PING (8 bytes of `opaque`); its ACK comes back as `PingAck`."""
        self._pings.add(opaque)
        self._out += PingFrame(0, opaque).serialize()

    def cancel(self, stream_id: int) -> None:
        """We gave up on a stream (its deadline): tell the peer, forget it."""
        if self._streams.pop(stream_id, None) is not None and self.broken is None:
            self._out += RstStreamFrame(stream_id, error_code=CANCEL).serialize()

    def data_to_send(self) -> bytes:
        data = bytes(self._out)
        self._out.clear()
        return data

    def receive(self, data: bytes) -> list[Event]:
        """The events the bytes complete. A connection error fails every stream, and the
        connection stays `broken`."""
        if self.broken is not None:
            return []
        self._in += data
        events: list[Event] = []
        try:
            while len(self._in) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self._in)[:9])
                if length > MAX_FRAME:
                    raise ProtocolViolation(f"a {length}-byte frame, above {MAX_FRAME}")
                if len(self._in) < 9 + length:
                    break
                frame.parse_body(memoryview(self._in)[9 : 9 + length])
                del self._in[: 9 + length]
                events += self._handle(frame)
        except (hyperframe.exceptions.HyperframeError, hpack.HPACKError, ValueError) as exc:
            events += self.fail(ProtocolViolation(f"bad HTTP/2 frame: {exc}"))
        except ProtocolViolation as exc:
            events += self.fail(exc)
        return events

    def fail(self, error: WireError) -> list[Event]:
        """The connection is gone (or broken): every stream ends with `error`."""
        self.broken = self.broken or error
        failed: list[Event] = [Failed(sid, error) for sid in self._streams]
        self._streams.clear()
        return failed

    def _handle(self, frame: Frame) -> list[Event]:
        if self._block is not None and not isinstance(frame, ContinuationFrame):
            raise ProtocolViolation("a header block interrupted by another frame")
        if isinstance(frame, DataFrame | HeadersFrame | ContinuationFrame):
            self._control = 0
            if isinstance(frame, DataFrame):
                return self._data(frame)
            return self._header_fragment(frame)
        if isinstance(frame, SettingsFrame | PingFrame) and "ACK" not in frame.flags:
            self._control += 1
            if self._control > MAX_CONTROL_FRAMES:
                raise ProtocolViolation(
                    f"a flood of more than {MAX_CONTROL_FRAMES} SETTINGS and PING frames "
                    "with nothing of a stream between them"
                )
        if isinstance(frame, SettingsFrame):
            self._settings(frame)
        elif isinstance(frame, PingFrame):
            return self._ping(frame)
        elif isinstance(frame, RstStreamFrame):
            if self._streams.pop(frame.stream_id, None) is not None:
                code = frame.error_code
                return [Failed(frame.stream_id, StreamReset(code, code_name(code)))]
        elif isinstance(frame, GoAwayFrame):
            return self._goaway(frame)
        elif isinstance(frame, PushPromiseFrame):
            raise ProtocolViolation("PUSH_PROMISE after push was turned off")
        return []  # WINDOW_UPDATE (we send no bodies), PRIORITY, unknown extensions

    def _ping(self, frame: PingFrame) -> list[Event]:
        opaque = bytes(frame.opaque_data)
        if "ACK" not in frame.flags:
            self._out += PingFrame(0, opaque, flags=["ACK"]).serialize()
            return []
        if opaque not in self._pings:
            return []  # an acknowledgement of nothing we sent
        self._pings.discard(opaque)
        return [PingAck(opaque)]

    def _settings(self, frame: SettingsFrame) -> None:
        if "ACK" in frame.flags:
            return
        _check_settings(frame.settings)
        size = frame.settings.get(SettingsFrame.MAX_FRAME_SIZE)
        if size is not None:
            self._peer_max_frame = size
        table = frame.settings.get(SettingsFrame.HEADER_TABLE_SIZE)
        if table is not None:
            # The peer's table size is a most, not a least: a unique Audit-ID per request
            # kept in a 2^31-byte table searched linearly cost 15.8 ms a request after 5,000.
            self._encoder.header_table_size = min(table, MAX_HEADER_TABLE)
        self._out += SettingsFrame(0, flags=["ACK"]).serialize()

    def _goaway(self, frame: GoAwayFrame) -> list[Event]:
        code, last = frame.error_code, frame.last_stream_id
        name = code_name(code)
        self.goaway = GoAway(code, name, last, stream_id=0)
        if code != 0:
            return self.fail(GoAway(code, name, last, stream_id=0))
        # Graceful: the streams it did not take are failed now (sent again by the probe),
        # the others run to their answers.
        unprocessed = [sid for sid in self._streams if sid > last]
        for sid in unprocessed:
            del self._streams[sid]
        return [Failed(sid, GoAway(code, name, last, sid)) for sid in unprocessed]

    def _data(self, frame: DataFrame) -> list[Event]:
        # Give the flow-control credit back at once: answers are small and read whole.
        consumed = frame.flow_controlled_length
        stream = self._streams.get(frame.stream_id)
        if consumed:
            self._out += _window_update(0, consumed)
            if stream is not None and "END_STREAM" not in frame.flags:
                self._out += _window_update(frame.stream_id, consumed)
        if stream is None:
            return []  # a stream we cancelled, or one the GOAWAY already failed
        if stream.status is None:
            raise ProtocolViolation("DATA before the response headers")
        if stream.streamed:
            events: list[Event] = [Data(frame.stream_id, bytes(frame.data))] if frame.data else []
            return events + (self._end(frame.stream_id) if "END_STREAM" in frame.flags else [])
        stream.body += frame.data
        if len(stream.body) > MAX_BODY:
            raise ProtocolViolation(f"body larger than {MAX_BODY // (1024 * 1024)} MiB")
        return self._end(frame.stream_id) if "END_STREAM" in frame.flags else []

    def _header_fragment(self, frame: HeadersFrame | ContinuationFrame) -> list[Event]:
        if isinstance(frame, HeadersFrame):
            if self._block is not None:
                raise ProtocolViolation("HEADERS inside another header block")
            self._block = (frame.stream_id, bytearray(), "END_STREAM" in frame.flags)
        elif self._block is None or self._block[0] != frame.stream_id:
            raise ProtocolViolation("CONTINUATION without its HEADERS")
        stream_id, fragments, end_stream = self._block
        fragments += frame.data
        if len(fragments) > MAX_HEADER_BLOCK:
            raise ProtocolViolation(f"header block larger than {MAX_HEADER_BLOCK // 1024} KiB")
        if "END_HEADERS" not in frame.flags:
            return []
        self._block = None
        # Decoded even for a stream we forgot: the HPACK table must follow every block.
        headers = [
            (bytes(n), bytes(v)) for n, v in self._decoder.decode(bytes(fragments), raw=True)
        ]
        stream = self._streams.get(stream_id)
        if stream is None:
            return []
        if stream.status is None:
            status = _status(headers)
            if 100 <= status < 200:
                return []  # an interim answer: the real one follows
            stream.status = status
            stream.headers = _fields(headers)
            if stream.streamed and not end_stream:
                return [Head(stream_id, status, stream.headers)]
        # else: trailers, which carry nothing a probe reads
        return self._end(stream_id) if end_stream else []

    def _end(self, stream_id: int) -> list[Event]:
        stream = self._streams.pop(stream_id)
        assert stream.status is not None
        return [Answer(stream_id, stream.status, stream.headers, bytes(stream.body))]


def _status(headers: Headers) -> int:
    for name, value in headers:
        if name == b":status":
            if len(value) == 3 and value.isdigit():
                return int(value)
            break
    raise ProtocolViolation("response headers without a valid :status")


def _fields(headers: Headers) -> Headers:
    """Regular fields, as a client keeps them: names lower-cased, values without the optional
    whitespace around them (as HTTP/1.1's reader does); a value carrying a line break or NUL
    is refused, as HTTP/2 requires."""
    out: Headers = []
    for name, value in headers:
        if name.startswith(b":"):
            continue
        if b"\r" in value or b"\n" in value or b"\x00" in value:
            raise ProtocolViolation(f"header {name.decode('latin-1')} holds a control byte")
        out.append((name.lower(), value.strip(b" \t")))
    return out


def _window_update(stream_id: int, increment: int) -> bytes:
    return WindowUpdateFrame(stream_id, window_increment=increment).serialize()


def _check_settings(settings: Mapping[int, int]) -> None:
    """RFC 9113 6.5.2: values outside these ranges are a connection error."""
    size = settings.get(SettingsFrame.MAX_FRAME_SIZE)
    if size is not None and not MAX_FRAME <= size <= 2**24 - 1:
        raise ProtocolViolation(f"SETTINGS_MAX_FRAME_SIZE {size}, outside 16384 to 16777215")
    window = settings.get(SettingsFrame.INITIAL_WINDOW_SIZE)
    if window is not None and window > 2**31 - 1:
        raise ProtocolViolation(f"SETTINGS_INITIAL_WINDOW_SIZE {window}, above 2^31-1")
    push = settings.get(SettingsFrame.ENABLE_PUSH)
    if push is not None and push not in (0, 1):
        raise ProtocolViolation(f"SETTINGS_ENABLE_PUSH {push}, neither 0 nor 1")
