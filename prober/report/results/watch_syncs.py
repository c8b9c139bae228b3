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
        "cache_not_ready": syncs.not_ready,
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


def syncs_text(entry: dict[str, Any] | None) -> str:
    """One cell: the syncs by watch-list with their p50 / max, by LIST, and the stalls."""
    if not entry:
        return "-"
    said = []
    if entry["watch_list"]:
        said.append(f"watch-list {entry['watch_list']} ({entry['p50']:.2f} / {entry['max']:.2f} s)")
    if entry["listed"]:
        fallbacks = sum(entry["fallbacks"].values())
        said.append(f"LIST {entry['listed']}" + (f" ({fallbacks} fallback)" if fallbacks else ""))
    if entry.get("cache_not_ready"):
        said.append(f"{entry['cache_not_ready']} x 429 cache not ready")
    if entry["stalled"]:
        longest = max(s["length"] for s in entry["stalls"])
        said.append(f"{entry['stalled']} stalled (longest {longest:.2f} s)")
    return ", ".join(said) or "-"
