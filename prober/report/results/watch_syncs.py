"""The `syncs` of each watch stream in summary.json's `watches` section (`core.watchsync`):
how many syncs were by watch-list and how long each took from its request to its end marker,
how many by LIST (client-go's fallback, by cause, or `watches: list`), the watch-lists that
ended before their marker, and the stalls: a marker not come `stall_after` after the request,
each with its start, length and the bound on the server's own length."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prober.core.stats import percentile_cont
from prober.core.watchsync import SyncResult, WatchSync


def stall_after(records: Sequence[object]) -> float | None:
    """The daemon's stall threshold, as its sync records carry it (None: no watch-list)."""
    return next((r.stall_after for r in records if isinstance(r, WatchSync)), None)


def syncs_entry(syncs: SyncResult) -> dict[str, Any]:
    times = syncs.times
    return {
        "watch_list": len(times),
        "p50": round(percentile_cont(times, 0.5), 6) if times else None,
        "max": round(max(times), 6) if times else None,
        "listed": syncs.listed,
        "fallbacks": dict(sorted(syncs.fallbacks.items())),
        "unsynced": dict(sorted(syncs.unsynced.items())),
        "stalled": len(syncs.stalls),
        "stalls": [
            {
                "start": round(s.start, 6),
                "length": round(s.length, 6),
                "lo": round(s.lo, 6),
                "hi": round(s.hi, 6),
                "synced": s.synced,
                "how": s.how,
                "server": s.server,
            }
            for s in syncs.stalls
        ],
    }
