"""HTTP/2 server connection over h2, with Go's graceful GOAWAY.

Go's server sends one GOAWAY with NO_ERROR and the highest client stream id it has seen, keeps
serving the streams at or below it, refuses later ones, and closes once they are done. h2's
`close_connection()` would move its state machine to CLOSED and refuse to answer those streams,
so we write the GOAWAY frame ourselves and keep h2's state machine open.
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from h2.errors import ErrorCodes
from hpack import NeverIndexedHeaderTuple
from hyperframe.frame import GoAwayFrame

from prober.fakeapiserver import events as ev

MAX_CONCURRENT_STREAMS = 250  # golang.org/x/net/http2's default
MAX_HEADER_LIST_SIZE = ev.MAX_HEADER_BYTES + 320  # what Go's server advertises
UNIQUE = frozenset({"audit-id"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding"})


class Http2Protocol:
    name = "h2"

    def __init__(self) -> None:
        # Inbound headers are validated as Go does; ours are valid by construction.
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            split_outbound_cookies=False,
        )
        self._h2 = h2.connection.H2Connection(config)
        self._h2.local_settings = h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            },
        )
        self._h2.decoder.max_header_list_size = MAX_HEADER_LIST_SIZE
        self._h2.initiate_connection()
        self._out = bytearray()
        self._open: set[int] = set()  # streams whose response has not ended
        self._pending: dict[int, tuple[bytearray, bool]] = {}  # body waiting for window
        self.goaway_last_stream_id: int | None = None
        self._peer_gone = False
        self._failed = False
        self._preface_seen = False

    # -- input -------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[ev.Event]:
        if self._failed:
            return []
        if not data:
            self._peer_gone = True
            return [ev.PeerClosed("eof")]
        try:
            h2_events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            # h2 has queued a GOAWAY with the error code, as Go's server sends one.
            self._failed = True
            return [ev.ProtocolFailed(f"HTTP/2: {type(error).__name__}: {error}")]
        events: list[ev.Event] = []
        for event in h2_events:
            self._translate(event, events)
        return events

    def _translate(self, event: h2.events.Event, events: list[ev.Event]) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._request(event, events)
        elif isinstance(event, h2.events.DataReceived):
            if event.flow_controlled_length and event.stream_id is not None:
                self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            if event.data and event.stream_id in self._open:
                events.append(ev.BodyReceived(event.stream_id, bytes(event.data)))
        elif isinstance(event, h2.events.StreamEnded):
            if event.stream_id in self._open:
                events.append(ev.RequestEnded(event.stream_id))
        elif isinstance(event, h2.events.StreamReset):
            self._open.discard(event.stream_id)
            self._pending.pop(event.stream_id, None)
            events.append(ev.StreamAborted(event.stream_id))
        elif isinstance(event, h2.events.WindowUpdated):
            for stream_id in list(self._pending):
                self._flush_stream(stream_id)
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self._preface_seen = True
        elif isinstance(event, h2.events.ConnectionTerminated):
            self._peer_gone = True
            events.append(ev.PeerClosed(f"GOAWAY error_code={event.error_code}"))

    def _request(self, event: h2.events.RequestReceived, events: list[ev.Event]) -> None:
        stream_id = event.stream_id
        if self.goaway_last_stream_id is not None and stream_id > self.goaway_last_stream_id:
            self._h2.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)
            return
        pseudo: dict[str, str] = {}
        headers: list[tuple[str, str]] = []
        for name, value in event.headers or ():
            key = bytes(name).decode("latin-1")
            text = bytes(value).decode("latin-1")
            if key.startswith(":"):
                pseudo[key] = text
            else:
                headers.append((key, text))
        self._open.add(stream_id)
        events.append(
            ev.RequestStarted(
                stream_id=stream_id,
                method=pseudo.get(":method", ""),
                target=pseudo.get(":path", ""),
                headers=headers,
                authority=pseudo.get(":authority", ""),
                ended=event.stream_ended is not None,
            )
        )

    def next_events(self) -> list[ev.Event]:
        return []

    # -- output ------------------------------------------------------------------------
    def send_response(self, answer: ev.Answer) -> int | None:
        stream_id, body, end = answer.stream_id, answer.body, answer.end
        if stream_id in self._open:
            fields = [(b":status", str(answer.status).encode())]
            for name, value in answer.headers:
                key = name.lower()
                if key in UNIQUE:  # never worth a slot in the HPACK table
                    fields.append(NeverIndexedHeaderTuple(key.encode(), value.encode("latin-1")))
                elif key not in HOP_BY_HOP:
                    fields.append((key.encode(), value.encode("latin-1")))
            if end:
                fields.append((b"content-length", str(len(body)).encode()))
            try:
                self._h2.send_headers(stream_id, fields, end_stream=end and not body)
            except h2.exceptions.StreamClosedError:
                self._open.discard(stream_id)
            else:
                if end and not body:
                    self._stream_done(stream_id)
                elif body:
                    self.send_data(stream_id, body, end=end)
        # Go turns `Connection: close` on HTTP/2 into a graceful GOAWAY after the response.
        return self.start_graceful_close() if answer.close else None

    def send_data(self, stream_id: int, data: bytes, *, end: bool) -> None:
        if stream_id not in self._open:
            return
        buffer, _ = self._pending.get(stream_id, (bytearray(), False))
        buffer += data
        self._pending[stream_id] = (buffer, end)
        self._flush_stream(stream_id)

    def _flush_stream(self, stream_id: int) -> None:
        """Send as much of the stream's queued body as its flow-control window allows."""
        buffer, end = self._pending[stream_id]
        ended = False
        try:
            while buffer:
                window = min(
                    self._h2.local_flow_control_window(stream_id), self._h2.max_outbound_frame_size
                )
                if window <= 0:
                    return  # resumed by a WindowUpdated event
                chunk = bytes(buffer[:window])
                del buffer[:window]
                ended = end and not buffer
                self._h2.send_data(stream_id, chunk, end_stream=ended)
            if end and not ended:
                self._h2.end_stream(stream_id)
        except h2.exceptions.StreamClosedError:
            end = True  # the client reset it meanwhile
        del self._pending[stream_id]
        if end:
            self._stream_done(stream_id)

    def _stream_done(self, stream_id: int) -> None:
        self._open.discard(stream_id)

    def start_graceful_close(self) -> int | None:
        if self.goaway_last_stream_id is not None or self._failed:
            return None
        last = self._h2.highest_inbound_stream_id
        frame = GoAwayFrame(0)
        frame.last_stream_id = last
        frame.error_code = ErrorCodes.NO_ERROR
        self._out += self._h2.data_to_send()
        self._out += frame.serialize()
        self.goaway_last_stream_id = last
        return last

    def data_to_send(self) -> bytes:
        self._out += self._h2.data_to_send()
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def wants_close(self) -> bool:
        if self._failed:
            return True
        finished = self.goaway_last_stream_id is not None or self._peer_gone
        return finished and not self._open

    @property
    def open_streams(self) -> int:
        return len(self._open)

    @property
    def awaiting_headers(self) -> bool:
        return not self._preface_seen
