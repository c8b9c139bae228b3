"""The `watches` section of summary.json, rebuilt from a run's watch records alone by the same
tracker the daemon runs (`core.watch.WatchTracker`): per watch stream, its establishments and
the servers they landed on, doomed re-watches, ends by how, relists by cause, times to
re-establish, heartbeat lag and blind intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prober.core.models import LogRecord
from prober.core.stats import percentile_cont
from prober.core.watch import (
    Heartbeat,
    WatchAttempt,
    WatchEnd,
    WatchResult,
    WatchSeen,
    WatchTracker,
)


def watches_section(records: Sequence[LogRecord], end: float) -> dict[str, Any]:
    """`end`: the run's last instant (run time), where unseen writes stop counting."""
    tracker = WatchTracker()
    streams: dict[str, WatchAttempt | WatchEnd | WatchSeen] = {}
    writes = failed = 0
    for record in records:
        if isinstance(record, Heartbeat):
            writes += 1
            failed += record.ack is None
            tracker.feed(record)
        elif isinstance(record, WatchAttempt | WatchEnd | WatchSeen):
            streams.setdefault(record.stream, record)
            tracker.feed(record)
    results = tracker.close(end)
    return {
        "blind_after": None if math.isinf(tracker.blind_after) else tracker.blind_after,
        "heartbeat": {"writes": writes, "failed": failed},
        "streams": [_entry(streams[name], results[name]) for name in sorted(streams)],
    }


def _entry(first: WatchAttempt | WatchEnd | WatchSeen, result: WatchResult) -> dict[str, Any]:
    stream = first.stream_id
    return {
        "stream": stream.name,
        "lb": str(stream.lb),
        "protocol": str(stream.protocol),
        "established": result.established,
        "doomed": result.doomed,
        "servers": dict(sorted(result.servers.items())),
        "ends": dict(sorted(result.ends.items())),
        "relists": dict(sorted(result.relists.items())),
        "reestablish": _quantiles(result.reestablish),
        "lag": _quantiles(result.lags),
        "blind_seconds": round(result.blind_seconds, 6),
        "blind": [[round(a, 6), round(b, 6)] for a, b in result.blind],
    }


def _quantiles(values: Sequence[float]) -> dict[str, float | int | None]:
    if not values:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    return {
        "count": len(values),
        "p50": round(percentile_cont(values, 0.5), 6),
        "p99": round(percentile_cont(values, 0.99), 6),
        "max": round(max(values), 6),
    }
