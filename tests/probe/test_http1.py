"""The HTTP/1.1 reader, sans I/O: byte sequences in, answers or the exact error out."""

from __future__ import annotations

import pytest

from prober.probe.wire.errors import ConnectionClosed, ProtocolViolation
from prober.probe.wire.http1 import MAX_HEAD, ResponseReader, format_request

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Openshift-Disruption: shutdown=false\r\n\r\n{}"


def read(*chunks: bytes, eof: bool = False):
    reader = ResponseReader()
    answer = None
    for chunk in chunks:
        answer = reader.feed(chunk) or answer
    if eof and answer is None:
        answer = reader.eof()
    return answer


@pytest.mark.parametrize(
    ("chunks", "status", "body", "keep_alive"),
    [
        ([OK], 200, b"{}", True),
        ([OK[:10], OK[10:30], OK[30:]], 200, b"{}", True),  # any split
        ([b"HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"],
         429, b"", False),
        ([CHUNKED + b"2;ext\r\n{}\r\n0\r\n\r\n"], 200, b"{}", True),
        ([CHUNKED + b"1\r\n{\r\n1\r\n}\r\n0\r\nX: y\r\n\r\n"], 200, b"{}", True),  # trailers
        ([b"HTTP/1.1 100 Continue\r\n\r\n", OK], 200, b"{}", True),  # interim answer skipped
        ([b"HTTP/1.1 204 No Content\r\n\r\n"], 204, b"", True),
        ([b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"], 200, b"{}", False),
        ([OK + b"extra"], 200, b"{}", False),  # bytes nobody asked for: not to be trusted
    ],
    ids=["whole", "split", "close", "chunked", "trailers", "interim", "no body", "1.0", "extra"],
)  # fmt: skip
def test_answers(chunks: list[bytes], status: int, body: bytes, keep_alive: bool) -> None:
    answer = read(*chunks)
    assert answer is not None
    assert (answer.status, answer.body, answer.keep_alive) == (status, body, keep_alive)


def test_headers_are_lower_cased_and_stripped() -> None:
    answer = read(
        b"HTTP/1.1 200 OK\r\nX-Openshift-Disruption:  a b \t\r\nContent-Length: 0\r\n\r\n"
    )
    assert answer is not None
    assert answer.headers == [(b"x-openshift-disruption", b"a b"), (b"content-length", b"0")]


def test_a_body_ended_by_the_close() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.1 200 OK\r\n\r\npart") is None
    answer = reader.eof()
    assert (answer.body, answer.keep_alive) == (b"part", False)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"HTTP/2 200\r\n\r\n", "not an HTTP/1.x status line: 'HTTP/2 200'"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line: 'SSH-2.0-OpenSSH'"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line 'no colon here'"),
        (b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n", "malformed header line 'bad name: x'"),
        (b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "malformed header line ' folded: x'"),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", "header X holds a control byte"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
         "bad Content-Length b'1, 2'"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length b'-1'"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "transfer coding 'gzip'"),
        (CHUNKED + b"zz\r\n", "bad chunk size line"),
        (CHUNKED + b"1\r\nabc", "chunk not followed by CRLF"),
        (CHUNKED + b"FFFFFFFFFFFFFFFF\r\n",
         "chunk of 18446744073709551615 bytes, more than a probe reads"),
        (CHUNKED + b"800001\r\n" + b"x" * 1024,
         "chunk of 8388609 bytes, more than a probe reads"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101 Switching Protocols to a plain GET"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
         "body of 99999999999 bytes, more than a probe reads"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD, "response head larger than 64 KiB"),
    ],
)  # fmt: skip
def test_what_a_server_may_not_send(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolViolation) as raised:
        read(data)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("data", "answered", "message"),
    [
        (b"", False, "server closed the connection without sending an answer"),
        (OK[:20], True, "server closed the connection before the answer was complete"),
    ],
)
def test_a_close_before_the_whole_answer(data: bytes, answered: bool, message: str) -> None:
    reader = ResponseReader()
    reader.feed(data)
    with pytest.raises(ConnectionClosed) as raised:
        reader.eof()
    assert (raised.value.answered, raised.value.detail) == (answered, message)


def test_the_request_bytes() -> None:
    assert format_request("/api?x=1", "h:6443", [("A", "b")]) == (
        b"GET /api?x=1 HTTP/1.1\r\nHost: h:6443\r\nA: b\r\n\r\n"
    )
    with pytest.raises(ValueError, match="header A holds a line break"):
        format_request("/", "h", [("A", "b\r\nInjected: yes")])
