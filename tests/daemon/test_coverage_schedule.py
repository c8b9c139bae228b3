"""The gap limit against the real scheduler (`daemon.requests.scheduler`) on a fake clock: a
healthy jittered schedule, even with a worker whose kept connection stays busy, stays within
`GAP_LIMIT` mean gaps; an event loop blocked for a second does not, and its missed ticks are
counted due and skipped. This is what the limit's factor rests on (`core.coverage`)."""

from __future__ import annotations

import asyncio
import random

import pytest

from prober.core.coverage import GAP_LIMIT, CoverageTracker
from prober.core.models import ClosedBy, Window
from prober.daemon.requests.scheduler import StreamScheduler
from tests.daemon.test_scheduling import Source
from tests.factories import STREAM
from tests.support.clock import FakeClock, settle

INTERVAL = 0.1  # per worker; 2 workers: a mean gap of 50 ms
MEAN = INTERVAL / 2
RUN = 120.0  # seconds of ticks: 2400 jittered gaps


@pytest.mark.parametrize(
    ("busy_worker", "blocked", "within"),
    [(False, 0.0, True), (True, 0.0, True), (False, 1.0, False)],
    ids=["healthy", "one worker busy throughout", "event loop blocked 1 s"],
)
async def test_the_limit_holds_a_healthy_schedule_and_not_a_blocked_loop(
    busy_worker: bool, blocked: float, within: bool
) -> None:
    clock = FakeClock()  # run time 0 at 1000 s, as `Source.calls` counts it
    # A kept HTTP/1.1 connection that never answers: its worker skips every tick but its first.
    sources = [Source(clock, capacity=1 if busy_worker else 10**6), Source(clock, capacity=10**6)]
    skipped: list[tuple[float, int]] = []
    scheduler = StreamScheduler(
        STREAM,
        sources,
        interval=INTERVAL,
        clock=clock,
        emit=lambda _sample: None,
        on_skip=lambda _stream, _reason, n: skipped.append((clock.now - 1000.0, n)),
        rng=random.Random(50),
    )
    task = asyncio.create_task(scheduler.run())
    await clock.advance(RUN / 2)
    if blocked:
        await clock.jump(blocked)
        await settle()
    await clock.advance(RUN / 2)
    task.cancel()

    tracker = CoverageTracker([STREAM], horizon=1.0)
    tracker.scheduled(STREAM.name, 0.0, MEAN)
    tracker.opened("master-0", 1.0)  # as the daemon's first late answer would
    for at, count in skipped:
        tracker.skipped(STREAM.name, at, count)
    for sent in sorted(sources[0].calls + sources[1].calls):
        tracker.sent(STREAM.name, sent)
    window = Window("master-0", None, 70.0, 1.0, 1.0, 1.0, 1.0, ClosedBy.RECOVERED, RUN - 1, ())
    [record] = tracker.window(window) + tracker.close(RUN)
    [stream] = record.streams
    assert stream.gap is not None
    assert (stream.gap <= GAP_LIMIT * MEAN) is within, stream
    assert stream.due == stream.taken + stream.skipped
    assert stream.due >= 0.9 * (window.end_t - window.t0) / MEAN  # the window's ticks (jittered)
    if blocked:
        assert stream.gap >= blocked  # nothing went out while the loop was blocked
        assert stream.skipped >= blocked / MEAN - 1
    elif busy_worker:
        assert stream.gap <= 3 * MEAN  # two jittered gaps at most 1.5 mean each
    else:
        assert stream.gap <= 1.5 * MEAN  # one jittered gap
        assert stream.skipped == 0
