"""client-go's Retry-After rule over samples already taken: table-driven sample sequences, each
with how its chains of retries end (`core.perceived`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from prober.core.clientgo import retry_after_detail, retry_after_value
from prober.core.models import LB, Connection, ErrorClass, Interval, Protocol, Sample, StreamId
from prober.core.perceived import Felt, RetryFollower, wait_of
from prober.core.trackers import Trackers
from tests.factories import STREAM, sample

KEPT = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.REUSED)
HTTP1 = StreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, Connection.NEW)
EXTERNAL = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.NEW)
REFUSED, RESET, RETRY = (
    ErrorClass.CONNECT_REFUSED,
    ErrorClass.CONNECTION_RESET,
    ErrorClass.RETRY_AFTER,
)


def told(t: float, seconds: str = "1", stream: StreamId = STREAM, status: int = 429) -> Sample:
    """An answer that tells the client to wait `seconds` and try again."""
    detail = retry_after_detail(status, seconds)
    return sample(t, stream=stream, error=RETRY, status=status, detail=detail)


def ok(t: float, stream: StreamId = STREAM) -> Sample:
    return sample(t, stream=stream)


@dataclass(frozen=True)
class Ending:
    first: float  # the retried sample's t
    outcome: ErrorClass | None
    tries: int
    by: float | None  # the stand-in's t


CASES = {
    # The next new-connection sample at or after t + 1 s stands in for the retry.
    "a success after the wait": ([told(0.0), ok(0.5), ok(1.0)], [Ending(0.0, None, 2, 1.0)]),
    # Before the wait is over no retry was sent: that sample stands for nothing.
    "too early stands for nothing": ([told(0.0), ok(0.99)], [Ending(0.0, RETRY, 1, None)]),
    "a failure ends it": ([told(0.0), sample(1.2, error=REFUSED)], [Ending(0.0, REFUSED, 2, 1.2)]),
    # Told again: the chain waits from the stand-in's sending.
    "told twice": (
        [told(0.0), told(1.0, "2"), ok(2.5), ok(3.0)],
        [Ending(0.0, None, 3, 3.0), Ending(1.0, None, 2, 3.0)],
    ),
    # A kept connection is not where client-go's retry goes; another protocol or LB is
    # another client.
    "only new connections of the same LB and protocol": (
        [told(0.0), ok(1.5, KEPT), ok(1.5, HTTP1), ok(1.5, EXTERNAL), ok(2.0)],
        [Ending(0.0, None, 2, 2.0)],
    ),
    # A Retry-After client-go does not read (not whole seconds) is not retried.
    "an unreadable wait ends at the first stand-in": (
        [told(0.0), told(1.0, "soon"), ok(2.0)],
        [Ending(0.0, RETRY, 2, 1.0)],
    ),
    "the run ended first": ([told(0.0, "5"), ok(1.0)], [Ending(0.0, RETRY, 1, None)]),
    "a stopped sample stands for nothing": (
        [told(0.0), sample(1.0, error=ErrorClass.STOPPED), ok(1.1)],
        [Ending(0.0, None, 2, 1.1)],
    ),
}


@pytest.mark.parametrize(("samples", "endings"), CASES.values(), ids=CASES.keys())
def test_each_chain_ends_as_client_go_would_have(
    samples: list[Sample], endings: list[Ending]
) -> None:
    follower = RetryFollower()
    ended = [r for s in samples for r in follower.feed(s)]
    ended += follower.close(end_t=10.0)
    got = [Ending(r.sample.t, r.outcome, r.tries, r.by.t if r.by else None) for r in ended]
    assert sorted(got, key=lambda e: e.first) == endings


def test_the_tries_run_out_at_client_gos_maximum() -> None:
    follower = RetryFollower(max_tries=3)
    ended = [r for t in range(5) for r in follower.feed(told(float(t)))]
    first = [r for r in ended if r.sample.t == 0.0]
    assert [(r.outcome, r.tries, r.by and r.by.t) for r in first] == [(RETRY, 3, 2.0)]
    assert first[0].felt


def test_a_success_is_not_felt_and_says_how_long_the_client_waited() -> None:
    follower = RetryFollower()
    follower.feed(told(0.0, "2"))
    (ended,) = follower.feed(sample(2.0, dur=0.25))
    assert not ended.felt
    assert ended.waited == pytest.approx(2.25)


def test_a_reset_stand_in_is_felt() -> None:
    follower = RetryFollower()
    follower.feed(told(0.0))
    (ended,) = follower.feed(sample(1.0, error=RESET))
    assert ended.felt


@pytest.mark.parametrize(
    ("status", "value", "wait"),
    [(429, "1", 1.0), (503, "5", 5.0), (500, "3", 3.0), (503, "1.5", None), (503, "", None)],
)
def test_the_wait_is_read_back_from_the_detail_the_probe_wrote(
    status: int, value: str, wait: float | None
) -> None:
    answer = sample(0.0, error=RETRY, status=status, detail=retry_after_detail(status, value))
    assert retry_after_value(answer.detail) == value
    assert wait_of(answer) == wait


def test_no_other_class_waits() -> None:
    assert wait_of(sample(0.0, error=ErrorClass.HTTP_5XX, status=503, detail="HTTP 503")) is None
    assert wait_of(ok(0.0)) is None


# What a client felt of each interval (`FeltDisruption`, through the trackers' own wiring):
# the sequence, then per closed interval (start, end, forgiven, answers retried through).
FELT_CASES = {
    "every answer retried through: none of it felt": (
        [told(0.0), told(0.2), ok(0.4), ok(1.3)],
        [(0.0, 0.4, True, 2)],
    ),
    # The interval closes at 0.4, before any retry ends: it waits for them to be decided.
    # The refused request stands in for the first answer's retry, the success for the second's.
    "an answer whose retries failed: all of it felt": (
        [told(0.0), told(0.2), ok(0.4), sample(1.1, error=REFUSED), ok(1.3)],
        [(0.0, 0.4, False, 1), (1.1, 1.3, False, 0)],
    ),
    "a failure of another class joined it: felt": (
        [told(0.0), told(0.5), sample(0.2, error=REFUSED), ok(0.6), ok(2.0)],
        [(0.0, 0.6, False, 2)],
    ),
    "a wait client-go cannot read is no retry: felt": (
        [told(0.0, "soon"), ok(0.4), ok(2.0)],
        [(0.0, 0.4, False, 0)],
    ),
    "the run ends before the retry would go: felt": (
        [told(0.0, "5"), ok(0.4)],
        [(0.0, 0.4, False, 0)],
    ),
    "any other interval is felt whole, at once": (
        [sample(0.0, error=REFUSED), ok(0.4)],
        [(0.0, 0.4, False, 0)],
    ),
    # A retry that succeeds only after being told again is still a success for the client.
    "told again by the stand-in, then through": (
        [told(0.0), ok(0.3), told(1.0), ok(1.2), ok(2.0)],
        [(0.0, 0.3, True, 1), (1.0, 1.2, True, 1)],
    ),
}


@pytest.mark.parametrize(("samples", "intervals"), FELT_CASES.values(), ids=FELT_CASES.keys())
def test_what_a_client_felt_of_each_interval(
    samples: list[Sample], intervals: list[tuple[float, float, bool, int]]
) -> None:
    trackers = Trackers([STREAM])
    events = [e for s in samples for e in trackers.feed(s)]
    events += trackers.close(10.0, "2026-11-30T00:00:10.000000Z")
    felt = [e for e in events if isinstance(e, Felt)]
    got = [(f.interval.start_t, f.interval.end_t, f.forgiven, f.retried_through) for f in felt]
    assert got == intervals
    raw = sum(e.seconds for e in events if isinstance(e, Interval))
    assert sum(f.seconds for f in felt) == pytest.approx(
        raw - sum(f.interval.seconds for f in felt if f.forgiven)
    )


def test_an_interval_is_decided_once_the_last_retry_inside_it_ends() -> None:
    trackers = Trackers([STREAM])
    assert not [
        e for s in (told(0.0, "2"), ok(0.4)) for e in trackers.feed(s) if isinstance(e, Felt)
    ]
    assert not [e for e in trackers.feed(ok(1.0)) if isinstance(e, Felt)]  # before the wait
    (decided,) = [e for e in trackers.feed(ok(2.1)) if isinstance(e, Felt)]
    assert decided.forgiven
    assert decided.seconds == 0.0
