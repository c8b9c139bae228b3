"""The scheduler and the supervisor on a fake clock."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from structlog.testing import capture_logs

from prober.core.models import Sample
from prober.daemon.requests.scheduler import StreamScheduler
from prober.daemon.supervisor import Backoff, Supervisor
from tests.factories import STREAM, ok
from tests.support.clock import FakeClock, settle


class Source:
    """A worker whose answers the test hands out, in any order."""

    def __init__(self, clock: FakeClock, fail_on: int | None = None, capacity: int = 10) -> None:
        self.clock = clock
        self.capacity = capacity
        self.calls: list[float] = []
        self.pending: list[asyncio.Future[Sample]] = []
        self.fail_on = fail_on

    async def sample(self) -> Sample:
        self.calls.append(self.clock.now - 1000.0)
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise RuntimeError("a bug, not a network fault")
        future: asyncio.Future[Sample] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return await future

    def stop(self) -> None:
        """This source cannot give up on its own: the drain has to cancel it."""


def scheduler(clock: FakeClock, sources: list[Source], emitted: list, **kw) -> StreamScheduler:
    kw.setdefault("interval", 1.0)
    kw.setdefault("jitter", 0.0)
    return StreamScheduler(STREAM, sources, clock=clock, emit=emitted.append, **kw)


async def test_workers_are_staggered_and_slow_answers_never_delay_a_tick() -> None:
    clock = FakeClock()
    sources = [Source(clock), Source(clock)]
    task = asyncio.create_task(scheduler(clock, sources, []).run())
    await settle()
    await clock.advance(2.2)
    assert sources[0].calls == [0.0, 1.0, 2.0]
    assert sources[1].calls == [0.5, 1.5]  # phase interval / workers
    task.cancel()


async def test_samples_are_emitted_in_completion_order() -> None:
    clock = FakeClock()
    source, emitted = Source(clock), []
    task = asyncio.create_task(scheduler(clock, [source], emitted).run())
    await settle()
    await clock.advance(1.0)
    first, second = ok(0.0), ok(1.0)
    source.pending[1].set_result(second)
    source.pending[0].set_result(first)
    await settle()
    assert emitted == [second, first]
    task.cancel()


async def test_a_full_worker_skips_ticks_and_says_so_once() -> None:
    clock = FakeClock()
    source = Source(clock, capacity=2)
    skips: list[tuple[str, str, int]] = []
    sched = scheduler(clock, [source], [], on_skip=lambda s, r, n: skips.append((s.name, r, n)))
    with capture_logs() as logs:
        task = asyncio.create_task(sched.run())
        await settle()
        await clock.advance(4.0)
        assert source.calls == [0.0, 1.0]
        assert sched.skipped == {"max_in_flight": 3}
        source.pending[0].set_result(ok(0.0))
        await clock.advance(1.0)
    assert source.calls == [0.0, 1.0, 5.0]
    assert [entry["event"] for entry in logs] == ["ticks_skipped"]
    assert skips == [(STREAM.name, "max_in_flight", 1)] * 3
    task.cancel()


async def test_a_kept_connection_busy_with_a_request_skips_the_tick_never_queues() -> None:
    """A reused HTTP/1.1 worker (capacity 1) with an answer outstanding: its ticks are
    skipped as `busy`, the other worker keeps its own."""
    clock = FakeClock()
    slow, quick = Source(clock, capacity=1), Source(clock, capacity=1)
    sched = scheduler(clock, [slow, quick], [])
    task = asyncio.create_task(sched.run())
    await settle()
    await clock.advance(0.5)
    quick.pending[0].set_result(ok(0.5))
    await clock.advance(1.0)
    quick.pending[1].set_result(ok(1.5))
    await clock.advance(1.0)
    assert slow.calls == [0.0]  # its ticks at 1.0 and 2.0 found the connection busy
    assert quick.calls == [0.5, 1.5, 2.5]
    assert sched.skipped == {"busy": 2}
    assert sched.started == 4
    task.cancel()


async def test_gaps_are_jittered_around_the_mean_within_bounds() -> None:
    clock = FakeClock()
    source = Source(clock, capacity=1000)  # answers never come: capacity enough for all
    sched = scheduler(clock, [source], [], jitter=0.5, rng=random.Random(3))
    task = asyncio.create_task(sched.run())
    await settle()
    await clock.advance(400.0)
    gaps = [b - a for a, b in itertools.pairwise(source.calls)]
    assert min(gaps) >= 0.5 - 1e-9
    assert max(gaps) <= 1.5 + 1e-9
    assert len({round(g, 6) for g in gaps}) > len(gaps) / 2  # not a fixed period
    assert sum(gaps) / len(gaps) == pytest.approx(1.0, abs=0.05)
    task.cancel()


async def test_ticks_missed_while_the_loop_was_blocked_are_skipped_not_burst() -> None:
    clock = FakeClock()
    source = Source(clock)
    sched = scheduler(clock, [source], [])
    task = asyncio.create_task(sched.run())
    await settle()
    await clock.jump(5.5)
    await clock.advance(1.0)
    assert source.calls == [0.0, 5.5, 6.5]  # then on from where it is
    assert sched.skipped == {"behind": 4}  # the ticks due at 2, 3, 4 and 5
    task.cancel()


async def test_a_request_that_raises_crashes_the_stream_task() -> None:
    """And is counted, so that a sample lost to a bug at the stop (when the stream's task is
    cancelled before it can raise) is still accounted for in the `stopped` line."""
    clock = FakeClock()
    sched = scheduler(clock, [Source(clock, fail_on=2)], [])
    task = asyncio.create_task(sched.run())
    await settle()
    await clock.advance(2.0)
    with pytest.raises(RuntimeError, match="a bug"):
        await task
    assert (sched.started, sched.raised) == (2, 1)


async def test_drain_waits_for_answers_then_cancels_the_rest() -> None:
    clock = FakeClock()
    source, emitted = Source(clock), []
    sched = scheduler(clock, [source], emitted)
    task = asyncio.create_task(sched.run())
    await settle()
    await clock.advance(1.0)
    task.cancel()
    source.pending[0].set_result(ok(0.0))
    assert await sched.drain(0.01, grace=0.01) == 1
    assert len(emitted) == 1
    assert sched.in_flight == 0


async def test_a_failing_task_is_logged_by_name_and_restarted_with_backoff() -> None:
    clock = FakeClock()
    supervisor = Supervisor(clock, Backoff(initial=1, factor=2, maximum=4, reset_after=100))
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(clock.now - 1000.0)
        if len(starts) <= 4:
            raise RuntimeError(f"failure {len(starts)}")
        await asyncio.Event().wait()

    with capture_logs() as logs:
        supervisor.spawn("stream:kube-api-http2-internal-lb-new-connections", flaky)
        await settle()
        await clock.advance(20)
    assert starts == [0, 1, 3, 7, 11]
    failed = [e for e in logs if e["event"] == "task_failed"]
    assert {e["task"] for e in failed} == {"stream:kube-api-http2-internal-lb-new-connections"}
    assert [e["restart_in"] for e in failed] == [1, 2, 4, 4]
    assert next(e["error"] for e in failed) == "RuntimeError: failure 1"
    assert supervisor.failures["stream:kube-api-http2-internal-lb-new-connections"] == 4
    await supervisor.stop()


async def test_a_long_healthy_run_forgives_earlier_failures() -> None:
    clock = FakeClock()
    supervisor = Supervisor(clock, Backoff(initial=1, factor=2, maximum=30, reset_after=10))
    starts: list[float] = []

    async def once_in_a_while() -> None:
        starts.append(clock.now - 1000.0)
        await clock.sleep_until(clock.now + (50 if len(starts) == 3 else 0.5))
        raise RuntimeError("again")

    with capture_logs() as logs:
        supervisor.spawn("leases", once_in_a_while)
        await settle()
        await clock.advance(60)
    delays = [e["restart_in"] for e in logs if e["event"] == "task_failed"]
    assert delays[:4] == [1, 2, 1, 2]  # the third run lasted 50 s: back to the start
    await supervisor.stop()
