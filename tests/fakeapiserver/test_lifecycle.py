"""Graceful termination phases under a manual clock: order, timing, and what each phase asks
of the server, in both retry-after modes."""

from __future__ import annotations

import asyncio

import pytest

from prober.fakeapiserver.lifecycle import Lifecycle, Signal, SignalTime, Timing
from tests.support.clock import FakeClock


class RecordingDrainer:
    """The server side of the lifecycle, recording what it was asked and when."""

    def __init__(self, clock: FakeClock, watches: int = 0) -> None:
        self.clock = clock
        self.calls: list[tuple[str, float]] = []
        self.in_flight = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.watches = watches
        self.connections_closed = asyncio.Event()
        self.connections_closed.set()

    def stop_listening(self) -> None:
        self.calls.append(("stop_listening", self.clock.monotonic()))

    async def wait_requests_drained(self) -> None:
        await self.idle.wait()

    def open_watches(self) -> int:
        return self.watches

    def end_watches(self, count: int | None) -> None:
        ended = self.watches if count is None else min(count, self.watches)
        self.watches -= ended
        if ended:
            self.calls.append((f"end_watches {ended}", self.clock.monotonic()))

    async def wait_connections_closed(self) -> None:
        await self.connections_closed.wait()

    def abort_connections(self) -> None:
        self.calls.append(("abort", self.clock.monotonic()))


def make(timing: Timing, watches: int = 0) -> tuple[FakeClock, Lifecycle, RecordingDrainer, list]:
    clock = FakeClock(start=100.0)
    fired: list[tuple[Signal, float, str]] = []

    def listener(signal: Signal, stamp: SignalTime, trigger: str) -> None:
        fired.append((signal, stamp.mono, trigger))

    return clock, Lifecycle(timing, clock, listener), RecordingDrainer(clock, watches), fired


RETRY_AFTER_ORDER = [
    Signal.SHUTDOWN_INITIATED,
    Signal.PRE_SHUTDOWN_HOOKS_FINISHED,
    Signal.AFTER_SHUTDOWN_DELAY,
    Signal.NOT_ACCEPTING_NEW_REQUEST,
    Signal.IN_FLIGHT_REQUESTS_DRAINED,
    Signal.HTTP_SERVER_STOPPED_LISTENING,
    Signal.TERMINATION_FINISHED,
]
NO_RETRY_AFTER_ORDER = [
    Signal.SHUTDOWN_INITIATED,
    Signal.PRE_SHUTDOWN_HOOKS_FINISHED,
    Signal.AFTER_SHUTDOWN_DELAY,
    Signal.NOT_ACCEPTING_NEW_REQUEST,
    Signal.HTTP_SERVER_STOPPED_LISTENING,
    Signal.IN_FLIGHT_REQUESTS_DRAINED,
    Signal.TERMINATION_FINISHED,
]


@pytest.mark.parametrize(
    ("send_retry_after", "order"),
    [(True, RETRY_AFTER_ORDER), (False, NO_RETRY_AFTER_ORDER)],
)
async def test_signals_fire_in_upstream_order_after_the_delay(
    send_retry_after: bool, order: list[Signal]
) -> None:
    clock, lifecycle, drainer, fired = make(Timing(delay=70.0, send_retry_after=send_retry_after))
    task = asyncio.create_task(lifecycle.run(drainer))
    await clock.advance(5)
    assert fired == []
    assert lifecycle.initiate("SIGTERM")
    assert not lifecycle.initiate("SIGTERM"), "a second trigger changes nothing"
    await clock.advance(69.999)
    assert [s for s, _, _ in fired] == order[:2]
    assert not lifecycle.not_accepting
    await clock.advance(0.001)
    await asyncio.wait_for(task, 1)
    assert [s for s, _, _ in fired] == order
    times = {signal: mono for signal, mono, _ in fired}
    assert times[Signal.SHUTDOWN_INITIATED] == 105.0
    assert times[Signal.AFTER_SHUTDOWN_DELAY] == pytest.approx(175.0)
    assert times[Signal.TERMINATION_FINISHED] == pytest.approx(175.0)
    assert fired[0][2] == "SIGTERM"
    assert drainer.calls == [("stop_listening", pytest.approx(175.0))]


async def test_retry_after_phase_lasts_until_in_flight_requests_drain() -> None:
    clock, lifecycle, drainer, _fired = make(Timing(delay=10.0))
    drainer.idle.clear()
    task = asyncio.create_task(lifecycle.run(drainer))
    lifecycle.initiate("api")
    await clock.advance(10)
    assert lifecycle.not_accepting
    assert not lifecycle.stopped_listening
    await clock.advance(7)
    assert not lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)
    drainer.idle.set()
    await clock.advance(0)
    await asyncio.wait_for(task, 1)
    assert lifecycle.times[Signal.IN_FLIGHT_REQUESTS_DRAINED].mono == pytest.approx(117.0)
    assert lifecycle.times[Signal.HTTP_SERVER_STOPPED_LISTENING].mono == pytest.approx(117.0)


async def test_without_retry_after_the_listener_closes_at_the_delay_despite_requests() -> None:
    clock, lifecycle, drainer, _ = make(Timing(delay=10.0, send_retry_after=False))
    drainer.idle.clear()
    task = asyncio.create_task(lifecycle.run(drainer))
    lifecycle.initiate("api")
    await clock.advance(10)
    assert lifecycle.stopped_listening
    assert not lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)
    drainer.idle.set()
    await clock.advance(0)
    await asyncio.wait_for(task, 1)


async def test_stuck_requests_and_connections_are_bounded_by_the_request_timeout() -> None:
    clock, lifecycle, drainer, _ = make(Timing(delay=1.0, request_timeout=60.0))
    drainer.idle.clear()
    drainer.connections_closed.clear()
    task = asyncio.create_task(lifecycle.run(drainer))
    lifecycle.initiate("api")
    await clock.advance(1 + 59.9)
    assert not lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)
    await clock.advance(0.1)
    assert lifecycle.signaled(Signal.IN_FLIGHT_REQUESTS_DRAINED)
    await clock.advance(60)
    await asyncio.wait_for(task, 1)
    assert ("abort", pytest.approx(121.0 + 100.0)) in drainer.calls


@pytest.mark.parametrize(
    ("watches", "grace", "min_qps", "drained_after", "left"),
    [
        (0, 10.0, 200.0, 0.0, 0),  # nothing to drain
        (5, 0.0, 200.0, 0.0, 5),  # no grace period: none ends cleanly; all are cut later
        (4, 10.0, 1.0, 3.0, 0),  # floor 1/s: one at once, then one per second
        (4, 2.0, 1.0, 1.5, 0),  # 4 watches / 2 s = 2 per second
        (3, 10.0, 200.0, 0.0, 0),  # upstream's floor: 200 per second
    ],
)
async def test_watches_drain_at_the_rate_within_the_grace_period(
    watches: int, grace: float, min_qps: float, drained_after: float, left: int
) -> None:
    timing = Timing(delay=0.0, watch_grace=grace, watch_min_qps=min_qps)
    clock, lifecycle, drainer, _ = make(timing, watches=watches)
    task = asyncio.create_task(lifecycle.run(drainer))
    lifecycle.initiate("api")
    for _ in range(50):  # let the sequence reach the watch drain before time moves
        await asyncio.sleep(0)
    for _ in range(100):  # steps of 1/8 s are exact in binary floating point
        if task.done():
            break
        await clock.advance(0.125)
    await asyncio.wait_for(task, 1)
    assert drainer.watches == left
    drained = lifecycle.times[Signal.IN_FLIGHT_REQUESTS_DRAINED].mono - 100.0
    assert drained == pytest.approx(drained_after, abs=0.13)


@pytest.mark.parametrize(
    ("accepted_after", "late"),
    [(-1.0, False), (0.0, False), (7.9, False), (8.0, False), (8.01, True), (12.0, True)],
)
def test_connections_accepted_after_80_percent_of_the_delay_are_late(
    accepted_after: float, late: bool
) -> None:
    clock, lifecycle, _, _ = make(Timing(delay=10.0))
    assert not lifecycle.is_late(clock.monotonic())
    lifecycle.initiate("api")
    assert lifecycle.is_late(100.0 + accepted_after) is late


def test_elapsed_and_threshold() -> None:
    _clock, lifecycle, _, _ = make(Timing(delay=10.0))
    assert lifecycle.elapsed(150.0) == 0.0
    lifecycle.initiate("api")
    assert lifecycle.elapsed(108.5) == 8.5
    assert lifecycle.threshold_percent(108.5) == 85
    assert lifecycle.threshold_percent(99.0) == 0
    _, no_delay, _, _ = make(Timing(delay=0.0))
    no_delay.initiate("api")
    assert no_delay.threshold_percent(100.0) == 100
