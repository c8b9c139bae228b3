"""Replaying only the samples the Compactor keeps reproduces the trackers exactly."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from prober.core.clientgo import retry_after_detail
from prober.core.compaction import Compactor
from prober.core.connection_age import Attributed, ConnectionAgeTracker
from prober.core.disruption import DisruptionTracker
from prober.core.models import ErrorClass, Sample, Window
from prober.core.perceived import FeltDisruption, RetryFollower
from prober.core.shutdown import ShutdownTracker
from tests.factories import ok, sample
from tests.support.synthetic import stream_ids

STREAMS = stream_ids(4)
HOSTS = ["A", "B"]


def replay(samples: list[Sample], compactor: Compactor | None = None):
    """Feed the trackers; return their outputs and, with a compactor, what it kept."""
    disruption, shutdown = DisruptionTracker(), ShutdownTracker(grace=5.0)
    retries, felt, ages = RetryFollower(), FeltDisruption(), ConnectionAgeTracker()
    for stream in STREAMS:
        shutdown.add_stream(stream)
    outputs, kept = [], []
    for s in samples:
        windows = shutdown.feed(s)
        events = [*disruption.feed(s), *windows, *retries.feed(s)]
        events += felt.feed(s, events)
        for window in windows:
            if isinstance(window, Window):
                ages.closed(window)
        events += ages.feed(s)
        outputs += [_comparable(e) for e in events]
        if compactor is not None:
            kept += compactor.select(s, events, shutdown.open_hosts)
    intervals, windows = disruption.close(1000.0, "end"), shutdown.close(1000.0)
    for window in windows:
        ages.closed(window)
    closed = [*intervals, *windows, *retries.close(1000.0)]
    outputs += closed + felt.take(closed)
    outputs.append(ages.close(1000.0))
    return outputs, kept, shutdown.stragglers


def _comparable(event: object) -> object:
    """An answer a failure is put down to comes back `held` on replay: the same sample."""
    if isinstance(event, Attributed):
        return ("attributed", event.sample.audit_id, event.by.audit_id)
    return event


@st.composite
def requests(draw) -> Sample:
    t = draw(st.floats(0, 120, allow_nan=False))
    kinds = ["ok", "ok", "ready", "ready", "late", "fail", "missing", "told"]
    kind = draw(st.sampled_from(kinds))
    kw = {
        "stream": draw(st.sampled_from(STREAMS)),
        "dur": draw(st.floats(0.001, 3)),
        "delay": draw(st.sampled_from([5.0, 20.0])),
    }
    host = draw(st.sampled_from(HOSTS))
    made = _made(draw, kind, t, host, kw)
    # Over one of a few connections per stream (ports are reused), of any age; some sent
    # again after their kept connection was cut: the connection-age tracker's attributions.
    connection = {
        "local_port": draw(st.sampled_from([1000, 1001, 1002])),
        "connection_age": draw(st.sampled_from([None, 0.0, 1.5, 9.0, 30.0])),
        "reused": draw(st.sampled_from([True, True, False, None])),
    }
    if draw(st.integers(0, 9)) == 0:
        connection["retried"] = "closed_idle"
        connection["replaced_port"] = draw(st.sampled_from([1000, 1001, 1002]))
    return dataclasses.replace(made, **connection)


def _made(draw, kind: str, t: float, host: str, kw: dict) -> Sample:
    if kind == "ok":
        return ok(t, **kw)
    if kind == "ready":
        return sample(t, host=host, **kw)
    if kind == "late":
        return sample(t, host=host, late=True, elapsed=draw(st.integers(0, 30)), **kw)
    if kind == "told":  # wait and try again: the sample that stands in for it is kept
        wait = str(draw(st.integers(0, 5)))
        return sample(t, error=ErrorClass.RETRY_AFTER, status=429,
                      detail=retry_after_detail(429, wait), **kw)  # fmt: skip
    if kind == "missing":
        return sample(t, error=ErrorClass.HEADER_MISSING, **kw)
    return sample(t, error=draw(st.sampled_from(list(ErrorClass))), **kw)


@settings(max_examples=300, deadline=None)
@given(st.lists(requests(), max_size=120))
def test_replaying_kept_samples_gives_the_same_intervals_and_windows(requests) -> None:
    samples = sorted(requests, key=lambda s: s.end)  # completion order
    live, kept, live_stragglers = replay(samples, Compactor())
    replayed, _, replay_stragglers = replay(kept)
    assert replayed == live
    assert replay_stragglers == live_stragglers
    assert len(kept) <= len(samples)
    assert len({s.audit_id for s in kept}) == len(kept)  # nothing written twice


def test_a_late_failures_closer_that_is_also_its_witness_is_written_once() -> None:
    # Found by the property above: the success sent after the timeout and answered before it
    # both bounds the interval's start (the newest success) and closes it.
    samples = [ok(0.5, dur=0.25), sample(0.0, dur=1.0, error=ErrorClass.TIMEOUT)]
    live, kept, _ = replay(samples, Compactor())
    assert [s.audit_id for s in kept] == [samples[0].audit_id, samples[1].audit_id]
    assert replay(kept)[0] == live


def test_a_late_failures_closer_kept_when_it_came_is_not_written_again() -> None:
    # The closer closed an earlier interval when it came (so it was kept then); the timeout
    # sent before it and answered after it finds it in the history.
    samples = [
        sample(1.0, dur=0.1, error=ErrorClass.HTTP_5XX),
        ok(2.0, dur=0.1),
        sample(1.5, dur=5.0, error=ErrorClass.TIMEOUT),
    ]
    samples.sort(key=lambda s: s.end)
    live, kept, _ = replay(samples, Compactor())
    ids = [s.audit_id for s in kept]
    assert len(ids) == len(set(ids)) == 3
    assert replay(kept)[0] == live


def test_plain_successes_are_dropped_and_the_bound_on_t0_is_kept() -> None:
    samples = [ok(1), sample(2, host="A"), sample(3, host="A"), ok(4)]
    samples += [sample(5, host="A", late=True, elapsed=0)]
    _, kept, _ = replay(samples, Compactor())
    assert [(s.t, s.late, s.held) for s in kept] == [(3, False, True), (5, True, False)]


def test_a_late_timeout_keeps_the_success_that_closed_it() -> None:
    """The success sent after a timeout and answered before it closed the interval when the
    timeout arrived: the log holds it (held) before the failure, and the replay agrees."""
    samples = [ok(1.95), *[ok(2.0 + 0.05 * i) for i in range(1, 100)]]
    samples += [sample(2.0, error=ErrorClass.TIMEOUT, dur=5.0), ok(7.05)]
    live, kept, _ = replay(samples, Compactor())
    replayed, _, _ = replay(kept)
    assert replayed == live
    # The newest success rides along as ever (here it proves no start: sent after the failure).
    assert [(s.t, s.held) for s in kept] == [(6.95, True), (2.05, True), (2.0, False)]
