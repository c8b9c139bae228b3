"""Properties of the core over generated inputs (Hypothesis)."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from prober.core.disruption import DisruptionTracker
from prober.core.eventlog import decode, encode
from prober.core.header import ShutdownHeader
from prober.core.models import (
    LB,
    ClosedBy,
    Connection,
    ErrorClass,
    Interval,
    Protocol,
    RunRecord,
    Sample,
    StreamCounters,
    StreamId,
    Summary,
    Window,
    WindowStream,
)
from prober.core.shutdown import ShutdownTracker
from tests.factories import STREAM, sample
from tests.support.synthetic import HOST, StreamPlan, make_run, stream_ids

EPS = 1e-9

outcome = st.one_of(st.none(), st.sampled_from(list(ErrorClass)))


def assert_within(estimate: float, lo: float | None, hi: float | None) -> None:
    """Every estimate lies within its own bound, where the bound has an edge."""
    assert lo is None or lo <= estimate + EPS, (lo, estimate, hi)
    assert hi is None or estimate <= hi + EPS, (lo, estimate, hi)


@given(
    st.lists(
        st.tuples(st.floats(0, 100, allow_nan=False), st.floats(0, 6, allow_nan=False), outcome),
        max_size=80,
    )
)
def test_intervals_never_overlap_and_are_ordered(requests) -> None:
    # Requests sent at random times, reported in the order they finished.
    samples = sorted((sample(t, dur=d, error=e) for t, d, e in requests), key=lambda s: s.end)
    tracker = DisruptionTracker()
    intervals: list[Interval] = []
    for s in samples:
        intervals += [e for e in tracker.feed(s) if isinstance(e, Interval)]
    intervals += tracker.close(200.0, "end")
    for interval in intervals:
        assert interval.start_t <= interval.end_t
        assert interval.samples >= 1
        assert_within(interval.start_t, interval.start_lo, interval.start_hi)
        assert_within(interval.end_t, interval.end_lo, interval.end_hi)
    for before, after in itertools.pairwise(intervals):
        assert before.end_t <= after.start_t
    assert (
        tracker.seconds(STREAM.name) == sum(i.seconds for i in intervals)
        or abs(tracker.seconds(STREAM.name) - sum(i.seconds for i in intervals)) < 1e-6
    )
    failed = sum(1 for s in samples if s.failed)
    assert sum(i.samples for i in intervals) == failed


@st.composite
def runs(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    n_streams = draw(st.integers(1, 8))
    gap = draw(st.sampled_from([0.02, 0.05, 0.1, 0.25, 0.5, 1.0]))
    streams = stream_ids(n_streams)
    # One switch per LB: its rotation serves every stream through it, whatever the protocol.
    switch = {stream.lb: draw(st.floats(0, 40)) for stream in streams}
    plans = [
        StreamPlan(
            stream=stream,
            gap=gap,
            phase=draw(st.floats(0, gap, exclude_max=True)),
            switch_after=switch[stream.lb],
        )
        for stream in streams
    ]
    t0 = draw(st.floats(10, 20))
    max_dur = draw(st.sampled_from([0.001, 0.01, 0.05, 0.2]))
    return make_run(random.Random(seed), t0, plans, max_dur)


@settings(max_examples=150, deadline=None)
@given(runs())
def test_t0_is_bracketed_and_reaction_error_bounded_by_the_sampling_gap(run) -> None:
    tracker = ShutdownTracker()
    windows: list[Window] = []
    for s in run.samples:
        windows += [e for e in tracker.feed(s) if isinstance(e, Window)]
    windows += tracker.close(run.end)
    gap = run.plans[0].gap
    if not windows:
        # Every LB switched before any of its requests was served after T0.
        assert all(plan.switch_after <= gap + run.max_dur for plan in run.plans)
        return
    (window,) = windows  # one shutdown, one window
    assert window.host == HOST
    assert_within(window.t0, window.t0_lo, window.t0_hi)
    for ws in window.streams:
        if ws.reaction is not None:
            assert_within(ws.reaction, ws.reaction_lo, ws.reaction_hi)
    assert window.closed_by is ClosedBy.END
    assert window.t0_lo - EPS <= run.t0 <= window.t0_hi + EPS
    width = window.t0_hi - window.t0_lo
    if gap + run.max_dur < 0.5:
        # Dense sampling: T0 is pinned to within the gap, well under the header's 1 s.
        assert width <= 2 * (gap + run.max_dur) + EPS
    by_stream = {ws.stream: ws for ws in window.streams}
    for plan in run.plans:
        ws = by_stream[plan.stream.name]
        if ws.reaction is None:
            # No request of this stream was served after T0: it switched within one gap.
            assert plan.switch_after <= gap + run.max_dur
            continue
        error = ws.reaction - plan.switch_after
        # The LB switched within one gap after the last late request was sent (one gap plus
        # a request's duration when it switched right at T0), and t0 is off by at most half
        # the reported uncertainty.
        slack = gap if plan.switch_after >= gap else gap + run.max_dur
        assert -slack - width / 2 - EPS <= error <= width / 2 + EPS


finite = st.floats(allow_nan=False, allow_infinity=False)
# Counts as every reader holds them (int64: BigQuery, Prometheus); `core.strictjson` refuses
# integers of more than 30 digits, which no writer of ours writes.
counts = st.integers(0, 2**63 - 1)
text = st.text(max_size=20)
maybe = st.none().__or__
headers = st.builds(ShutdownHeader, st.booleans(), finite, finite, text)
# Any target, dashes and all: the name must still parse back into the same identity.
stream_identities = st.builds(
    StreamId,
    st.text(min_size=1, max_size=20),
    st.sampled_from(Protocol),
    st.sampled_from(LB),
    st.sampled_from(Connection),
)
samples = st.builds(
    Sample,
    ts=text,
    t=finite,
    dur=finite,
    stream_id=stream_identities,
    reused=maybe(st.booleans()),
    http_version=maybe(text),
    status=maybe(st.integers(-(2**63), 2**63 - 1)),
    error=maybe(st.sampled_from(ErrorClass)),
    detail=text,
    shutdown=maybe(headers),
    audit_id=text,
    local_port=maybe(st.integers(0, 65535)),
    peer=maybe(text),
    held=st.booleans(),
)
window_streams = st.builds(
    WindowStream,
    stream_identities,
    counts,
    maybe(finite),
    maybe(finite),
    maybe(finite),
    counts,
)
records = st.one_of(
    st.builds(
        RunRecord,
        text,
        text,
        text,
        text,
        st.dictionaries(text, st.lists(text, min_size=1).map(tuple), max_size=3),
    ),
    samples,
    st.builds(
        Interval,
        stream_identities,
        finite,
        finite,
        text,
        text,
        st.sampled_from(ErrorClass),
        text,
        counts,
    ),
    st.builds(
        Window,
        text,
        maybe(text),
        finite,
        finite,
        finite,
        finite,
        finite,
        st.sampled_from(ClosedBy),
        finite,
        st.lists(window_streams, max_size=4).map(tuple),
    ),
    st.builds(
        Summary,
        text,
        finite,
        st.lists(
            st.builds(
                StreamCounters,
                text,
                counts,
                counts,
                counts,
                finite,
                st.dictionaries(text, counts, max_size=4),
            ),
            max_size=3,
        ).map(tuple),
    ),
)


@given(records)
def test_codec_round_trips_every_record(record) -> None:
    assert decode(encode(record)) == record
