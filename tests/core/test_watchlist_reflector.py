"""The reflector's watch-list steps (client-go 1.35's default, KEP-3157), walked as tables of
what happens and what client-go's `watchList` and `ListAndWatchWithContext` do next."""

from __future__ import annotations

import itertools

import pytest

from prober.core.reflector import Next, Outcome, Reflector, Step


def watch_list(draws: list[float]) -> Reflector:
    return Reflector(itertools.cycle(draws).__next__, watch_list=True)


def test_a_first_sync_is_a_watch_list_from_the_most_recent_version() -> None:
    reflector = watch_list([0.5])
    assert reflector.first() == Next(Step.WATCH_LIST, 0.0, "", timeout=450.0)
    assert reflector.syncing


def test_the_marker_syncs_and_the_same_watch_goes_on_from_its_version() -> None:
    reflector = watch_list([0.0])
    reflector.first()
    reflector.note("41")  # an initial ADDED event: not kept before the marker
    assert reflector.version == ""
    reflector.synced("42")
    assert (reflector.syncing, reflector.version) == (False, "42")
    reflector.note("43")
    after = reflector.watched(Outcome.OK, events=3, lasted=400.0, now=400.0)
    assert (after.step, after.version) == (Step.WATCH, "43")  # a plain re-watch, as client-go


@pytest.mark.parametrize(
    ("outcome", "events", "lasted", "then"),
    [
        (Outcome.REFUSED, 0, 0.0, (Step.WATCH_LIST, "refused", 0.8)),  # back off, sync again
        (Outcome.TOO_MANY, 0, 0.0, (Step.WATCH_LIST, "too_many", 0.8)),  # KEP-4568's 429
        (Outcome.GONE, 0, 0.0, (Step.WATCH_LIST, "gone", 0.0)),  # again at once, from ""
        (Outcome.OK, 2, 30.0, (Step.WATCH_LIST, "no-marker", 0.0)),  # closed unsynced: again
        (Outcome.OK, 0, 0.2, (Step.LIST, "fallback-very-short", 0.0)),  # an error: LIST
        (Outcome.FAILED, 0, 0.0, (Step.LIST, "fallback-failed", 0.0)),  # 500, 403, a cut start
        (Outcome.FAILED, 5, 12.0, (Step.LIST, "fallback-failed", 0.0)),  # an ERROR event
    ],
)
def test_what_follows_a_watch_list_before_its_marker(
    outcome: Outcome, events: int, lasted: float, then: tuple[Step, str, float]
) -> None:
    reflector = watch_list([0.0])
    reflector.first()
    after = reflector.watched(outcome, events=events, lasted=lasted, now=10.0)
    assert (after.step, after.relist_cause, after.wait) == then
    assert reflector.syncing == (then[0] is Step.WATCH_LIST)


def test_a_fallback_list_is_watched_from_and_the_next_round_syncs_by_watch_list() -> None:
    reflector = watch_list([0.0])
    reflector.first()
    fallback = reflector.watched(Outcome.FAILED, events=0, lasted=0.0, now=1.0)
    assert fallback.step is Step.LIST
    watch = reflector.listed(Outcome.OK, "100", now=1.1)
    assert (watch.step, watch.version) == (Step.WATCH, "100")
    again = reflector.watched(Outcome.GONE, events=1, lasted=50.0, now=60.0)
    assert (again.step, again.version, again.relist_cause) == (Step.WATCH_LIST, "100", "gone")
    assert again.wait == 0.8  # the round's backoff, as before a LIST


def test_a_gone_version_is_forgotten_until_a_sync_succeeds() -> None:
    reflector = watch_list([0.0])
    reflector.first()
    reflector.synced("100")
    reflector.watched(Outcome.GONE, events=0, lasted=30.0, now=30.0)  # the round ends
    stale = reflector.watched(Outcome.GONE, events=0, lasted=0.0, now=31.0)  # sync from 100
    assert (stale.step, stale.version) == (Step.WATCH_LIST, "")
    reflector.synced("180")
    reflector.watched(Outcome.FAILED, events=1, lasted=30.0, now=61.0)
    assert reflector.watched(Outcome.OK, events=0, lasted=5.0, now=62.0).version == "180"


def test_a_watch_list_that_never_syncs_is_sent_again_and_again() -> None:
    reflector = watch_list([0.0])
    reflector.first()
    for t in range(3):
        after = reflector.watched(Outcome.OK, events=1, lasted=300.0, now=300.0 * (t + 1))
        assert (after.step, after.wait, after.relist_cause) == (Step.WATCH_LIST, 0.0, "no-marker")


def test_list_mode_keeps_listing_first() -> None:
    reflector = Reflector(itertools.cycle([0.0]).__next__)
    assert reflector.first().step is Step.LIST
    reflector.listed(Outcome.OK, "5", now=0.0)
    assert reflector.watched(Outcome.GONE, events=0, lasted=9.0, now=9.0).step is Step.LIST
