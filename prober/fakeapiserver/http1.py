"""HTTP/1.1 server connection over h11, with net/http's answers to bad input and its
keep-alive rules (`Connection: close` after shutdown, idle connections closed)."""

from __future__ import annotations

from http import HTTPStatus

import h11

from prober.fakeapiserver import events as ev


class Http1Protocol:
    name = "h1"

    def __init__(self, max_header_bytes: int = ev.MAX_HEADER_BYTES) -> None:
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_header_bytes + 4096)
        self._out = bytearray()
        self._stream_id = 0
        self._responding = False  # a request arrived and its response has not ended
        self._close_after_response = False
        self._wants_close = False

    # -- input -------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[ev.Event]:
        if self._wants_close:
            return []
        self._h11.receive_data(data)
        return self.next_events()

    def next_events(self) -> list[ev.Event]:
        events: list[ev.Event] = []
        while not self._wants_close:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as error:
                events.append(self._fail(error))
                break
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.Request):
                events.append(self._started(event))
            elif isinstance(event, h11.Data):
                events.append(ev.BodyReceived(self._stream_id, bytes(event.data)))
            elif isinstance(event, h11.EndOfMessage):
                events.append(ev.RequestEnded(self._stream_id))
            elif isinstance(event, h11.ConnectionClosed):
                if not self._responding:
                    self._wants_close = True
                events.append(ev.PeerClosed("eof"))
                break
        return events

    def _started(self, request: h11.Request) -> ev.RequestStarted:
        self._stream_id += 1
        self._responding = True
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers]
        authority = next((v for k, v in headers if k == "host"), "")
        chunked = any(k == "transfer-encoding" for k, _ in headers)
        length = next((v for k, v in headers if k == "content-length"), "0")
        return ev.RequestStarted(
            stream_id=self._stream_id,
            method=request.method.decode("ascii", "replace"),
            target=request.target.decode("latin-1"),
            headers=headers,
            authority=authority,
            ended=not chunked and length.strip() in ("", "0"),
        )

    def _fail(self, error: h11.RemoteProtocolError) -> ev.ProtocolFailed:
        """Answer as net/http does (`400 Bad Request`, `431 ...`), then close."""
        code = error.error_status_hint if error.error_status_hint >= 400 else 400
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            body = f"{code} {HTTPStatus(code).phrase}".encode()
            headers = [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Connection", "close"),
                ("Content-Length", str(len(body))),
            ]
            try:
                self._out += self._h11.send(
                    h11.Response(status_code=code, headers=headers, reason=_reason(code))
                )
                self._out += self._h11.send(h11.Data(data=body))
                self._out += self._h11.send(h11.EndOfMessage())
            except h11.LocalProtocolError:
                pass
        self._wants_close = True
        return ev.ProtocolFailed(f"HTTP/1.1: {error}")

    # -- output ------------------------------------------------------------------------
    def send_response(self, answer: ev.Answer) -> int | None:
        if answer.stream_id != self._stream_id or self._h11.our_state is not h11.SEND_RESPONSE:
            return None  # the connection moved on (error or close); nothing to answer
        if answer.close:
            self._close_after_response = True
        headers = list(answer.headers)
        if self._close_after_response:
            headers.append(("Connection", "close"))
        if answer.end:
            headers.append(("Content-Length", str(len(answer.body))))
        status = answer.status
        self._out += self._h11.send(
            h11.Response(status_code=status, headers=headers, reason=_reason(status))
        )
        self.send_data(answer.stream_id, answer.body, end=answer.end)
        return None

    def send_data(self, stream_id: int, data: bytes, *, end: bool) -> None:
        if stream_id != self._stream_id or self._h11.our_state is not h11.SEND_BODY:
            return
        if data:
            self._out += self._h11.send(h11.Data(data=data))
        if end:
            self._out += self._h11.send(h11.EndOfMessage())
            self._response_done()

    def _response_done(self) -> None:
        self._responding = False
        if self._h11.our_state is h11.MUST_CLOSE or self._close_after_response:
            self._wants_close = True
        elif self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        else:  # we answered before the request body ended: net/http closes too
            self._wants_close = True

    def start_graceful_close(self) -> int | None:
        self._close_after_response = True
        if not self._responding and not self.awaiting_headers:
            self._wants_close = True
        return None

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def wants_close(self) -> bool:
        return self._wants_close

    @property
    def open_streams(self) -> int:
        return 1 if self._responding else 0

    @property
    def awaiting_headers(self) -> bool:
        return (
            not self._responding
            and self._h11.their_state is h11.IDLE
            and bool(self._h11.trailing_data[0])
        )


def _reason(code: int) -> bytes:
    try:
        return HTTPStatus(code).phrase.encode()
    except ValueError:
        return b""
