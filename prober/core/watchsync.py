"""Watch-list syncs, the pure side: how long each watch stream took to sync, and its stalls.

A watch stream syncs as client-go 1.35 does by default (`core.reflector`, KEP-3157): one watch
with `sendInitialEvents=true`, whose initial ADDED events end at a BOOKMARK annotated
`k8s.io/initial-events-end: "true"`; on an error of that attempt client-go falls back to a
LIST. Each watch-list whose stream started leaves one `WatchSync` record: when its marker
came, or when the watch ended (or the daemon's stop cut it) before the marker did.

- A *sync* is timed from its request to its marker (`WatchSync.length` with `synced`).
- A *stall* is a watch-list whose marker had not come `stall_after` after its request
  (client-go's `initialEventsEndBookmarkTicker` logs "awaiting required bookmark event"
  every 10 s, scaled as the other client-go timers): timed from the request until the marker
  or the watch's end. The request reached the server at most `head` after it was sent (the
  response's head came back by then) and its end came back no earlier than the server sent
  it, so the server's own length lies in [length - head, length] (`Stall.lo`, `Stall.hi`).

A restarted server answers LIST and WATCH 429 until its watch cache is ready (KEP-4568):
client-go backs off and retries; such an answer from a server not shutting down is counted
apart (`not_ready`), never as a failure of the watch.

`SyncResult` is what a stream's records add up to; `core.watch.WatchTracker` keeps one per
stream, fed the `WatchSync` records and the LISTs (a sync by LIST: the fallback, or list mode).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from prober.core.streamkind import KindStreamId, kind_identity

STALL_AFTER = 10.0  # client-go's initialEventsEndBookmarkTicker interval, seconds
END_MARKER = "k8s.io/initial-events-end"  # metav1.InitialEventsAnnotationKey
FALLBACK = "fallback-"  # the relist cause's prefix of a LIST that stands in for a watch-list


@dataclass(frozen=True, slots=True)
class WatchSync:
    KIND: ClassVar[str] = "watch_sync"
    t: float  # run time the marker came, or the watch-list ended without it
    stream_id: KindStreamId = field(metadata=kind_identity("watch"))
    started: float  # run time its request was sent
    synced: bool  # the end marker came
    events: int = 0  # initial events read before the marker (or the end)
    head: float = 0.0  # seconds from the request to its response's head
    stall_after: float = STALL_AFTER  # the daemon's threshold, so that a replay judges the same
    how: str = ""  # not synced: how the watch ended (`core.watch.END_HOWS`)
    server: str | None = None  # the APIServerID that answered

    @property
    def stream(self) -> str:
        return self.stream_id.name

    @property
    def length(self) -> float:
        return self.t - self.started

    @property
    def stalled(self) -> bool:
        return self.length > self.stall_after


@dataclass(frozen=True, slots=True)
class Stall:
    """A watch-list whose marker was `stall_after` late: from `start` (its request, run time)
    for `length` seconds, the server's own length in [lo, hi]; `synced`: the marker came in
    the end (else the watch ended first)."""

    start: float
    length: float
    lo: float
    hi: float
    synced: bool
    how: str = ""
    server: str | None = None


@dataclass(slots=True)
class SyncResult:
    """One watch stream's syncs."""

    times: list[float] = field(default_factory=list)  # watch-list syncs: request to marker
    listed: int = 0  # syncs by LIST (client-go's fallback, or `watches: list`)
    fallbacks: Counter[str] = field(default_factory=Counter)  # fallback LISTs by cause
    unsynced: Counter[str] = field(default_factory=Counter)  # watch-lists ended markerless
    stalls: list[Stall] = field(default_factory=list)
    # LISTs and WATCHes answered 429 by a server not shutting down: a restarted server's
    # cache not ready yet (KEP-4568), expected and retried; never a failure of the watch
    not_ready: int = 0

    @property
    def watch_listed(self) -> int:
        return len(self.times)

    def add(self, sync: WatchSync) -> None:
        if sync.synced:
            self.times.append(sync.length)
        else:
            self.unsynced[sync.how or "stopped"] += 1
        if sync.stalled:
            length = sync.length
            self.stalls.append(
                Stall(sync.started, length, max(0.0, length - sync.head), length, sync.synced,
                      sync.how, sync.server)
            )  # fmt: skip

    def listed_ok(self, relist_cause: str) -> None:
        """A LIST answered: a sync by LIST, and a fallback where it stood in for a watch-list."""
        self.listed += 1
        if relist_cause.startswith(FALLBACK):
            self.fallbacks[relist_cause.removeprefix(FALLBACK)] += 1


def not_ready(outcome: str, shutdown: bool | None) -> bool:
    """Whether an attempt's answer is a cache's 429 (KEP-4568), not a shutdown's: 429 from a
    server whose header did not say `shutdown=true`."""
    return outcome == "too_many" and shutdown is not True


def is_end_marker(event: object) -> bool:
    """Whether a decoded watch event is the watch-list's end marker: a BOOKMARK whose object
    is annotated `k8s.io/initial-events-end: "true"`."""
    if not isinstance(event, dict) or event.get("type") != "BOOKMARK":
        return False
    obj = event.get("object")
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(END_MARKER) == "true"
