"""client-go's retry rules: the reflector's backoff, the REST Retry-After rule, and the
reflector's loop, step by step."""

from __future__ import annotations

import itertools

import pytest

from prober.core.clientgo import Backoff, BackoffPolicy, retry_after
from prober.core.reflector import Next, Outcome, Reflector, Step


def test_the_backoff_doubles_to_its_cap_and_resets_after_two_healthy_minutes() -> None:
    backoff = Backoff()
    waits = [backoff.next(now, 0.0) for now in range(8)]  # one second apart: no reset
    assert waits == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    assert backoff.next(7 + 120.5, 0.0) == 0.8  # healthy for over 2 minutes
    assert Backoff().next(0.0, 0.999) == pytest.approx(0.8 * 1.999)  # jitter 1.0: up to 2x


def test_a_policy_of_ones_own() -> None:
    backoff = Backoff(BackoffPolicy(initial=0.1, cap=0.3, factor=3.0, jitter=0.0))
    assert [backoff.next(t, 0.5) for t in range(3)] == [0.1, pytest.approx(0.3), 0.3]


@pytest.mark.parametrize(
    ("status", "headers", "wait"),
    [
        (429, {"retry-after": "5"}, 5.0),  # the apiserver's shutdown answer
        (503, {"retry-after": "1"}, 1.0),  # its wait group's, without retry-after mode
        (500, {"retry-after": "2"}, 2.0),
        (429, {}, None),  # no Retry-After: no retry
        (429, {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),  # seconds only
        (404, {"retry-after": "5"}, None),
        # Digits to str.isdigit, not to int(): a server's header must not raise.
        (429, {"retry-after": "\u00b2"}, None),
        (429, {"retry-after": "\u0661"}, None),
        (429, {"retry-after": "9" * 30}, None),
        (None, {}, None),  # no answer at all
    ],
)
def test_retry_after_as_checkwait(status: int | None, headers: dict[str, str], wait) -> None:
    assert retry_after(status, headers) == wait


def steps(draws: list[float]) -> Reflector:
    return Reflector(itertools.cycle(draws).__next__)


def test_list_then_watch_then_watch_again_from_the_last_version() -> None:
    reflector = steps([0.5])
    assert reflector.first() == Next(Step.LIST, 0.0, "")
    watch = reflector.listed(Outcome.OK, "100", now=0.0)
    assert watch == Next(Step.WATCH, 0.0, "100", timeout=450.0)  # 300 x 1.5
    reflector.note("107")
    again = reflector.watched(Outcome.OK, events=7, lasted=450.0, now=450.0)
    assert (again.step, again.wait, again.version) == (Step.WATCH, 0.0, "107")


@pytest.mark.parametrize(
    ("outcome", "events", "lasted", "step", "cause"),
    [
        (Outcome.REFUSED, 0, 0.0, Step.WATCH, ""),  # back off, watch again from the version
        (Outcome.TOO_MANY, 0, 0.0, Step.WATCH, ""),
        (Outcome.GONE, 3, 40.0, Step.LIST, "gone"),  # 410: list again
        (Outcome.FAILED, 3, 40.0, Step.LIST, "failed"),
        (Outcome.OK, 0, 0.2, Step.LIST, "very-short"),  # closed at once with nothing
        (Outcome.OK, 1, 0.2, Step.WATCH, ""),  # short, but it delivered
    ],
)
def test_what_follows_a_watch(
    outcome: Outcome, events: int, lasted: float, step: Step, cause: str
) -> None:
    reflector = steps([0.0])
    reflector.listed(Outcome.OK, "100", now=0.0)
    after = reflector.watched(outcome, events=events, lasted=lasted, now=10.0)
    assert (after.step, after.relist_cause) == (step, cause)
    backs_off = outcome is not Outcome.OK or cause == "very-short"
    assert after.wait == (0.8 if backs_off else 0.0)
    if step is Step.WATCH:
        assert after.version == "100"


def test_a_failed_list_is_tried_again_after_a_growing_backoff() -> None:
    reflector = steps([0.0])
    waits = [reflector.listed(Outcome.REFUSED, "", now=float(t)).wait for t in range(3)]
    assert waits == [0.8, 1.6, 3.2]
