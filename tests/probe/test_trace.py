"""What the trace hooks record when the connection is already gone."""

from __future__ import annotations

import socket

from prober.probe.prober import _Trace


class ClosedStream:
    """httpcore's network stream over a socket that has been closed: every address lookup
    fails the way a closed socket's getsockname() does."""

    def __init__(self) -> None:
        sock = socket.socket()
        sock.close()
        self._sock = sock

    def get_extra_info(self, name: str) -> object:
        return self._sock.getsockname()


def test_a_closed_socket_leaves_the_addresses_unknown_instead_of_failing() -> None:
    trace = _Trace()
    trace.note_stream(ClosedStream())  # raised OSError: [Errno 9] Bad file descriptor
    assert (trace.local, trace.peer) == (None, None)
