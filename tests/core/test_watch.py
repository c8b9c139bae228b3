"""The watch tracker, fed record sequences: establishments and doomed re-watches, ends by how,
time to re-establish, relists by cause, lag from the heartbeat's writes, blind intervals."""

from __future__ import annotations

import pytest

from prober.core.models import LB, Protocol
from prober.core.streamkind import KindStreamId
from prober.core.watch import Heartbeat, WatchAttempt, WatchEnd, WatchSeen, WatchTracker

STREAM = KindStreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, "watch")
NAME = STREAM.name


def attempt(t: float, step: str = "watch", outcome: str = "ok", **more: object) -> WatchAttempt:
    return WatchAttempt(t, STREAM, step, outcome, **more)  # type: ignore[arg-type]


def end(t: float, how: str, started: float = 0.0) -> WatchEnd:
    return WatchEnd(t, STREAM, started, how)


def write(t: float, ack: float | None, revision: int | None) -> Heartbeat:
    return Heartbeat(t, ack, revision)


def seen(t: float, revision: int) -> WatchSeen:
    return WatchSeen(t, STREAM, revision)


def track(*records: object, blind_after: float = 2.0, until: float = 100.0):
    tracker = WatchTracker(blind_after)
    for record in records:
        tracker.feed(record)  # type: ignore[arg-type]
    return tracker.close(until)[NAME]


def test_a_watch_cut_and_re_established_on_a_stopping_server_is_doomed() -> None:
    result = track(
        attempt(0.0, "list", version="10"),
        attempt(0.1, server="a", shutdown=False),
        end(20.0, "closed"),
        attempt(20.3, server="b", shutdown=True, dur=0.1),  # on a server already going away
        end(21.0, "closed"),
        attempt(22.5, outcome="refused"),
        attempt(24.0, server="c", shutdown=False),
    )
    assert (result.established, result.doomed) == (3, 1)
    assert dict(result.ends) == {"closed": 2}
    assert result.reestablish == [pytest.approx(0.4), pytest.approx(3.0)]
    assert dict(result.servers) == {"a": 1, "b": 1, "c": 1}


def test_relists_are_counted_by_cause() -> None:
    result = track(
        attempt(0.0, "list"),
        attempt(0.1),
        end(5.0, "gone"),
        attempt(5.8, "list", relist_cause="gone"),
        attempt(6.0),
        end(7.0, "ping"),
        attempt(8.0, "list", relist_cause="failed"),
    )
    assert dict(result.relists) == {"gone": 1, "failed": 1}
    assert dict(result.ends) == {"gone": 1, "ping": 1}


@pytest.mark.parametrize(
    ("records", "lags", "blind"),
    [
        # each write seen 0.1 s after its acknowledgement: never blind
        (
            [write(1.0, 1.05, 11), seen(1.15, 11), write(2.0, 2.05, 12), seen(2.15, 12)],
            [0.1, 0.1],
            [],
        ),
        # seen before the acknowledgement came back: lag 0 (the event left after the write)
        ([write(1.0, 1.2, 11), seen(1.1, 11)], [0.0], []),
        # ... and when the write's record comes after the event's (the writer's answer is
        # read after the watch's event): still lag 0, and the next write counts as ever
        ([seen(1.1, 11), write(1.0, 1.2, 11), write(2.0, 2.0, 12), seen(2.3, 12)], [0.0, 0.3], []),
        # three writes unseen, then a relist shows the newest: one blind spell, from the
        # first one's deadline
        (
            [write(1.0, 1.0, 11), write(2.0, 2.0, 12), write(3.0, 3.0, 13), seen(9.0, 13)],
            [8.0, 7.0, 6.0],
            [(3.0, 9.0)],
        ),
        # a write that failed makes no one blind: the writer's outage
        ([write(1.0, None, None), write(2.0, 2.0, 12), seen(2.5, 12)], [0.5], []),
        # a write never seen by the end: blind from its deadline to the end
        ([write(1.0, 1.0, 11), seen(1.2, 11), write(50.0, 50.0, 12)], [0.2], [(52.0, 100.0)]),
    ],
)
def test_lag_and_blind_intervals_from_the_heartbeat(records, lags, blind) -> None:
    result = track(*records)
    assert result.lags == [pytest.approx(lag) for lag in lags]
    assert result.blind == [(pytest.approx(a), pytest.approx(b)) for a, b in blind]
    assert result.blind_seconds == pytest.approx(sum(b - a for a, b in blind))


@pytest.mark.parametrize(
    ("records", "spans", "unrestored"),
    [
        pytest.param(
            [attempt(0.0, dur=0.5), end(10.0, "closed"), attempt(10.2, dur=0.1)],
            [(0.5, 10.0), (pytest.approx(10.3), None)], None, id="re-established",
        ),
        pytest.param(
            [attempt(0.0, dur=0.5), end(10.0, "reset"), attempt(11.0, outcome="refused")],
            [(0.5, 10.0)], 90.0, id="never-again",
        ),
        pytest.param(
            [attempt(0.0, dur=0.5), end(99.0, "stopped")],
            [(0.5, 99.0)], None, id="the-daemon's-stop-is-no-end-to-restore",
        ),
    ],
)  # fmt: skip
def test_spans_and_an_end_still_waiting_at_the_run_end(records, spans, unrestored) -> None:
    result = track(*records)
    assert result.spans == spans
    assert result.unrestored == unrestored
    assert [e.how for e in result.ended] == [r.how for r in records if isinstance(r, WatchEnd)]


def test_each_doomed_landing_is_kept_with_its_server() -> None:
    result = track(
        attempt(0.0, server="a", shutdown=False),
        end(5.0, "closed"),
        attempt(5.1, server="a", shutdown=True, elapsed=3.5),
        attempt(6.0, "list", server="a", shutdown=True),  # a LIST is no watch: never doomed
    )
    assert [(a.t, a.server, a.elapsed) for a, _ in result.doomed_at] == [(5.1, "a", 3.5)]


def test_a_doomed_landing_knows_when_its_connection_took_its_first_request() -> None:
    """A stream sends one request at a time: a new local address is a new connection."""
    result = track(
        attempt(0.0, "list", local="10.0.0.1:4000"),
        attempt(0.2, local="10.0.0.1:4000", server="a", shutdown=False),
        end(5.0, "closed"),
        attempt(5.1, local="10.0.0.1:4000", server="a", shutdown=True),  # kept: opened at 0
        end(6.0, "closed"),
        attempt(6.1, "list", local="10.0.0.1:4100", server="a", shutdown=True),
        attempt(6.3, local="10.0.0.1:4100", server="a", shutdown=True),  # a new one, at 6.1
        attempt(7.0, server="a", shutdown=True),  # no address: not known
    )
    assert [opened for _, opened in result.doomed_at] == [0.0, 6.1, None]
