"""One watch-list's sync, as a watch stream runs it (`daemon.watches.kind`): the query
client-go 1.35's reflector sends (KEP-3157) and the `WatchSync` record the attempt leaves,
when its end marker comes or when the watch ends first (`core.watchsync`)."""

from __future__ import annotations

from dataclasses import dataclass

from prober.core.reflector import Next, Step
from prober.core.streamkind import KindStreamId
from prober.core.watchsync import WatchSync


def watch_query(step: Next) -> str:
    """The query of a WATCH (from the version) or a WATCH_LIST (client-go's `watchList`:
    initial events, not older than the version; "" is left out, as Go's `omitempty` does,
    and asks for the most recent state: a consistent read)."""
    if step.step is Step.WATCH_LIST:
        version = f"&resourceVersion={step.version}" if step.version else ""
        return (
            f"allowWatchBookmarks=true{version}&resourceVersionMatch=NotOlderThan"
            f"&sendInitialEvents=true&timeoutSeconds={int(step.timeout)}&watch=true"
        )
    return (
        f"allowWatchBookmarks=true&resourceVersion={step.version}"
        f"&timeoutSeconds={int(step.timeout)}&watch=true"
    )


@dataclass(slots=True)
class PendingSync:
    """A watch-list whose stream started and whose marker has not come yet."""

    stream: KindStreamId
    started: float  # run time its request was sent
    head: float  # seconds to its response's head
    stall_after: float
    server: str | None = None
    events: int = 0  # initial events read so far
    done: bool = False

    def marker(self, t: float) -> WatchSync:
        """The marker came at run time `t`."""
        self.done = True
        return self._record(t, synced=True, how="")

    def ended(self, t: float, how: str) -> WatchSync:
        """The watch ended at `t`, `how`, before its marker."""
        self.done = True
        return self._record(t, synced=False, how=how)

    def _record(self, t: float, *, synced: bool, how: str) -> WatchSync:
        return WatchSync(
            t, self.stream, self.started, synced, self.events, round(self.head, 6),
            self.stall_after, how, self.server,
        )  # fmt: skip
