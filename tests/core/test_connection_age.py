"""The connection-age tracker, sample sequence by sample sequence: which server each failure,
late answer and resend is put down to, and in which phase of that server's shutdown its
connection was opened, the bounds honoured."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from prober.core.connection_age import (
    AgeRow,
    Attributed,
    ConnectionAges,
    ConnectionAgeTracker,
    Seen,
)
from prober.core.models import (
    LB,
    ClosedBy,
    Connection,
    ErrorClass,
    Protocol,
    Sample,
    StreamId,
    Window,
)
from prober.core.trackers import Trackers
from tests.factories import sample

KEPT = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.REUSED)
NEW = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.NEW)
A, B = "apiserver-a", "apiserver-b"
# A's shutdown: T0 in [10, 10.1], a 20 s delay by the header (19.5 to 20.5 s): the 80 % mark
# lies in [25.6, 26.5], the delay's end in [29.5, 30.6].
WINDOW_A = Window(A, None, 20.0, 10.2, 10.05, 10.0, 10.1, ClosedBy.RECOVERED, 40.0, ())


def on(
    t: float,
    port: int | None,
    *,
    age: float | None,
    stream: StreamId = KEPT,
    reused: bool | None = None,
    **kw: Any,
) -> Sample:
    """A sample over the connection at local `port`, `age` seconds old."""
    changes: dict[str, Any] = {"local_port": port, "connection_age": age}
    for name in ("retried", "replaced_port", "held"):
        if name in kw:
            changes[name] = kw.pop(name)
    made = sample(t, stream=stream, delay=kw.pop("delay", 20.0), **kw)
    changes["reused"] = reused if reused is not None else bool(age)
    return dataclasses.replace(made, **changes)


def row(stream: StreamId, opened: str, **counts: dict[str, int]) -> AgeRow:
    return AgeRow(stream, opened, **counts)


RESET, RETRY = ErrorClass.CONNECTION_RESET, ErrorClass.RETRY_AFTER
CASES: list[tuple[str, list[Sample | Window], list[AgeRow]]] = [
    (
        "aws: a kept connection opened before T0 answers late, then the LB resets it",
        [
            on(5.0, 1000, age=0.0, host=A),
            on(12.0, 1000, age=7.0, host=A, late=True, elapsed=2),
            on(13.0, 1000, age=8.0, error=RESET),
            WINDOW_A,
        ],
        [
            row(
                KEPT,
                "before",
                late={"delay_early": 1},
                failed={"delay_early": 1},
                errors={"connection_reset": 1},
            )
        ],
    ),
    (
        "gcp: late throughout the delay, then the server's idle close, resent",
        [
            on(5.0, 1000, age=0.0, host=A),
            on(12.0, 1000, age=7.0, host=A, late=True, elapsed=2),
            on(27.0, 1000, age=22.0, host=A, late=True, elapsed=17),
            on(31.0, 1001, age=0.0, host=B, retried="closed_idle", replaced_port=1000),
            WINDOW_A,
        ],
        [row(KEPT, "before", late={"delay_early": 1, "delay_late": 1}, resent={"after": 1})],
    ),
    (
        "a failure on a connection no server answered on has no server",
        [on(12.0, 1000, age=0.0, error=RESET), WINDOW_A],
        [row(KEPT, "no_server", failed={"unknown": 1}, errors={"connection_reset": 1})],
    ),
    (
        "new connections: a failure names no server, a late answer is its opening's phase",
        [
            on(12.0, 2000, age=0.0, stream=NEW, error=ErrorClass.CONNECT_REFUSED),
            on(27.0, 2001, age=0.0, stream=NEW, host=A, late=True, elapsed=17),
            WINDOW_A,
        ],
        [
            row(NEW, "delay_late", late={"delay_late": 1}),
            row(NEW, "no_server", failed={"unknown": 1}, errors={"connect_refused": 1}),
        ],
    ),
    (
        "opened within T0's bound: both phases, none guessed",
        [on(10.05, 1000, age=0.0, host=A), on(12.0, 1000, age=1.95, host=A, late=True), WINDOW_A],
        [row(KEPT, "before|delay_early", late={"delay_early": 1})],
    ),
    (
        "opened within the 80 % mark's bound: both phases",
        [on(26.0, 1000, age=0.0, host=A, late=True, elapsed=16), WINDOW_A],
        [row(KEPT, "delay_early|delay_late", late={"delay_early|delay_late": 1})],
    ),
    (
        "a failure with its own header is its server's, whatever the connection",
        [
            on(5.0, 1000, age=0.0, host=B),
            on(31.0, 1000, age=26.0, host=A, late=True, elapsed=21, error=RETRY, status=429),
            WINDOW_A,
        ],
        [row(KEPT, "before", late={"after": 1}, failed={"after": 1}, errors={"retry_after": 1})],
    ),
    (
        "a kept connection's server that never shut down: no shutdown to place it in",
        [on(5.0, 1000, age=0.0, host=B), on(13.0, 1000, age=8.0, error=RESET), WINDOW_A],
        [row(KEPT, "no_shutdown", failed={"unknown": 1}, errors={"connection_reset": 1})],
    ),
    (
        "a failure before its server's T0 belongs to no shutdown",
        [on(5.0, 1000, age=0.0, host=A), on(8.0, 1000, age=3.0, error=RESET), WINDOW_A],
        [row(KEPT, "no_shutdown", failed={"unknown": 1}, errors={"connection_reset": 1})],
    ),
    (
        "a log from before ages: no age",
        [
            on(5.0, 1000, age=None, host=A),
            on(12.0, 1000, age=None, host=A, late=True, reused=True),
            WINDOW_A,
        ],
        [row(KEPT, "no_age", late={"unknown": 1})],
    ),
    (
        "a new connection on a port once another's is put down to its own server",
        [
            on(5.0, 1000, age=0.0, host=A),
            on(6.0, 1000, age=0.0, host=B, replaced_port=1000),
            on(13.0, 1000, age=7.0, error=RESET),
            WINDOW_A,
        ],
        [row(KEPT, "no_shutdown", failed={"unknown": 1}, errors={"connection_reset": 1})],
    ),
    (
        "stopped samples count for nothing; a held one names its connection's server only",
        [
            on(5.0, 1000, age=0.0, host=A, held=True),
            on(11.0, 1000, age=6.0, error=ErrorClass.STOPPED),
            on(12.0, 1000, age=7.0, host=A, late=True, held=True),
            on(13.0, 1000, age=8.0, error=RESET),
            WINDOW_A,
        ],
        [row(KEPT, "before", failed={"delay_early": 1}, errors={"connection_reset": 1})],
    ),
    (
        "a failure after one shutdown waits for the server's next one",
        [
            on(5.0, 1000, age=0.0, host=A),
            WINDOW_A,
            on(41.0, 1000, age=36.0, host=A),
            on(52.0, 1000, age=47.0, error=RESET),
            dataclasses.replace(WINDOW_A, t0=50.05, t0_lo=50.0, t0_hi=50.1, end_t=80.0),
        ],
        [row(KEPT, "before", failed={"delay_early": 1}, errors={"connection_reset": 1})],
    ),
]


def table(steps: list[Sample | Window], exact_delay: float | None = None) -> ConnectionAges:
    tracker = ConnectionAgeTracker(exact_delay)
    for step in steps:
        if isinstance(step, Window):
            tracker.closed(step)
        else:
            tracker.feed(step)
    return tracker.close(100.0)


@pytest.mark.parametrize(("steps", "rows"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_count_is_placed_where_its_connection_was_opened(steps, rows) -> None:
    assert list(table(steps).rows) == rows


def test_an_exact_delay_narrows_the_late_mark() -> None:
    steps: list[Sample | Window] = [on(26.0, 1000, age=0.0, host=A, late=True), WINDOW_A]
    # T0 + 16 s lies in [26, 26.1]: 26 is not past it, whichever T0.
    assert [r.opened for r in table(steps, exact_delay=20.0).rows] == ["delay_early"]
    # An exact delay the header contradicts is not this server's: the header's, +- 0.5 s.
    assert [r.opened for r in table(steps, exact_delay=30.0).rows] == ["delay_early|delay_late"]


def test_a_failure_on_a_kept_connection_names_the_answer_it_is_put_down_to() -> None:
    tracker = ConnectionAgeTracker()
    ready, late = on(5.0, 1000, age=0.0, host=A), on(12.0, 1000, age=7.0, host=A, late=True)
    reset = on(13.0, 1000, age=8.0, error=RESET)
    resent = on(14.0, 1001, age=0.0, host=B, retried="closed_idle", replaced_port=1000)
    events = [tracker.feed(s) for s in (ready, late, reset)]
    assert events == [[], [], [Attributed(reset, late)]]
    # HTTP/2 multiplexes: an answer sent after the failure is still that connection's server.
    tracker.feed(on(12.5, 1000, age=7.5, host=A, late=True))
    assert [e.by.t for e in tracker.feed(resent)] == [12.5]


def test_the_trackers_place_counts_in_the_windows_they_close() -> None:
    """Wired in `Trackers`: the shutdown tracker's own windows, at the run's end."""
    trackers = Trackers([KEPT], exact_delay=20.0)
    steps = [on(5.0, 1000, age=0.0, host=A)]
    steps += [on(10.0 + 0.5 * i, 1000, age=5.0 + 0.5 * i, host=A, late=True, elapsed=0.5 * i)
              for i in range(1, 6)]  # fmt: skip
    steps += [on(13.2, 1000, age=8.2, error=RESET)]
    events = [e for s in steps for e in trackers.feed(s)]
    assert [type(e).__name__ for e in events if isinstance(e, Attributed)] == ["Attributed"]
    closed = trackers.close(60.0, "end")
    ages = closed[-1]
    assert isinstance(ages, ConnectionAges)
    ((stream, opened, late, failed),) = [(r.stream_id, r.opened, r.late, r.failed)
                                         for r in ages.rows]  # fmt: skip
    assert (stream, opened, failed) == (KEPT, "before", {"delay_early": 1})
    # The first came within T0's bound, but it says it met the server past T0.
    assert late == {"delay_early": 5}
    assert {s.value for s in Seen} == {"late", "failed", "resent"}
