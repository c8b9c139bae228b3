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

With watch-list on (`watch_list=True`, client-go 1.35's default: `WatchListClient` in
`known_features.go`), each round syncs by one WATCH_LIST instead of the LIST (KEP-3157;
client-go v0.37.2 `tools/cache/reflector.go`, `ListAndWatchWithContext` and `watchList`):

    WATCH_LIST (sendInitialEvents=true, resourceVersionMatch=NotOlderThan, bookmarks,
    resourceVersion "" on the first, else the last synced) -> ADDED events -> the BOOKMARK
    annotated `k8s.io/initial-events-end: "true"` (`synced`) -> the same watch goes on

Before its marker, the attempt's end decides (`watchList`'s loop): a refused connection or a
429 backs off and sends the watch-list again; a 410 (or a version too large) forgets the
version and sends it again at once from ""; a watch that closed without the marker is sent
again at once from the same version (client-go logs "awaiting required bookmark event" every
10 s meanwhile: a stall); anything else, a "very short" watch included, is an error of the
attempt, and `ListAndWatch` falls back to a LIST at once (`fallback-<cause>`), then watches
from it. Versions the initial ADDED events carry are not kept: client-go keeps a version only
once an event other than ADDED came. A failure after the marker, or of the fallback LIST,
ends the round as above, and the next round syncs by watch-list again.
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
    WATCH_LIST = "watch_list"  # a watch that syncs: initial events, then the end marker


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
    relist_cause: str = ""  # why a LIST (or a WATCH_LIST) comes again ("" for the first one)


class Reflector:
    """Feed it each step's outcome; it says what comes next. `draw` gives uniform numbers in
    [0, 1) (the backoff's jitter, the watch timeout)."""

    def __init__(
        self,
        draw: Callable[[], float],
        policy: BackoffPolicy | None = None,
        min_timeout: float = MIN_WATCH_TIMEOUT,
        *,
        watch_list: bool = False,
    ) -> None:
        self.backoff = Backoff(policy or BackoffPolicy())
        self.min_timeout = min_timeout
        self.watch_list = watch_list
        self.version = ""
        self.syncing = False  # a WATCH_LIST is out whose end marker has not come
        self._unavailable = False  # the version was gone: sync from "" (most recent)
        self._draw = draw

    def first(self) -> Next:
        return self._sync(0.0, "") if self.watch_list else Next(Step.LIST, 0.0, "")

    def listed(self, outcome: Outcome, version: str, now: float) -> Next:
        """A LIST ended; `version` is its resourceVersion when it succeeded."""
        if outcome is Outcome.OK:
            self.version = version
            self._unavailable = False
            return self._watch(0.0)
        return self._relist(str(outcome), now)

    def watched(self, outcome: Outcome, *, events: int, lasted: float, now: float) -> Next:
        """A WATCH (or a WATCH_LIST) ended or never started; what it delivered went to `note`
        and `synced` first."""
        if self.syncing:
            return self._unsynced(outcome, events=events, lasted=lasted, now=now)
        if outcome is Outcome.OK:
            if lasted < VERY_SHORT and events == 0:
                return self._relist("very-short", now)
            return self._watch(0.0)
        if outcome in (Outcome.REFUSED, Outcome.TOO_MANY):
            return self._watch(self.backoff.next(now, self._draw()))
        return self._relist(str(outcome), now)

    def note(self, version: str) -> None:
        """A watch delivered `version` (an event or a bookmark): the next watch starts there.
        Not while a watch-list syncs: its versions count from the marker on."""
        if version and not self.syncing:
            self.version = version

    def synced(self, version: str) -> None:
        """The WATCH_LIST's end marker came, at `version`: the watch goes on from there."""
        self.syncing = False
        self._unavailable = False
        if version:
            self.version = version

    def _unsynced(self, outcome: Outcome, *, events: int, lasted: float, now: float) -> Next:
        """A WATCH_LIST ended, or never started, before its end marker (`watchList`)."""
        if outcome in (Outcome.REFUSED, Outcome.TOO_MANY):
            return self._sync(self.backoff.next(now, self._draw()), str(outcome))
        if outcome is Outcome.GONE:
            self._unavailable = True
            return self._sync(0.0, str(outcome))
        if outcome is Outcome.OK and not (lasted < VERY_SHORT and events == 0):
            return self._sync(0.0, "no-marker")
        self.syncing = False
        cause = "very-short" if outcome is Outcome.OK else str(outcome)
        return Next(Step.LIST, 0.0, "", relist_cause=f"fallback-{cause}")

    def _sync(self, wait: float, cause: str) -> Next:
        self.syncing = True
        version = "" if self._unavailable else self.version
        timeout = float(int(self.min_timeout * (1.0 + self._draw())))
        return Next(Step.WATCH_LIST, wait, version, timeout=timeout, relist_cause=cause)

    def _watch(self, wait: float) -> Next:
        timeout = float(int(self.min_timeout * (1.0 + self._draw())))  # whole seconds, as sent
        return Next(Step.WATCH, wait, self.version, timeout=timeout)

    def _relist(self, cause: str, now: float) -> Next:
        """The round ends: after a backoff, the next round syncs again."""
        wait = self.backoff.next(now, self._draw())
        if self.watch_list:
            return self._sync(wait, cause)
        return Next(Step.LIST, wait, "", relist_cause=cause)
