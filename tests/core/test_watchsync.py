"""Watch-list syncs and stalls from the records alone (`core.watchsync`), as tables of what a
stream recorded and what its `SyncResult` says."""

from __future__ import annotations

import pytest

from prober.core.models import LB, Protocol
from prober.core.streamkind import KindStreamId
from prober.core.watch import WatchAttempt, WatchTracker
from prober.core.watchsync import Stall, SyncResult, WatchSync, is_end_marker, not_ready

STREAM = KindStreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, "watch")


def sync(started: float, t: float, *, synced: bool, head: float = 0.1, how: str = "") -> WatchSync:
    return WatchSync(t, STREAM, started, synced, head=head, stall_after=10.0, how=how)


@pytest.mark.parametrize(
    ("record", "times", "stalls", "unsynced"),
    [
        (sync(1.0, 1.3, synced=True), [0.3], [], {}),  # a sync in 0.3 s
        (sync(1.0, 11.0, synced=True), [10.0], [], {}),  # at the threshold: not yet a stall
        (
            sync(1.0, 13.5, synced=True, head=0.5),  # a late marker: a stall that synced
            [12.5],
            [Stall(1.0, 12.5, 12.0, 12.5, True)],
            {},
        ),
        (
            sync(2.0, 302.0, synced=False, how="timeout"),  # never a marker: until the end
            [],
            [Stall(2.0, 300.0, 299.9, 300.0, False, "timeout")],
            {"timeout": 1},
        ),
        (sync(2.0, 4.0, synced=False, how="reset"), [], [], {"reset": 1}),  # short, unsynced
    ],
)
def test_syncs_and_stalls(
    record: WatchSync, times: list[float], stalls: list[Stall], unsynced: dict[str, int]
) -> None:
    result = SyncResult()
    result.add(record)
    assert result.times == pytest.approx(times)
    assert result.stalls == stalls
    assert dict(result.unsynced) == unsynced


def test_the_tracker_counts_syncs_by_list_fallbacks_and_a_caches_429s_apart() -> None:
    tracker = WatchTracker()
    feed = [
        WatchAttempt(0.0, STREAM, "watch_list", "too_many", 429, shutdown=False),  # KEP-4568
        WatchAttempt(0.1, STREAM, "watch_list", "too_many", 429, shutdown=True),  # a drain's
        WatchAttempt(0.9, STREAM, "watch_list", "failed", 500, shutdown=False),
        WatchAttempt(1.0, STREAM, "list", "ok", 200, relist_cause="fallback-failed"),
        WatchAttempt(1.1, STREAM, "watch", "ok", 200, shutdown=False),
        sync(5.0, 5.2, synced=True),
    ]
    for record in feed:
        tracker.feed(record)
    syncs = tracker.stream(STREAM.name).syncs
    assert (syncs.listed, dict(syncs.fallbacks), syncs.not_ready) == (1, {"failed": 1}, 1)
    assert syncs.times == pytest.approx([0.2])
    assert not_ready("too_many", None)
    assert not not_ready("too_many", True)


@pytest.mark.parametrize(
    ("event", "marker"),
    [
        ({"type": "BOOKMARK", "object": {"metadata": {"annotations": {
            "k8s.io/initial-events-end": "true"}}}}, True),
        ({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}}, False),
        ({"type": "ADDED", "object": {"metadata": {"annotations": {
            "k8s.io/initial-events-end": "true"}}}}, False),
        ({"type": "BOOKMARK", "object": {"metadata": {"annotations": {
            "k8s.io/initial-events-end": "false"}}}}, False),
        ({"type": "BOOKMARK", "object": None}, False),
        ([], False),
    ],
)  # fmt: skip
def test_only_an_annotated_bookmark_ends_the_initial_events(event: object, marker: bool) -> None:
    assert is_end_marker(event) is marker
