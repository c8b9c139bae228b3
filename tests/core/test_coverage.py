"""CoverageTracker: ticks (sent, skipped), the schedule and closed windows in; per window and
stream the ticks due and taken and the worst gap for its schedule out."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from prober.core.coverage import GAP_LIMIT, KEEP, Coverage, CoverageTracker
from prober.core.models import ClosedBy, StreamId, Window

STREAM = StreamId.parse("kube-api-http1-internal-lb-new-connections")
OTHER = StreamId.parse("kube-api-http2-internal-lb-reused-connections")
HORIZON = 5.0


def window(t0: float, end_t: float, host: str = "master-0") -> Window:
    return Window(host, None, 20.0, t0, t0, t0, t0, ClosedBy.RECOVERED, end_t, ())


def every(start: float, stop: float, gap: float) -> list[float]:
    count = round((stop - start) / gap)
    return [round(start + i * gap, 6) for i in range(count + 1)]


@dataclass
class Case:
    sends: list[float]
    due: int
    taken: int
    gap: float
    gap_start: float
    scheduled: float
    skips: list[tuple[float, int]] = field(default_factory=list)
    paces: list[tuple[float, float]] = field(default_factory=list)  # (from t, mean gap)


CASES = {
    # 10.0..20.0 every 0.05 s: 201 ticks inside, none missed; jitter-free gaps of one mean,
    # of which the first (from the send before T0) is named.
    "whole": Case(every(0.0, 30.0, 0.05), 201, 201, 0.05, 9.95, 0.05),
    # A paused daemon: nothing sent 12.0..15.0, the missed ticks counted `behind` at 15.0.
    "paused": Case(
        [t for t in every(0.0, 30.0, 0.05) if not 12.0 < t < 15.0],
        201,
        142,
        3.0,
        12.0,
        0.05,
        skips=[(15.0, 59)],
    ),
    # At the quiet rate inside the window (the pacer let the stream rest): 1 s gaps are its
    # schedule, so the worst for its schedule is still one mean.
    "resting": Case(every(0.0, 30.0, 1.0), 11, 11, 1.0, 9.0, 1.0, paces=[(0.0, 1.0)]),
    # The rate changes from quiet to window at 10.5: the gap over the change is judged by the
    # longer schedule, so the worst is a window gap 3 times its mean at 15.0.
    "pace change": Case(
        sorted({*every(0.0, 10.0, 1.0), *every(10.5, 15.0, 0.05), *every(15.15, 30.0, 0.05)}),
        1 + 91 + 98,
        1 + 91 + 98,
        0.15,
        15.0,
        0.05,
        paces=[(0.0, 1.0), (10.5, 0.05)],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_coverage_of_one_window(case: Case) -> None:
    tracker = CoverageTracker([STREAM], HORIZON)
    for t, gap in case.paces or [(0.0, 0.05)]:
        tracker.scheduled(STREAM.name, t, gap)
    skips = sorted(case.skips)
    records: list[Coverage] = []
    closed = False
    for t in case.sends:
        while skips and skips[0][0] <= t:
            tracker.skipped(STREAM.name, *skips.pop(0))
        if t >= 20.0 and not closed:  # the window closes as the run goes on
            records += tracker.window(window(10.0, 20.0))
            closed = True
        records += tracker.sent(STREAM.name, t)
    [record] = records  # made once the horizon passed its end, before the run's
    [stream] = record.streams
    assert (stream.due, stream.taken, stream.skipped) == (
        case.due,
        case.taken,
        case.due - case.taken,
    )
    assert (stream.gap, stream.gap_start, stream.scheduled) == pytest.approx(
        (case.gap, case.gap_start, case.scheduled)
    )
    assert stream.gap_end == pytest.approx(case.gap_start + case.gap)


def test_completion_order_and_a_silent_stream() -> None:
    """Sends arrive out of order; a stream that sends nothing after the window has its gap
    run to the end of the run, and both are counted only at the close."""
    tracker = CoverageTracker([STREAM, OTHER], HORIZON)
    for stream in (STREAM, OTHER):
        tracker.scheduled(stream.name, 0.0, 0.5)
    for t in [9.0, 10.5, 10.0, 11.0, 12.0]:
        tracker.sent(STREAM.name, t)
    tracker.sent(OTHER.name, 9.5)
    assert tracker.window(window(10.0, 11.5)) == []  # 11.5 is not yet past the horizon
    [record] = tracker.close(13.0)
    mine, silent = record.streams
    assert (mine.due, mine.taken, mine.gap, mine.gap_start) == (3, 3, 1.0, 9.0)
    assert (silent.due, silent.taken, silent.gap, silent.gap_start, silent.gap_end) == (
        0,
        0,
        3.5,
        9.5,
        13.0,
    )
    assert silent.share is None
    assert silent.limit == GAP_LIMIT * 0.5


def test_a_same_node_window_is_not_counted_twice() -> None:
    tracker = CoverageTracker([STREAM], HORIZON)
    tracker.sent(STREAM.name, 1.0)
    same = Window("master-0", None, 20.0, 0.0, 0.0, 0.0, 0.0, ClosedBy.END, 2.0, (), True)
    assert tracker.window(same) == []
    assert tracker.close(3.0) == []


def test_a_long_quiet_run_keeps_only_the_recent_ticks() -> None:
    """With no window open, what lies more than KEEP behind the newest send is let go; a
    window opened later is still counted whole."""
    tracker = CoverageTracker([STREAM], HORIZON)
    tracker.scheduled(STREAM.name, 0.0, 1.0)
    for t in range(3600):
        tracker.sent(STREAM.name, float(t))
    kept = tracker._streams[STREAM.name].sends
    assert kept[0] >= 3599 - 2 * KEEP
    tracker.opened("master-0", 3600.0)
    for t in range(3600, 3700):
        tracker.sent(STREAM.name, float(t))
    [record] = tracker.window(window(3600.0, 3650.0)) + tracker.close(3700.0)
    [stream] = record.streams
    assert (stream.due, stream.taken, stream.gap) == (51, 51, 1.0)
