"""What client-go's reflector does next, given how its last step went: pure decisions, so the
watch streams (`daemon.watches.kind`) run exactly the loop an informer runs, and the tests walk it
step by step.

    LIST (resourceVersion=0) -> WATCH from the list's version, with bookmarks and a timeout
    drawn in [min_timeout, 2 x min_timeout)

A watch that ends (its timeout, the server closing it, a connection cut under it: client-go's
stream watcher reads EOF and unexpected EOF alike as a close) is watched again at once from
the last version seen, unless it was "very short" (under a second with no event), which
client-go treats as an error. A watch that could not start for a refused connection or a 429
is retried after a backoff, from the same version. A 410 (the version is gone), and any other
failure, end the round: after a backoff the reflector LISTs again (`wait.BackoffUntil` around
`ListAndWatch`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from prober.core.clientgo import Backoff, BackoffPolicy

MIN_WATCH_TIMEOUT = 300.0  # reflector's minWatchTimeout: timeoutSeconds in [5, 10) minutes
VERY_SHORT = 1.0  # seconds: a watch closed before this with no event is an error


class Step(StrEnum):
    LIST = "list"
    WATCH = "watch"


class Outcome(StrEnum):
    """How a LIST or a WATCH went, in client-go's terms."""

    OK = "ok"  # a LIST answered; a WATCH established, then closed (timeout, EOF, cut)
    REFUSED = "refused"  # the connection was refused
    TOO_MANY = "too_many"  # 429
    GONE = "gone"  # 410, or an ERROR event of 410
    FAILED = "failed"  # anything else: another status, an error event, a broken stream


@dataclass(frozen=True, slots=True)
class Next:
    step: Step
    wait: float  # seconds to wait first
    version: str  # the resourceVersion to watch from ("" for a LIST)
    timeout: float = 0.0  # a WATCH's timeoutSeconds
    relist_cause: str = ""  # why a LIST comes again ("" for the first one)


class Reflector:
    """Feed it each step's outcome; it says what comes next. `draw` gives uniform numbers in
    [0, 1) (the backoff's jitter, the watch timeout)."""

    def __init__(
        self,
        draw: Callable[[], float],
        policy: BackoffPolicy | None = None,
        min_timeout: float = MIN_WATCH_TIMEOUT,
    ) -> None:
        self.backoff = Backoff(policy or BackoffPolicy())
        self.min_timeout = min_timeout
        self.version = ""
        self._draw = draw

    def first(self) -> Next:
        return Next(Step.LIST, 0.0, "")

    def listed(self, outcome: Outcome, version: str, now: float) -> Next:
        """A LIST ended; `version` is its resourceVersion when it succeeded."""
        if outcome is Outcome.OK:
            self.version = version
            return self._watch(0.0)
        return self._relist(str(outcome), now)

    def watched(self, outcome: Outcome, *, events: int, lasted: float, now: float) -> Next:
        """A WATCH ended (or never started); what it delivered went to `note` first."""
        if outcome is Outcome.OK:
            if lasted < VERY_SHORT and events == 0:
                return self._relist("very-short", now)
            return self._watch(0.0)
        if outcome in (Outcome.REFUSED, Outcome.TOO_MANY):
            return self._watch(self.backoff.next(now, self._draw()))
        return self._relist(str(outcome), now)

    def note(self, version: str) -> None:
        """A watch delivered `version` (an event or a bookmark): the next watch starts there."""
        if version:
            self.version = version

    def _watch(self, wait: float) -> Next:
        timeout = float(int(self.min_timeout * (1.0 + self._draw())))  # whole seconds, as sent
        return Next(Step.WATCH, wait, self.version, timeout=timeout)

    def _relist(self, cause: str, now: float) -> Next:
        return Next(Step.LIST, self.backoff.next(now, self._draw()), "", relist_cause=cause)
