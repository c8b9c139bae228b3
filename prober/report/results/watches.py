"""The `watches` section of summary.json, rebuilt from a run's watch records alone by the same
tracker the daemon runs (`core.watch.WatchTracker`): per watch stream, its establishments and
the servers they landed on, doomed re-watches, ends by how, relists by cause, times to
re-establish, heartbeat lag and blind intervals; each end also by the phase of its server's
shutdown (`core.phase`) at that moment, from the run's shutdown windows."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from prober.core.models import LB, LogRecord, Window
from prober.core.phase import ShutdownPhase, phase_at
from prober.core.stats import percentile_cont
from prober.core.watch import (
    Doomed,
    Heartbeat,
    WatchAttempt,
    WatchEnd,
    WatchResult,
    WatchSeen,
    WatchTracker,
)
from prober.core.watchsync import WatchSync
from prober.report.results.watch_syncs import stall_after, syncs_entry


def watch_results(
    records: Sequence[LogRecord], end: float
) -> tuple[WatchTracker, dict[str, WatchResult], dict[str, WatchAttempt | WatchEnd | WatchSeen]]:
    """The tracker fed every watch record, its results at `end`, and each stream's first
    record (which names it)."""
    tracker = WatchTracker()
    streams: dict[str, WatchAttempt | WatchEnd | WatchSeen] = {}
    for record in records:
        if isinstance(record, Heartbeat):
            tracker.feed(record)
        elif isinstance(record, WatchAttempt | WatchEnd | WatchSeen):
            streams.setdefault(record.stream, record)
            tracker.feed(record)
        elif isinstance(record, WatchSync):
            tracker.feed(record)
    return tracker, tracker.close(end), streams


# Each LB's watch streams, by protocol, with their results: what report.html draws as lanes.
WatchStreams = dict[LB, list[tuple[str, WatchResult]]]


def watch_streams(records: Sequence[LogRecord], end: float) -> WatchStreams:
    """Each LB's watch streams, in name order, with their results at `end`."""
    _, results, first = watch_results(records, end)
    streams: WatchStreams = {}
    for name in sorted(results):
        stream = first[name].stream_id
        streams.setdefault(stream.lb, []).append((str(stream.protocol), results[name]))
    return streams


def watches_section(
    records: Sequence[LogRecord], end: float, windows: Sequence[Window] = ()
) -> dict[str, Any]:
    """`end`: the run's last instant (run time), where unseen writes stop counting;
    `windows`: the run's shutdown windows, which place each end in its server's shutdown."""
    tracker, results, streams = watch_results(records, end)
    beats = [r for r in records if isinstance(r, Heartbeat)]
    return {
        "blind_deadline": None if math.isinf(tracker.blind_after) else tracker.blind_after,
        "heartbeat": {"writes": len(beats), "failed": sum(b.ack is None for b in beats)},
        "stall_after": stall_after(records),
        "streams": [_entry(streams[n], results[n], windows, end) for n in sorted(streams)],
    }


def end_phase(end: WatchEnd, windows: Sequence[Window]) -> ShutdownPhase:
    """Where the ending watch's server was in its shutdown: the phase in the last window of
    that server begun by then; BEFORE (ready) when none was, or when the watch was
    established after that window closed (a restarted server: its window is behind it)."""
    mine = [w for w in windows if end.server and w.host == end.server and w.t0_lo <= end.t]
    if not mine:
        return ShutdownPhase.BEFORE
    window = max(mine, key=lambda w: w.t0)
    if end.started > max(window.end_t, window.t0 + window.delay):
        return ShutdownPhase.BEFORE
    return phase_at(end.t, window.t0, window.delay)


def _entry(
    first: WatchAttempt | WatchEnd | WatchSeen,
    result: WatchResult,
    windows: Sequence[Window],
    end: float,
) -> dict[str, Any]:
    stream = first.stream_id
    phases = Counter(str(end_phase(e, windows)) for e in result.ended if e.how != "stopped")
    return {
        "stream": stream.name,
        "lb": str(stream.lb),
        "protocol": str(stream.protocol),
        "established": result.established,
        "doomed": result.doomed,
        "servers": dict(sorted(result.servers.items())),
        "ends": dict(sorted(result.ends.items())),
        "end_phases": dict(sorted(phases.items())),
        "relists": dict(sorted(result.relists.items())),
        "reestablish": _quantiles(result.reestablish),
        "lag": _quantiles(result.lags),
        "blind_seconds": round(result.blind_seconds, 6),
        "blind": [[round(a, 6), round(b, 6)] for a, b in result.blind],
        # its last blind interval was still open when the run ended, closed by the end alone
        "blind_at_end": bool(result.blind) and result.blind[-1][1] >= end,
        "doomed_at": [_doomed(d) for d in result.doomed_at],
        "unrestored": None if result.unrestored is None else round(result.unrestored, 6),
        "syncs": syncs_entry(result.syncs),
    }


def _doomed(doomed: Doomed) -> dict[str, Any]:
    a, opened = doomed
    return {
        "t": round(a.t, 6),
        "landed": round(a.t + a.dur, 6),
        "server": a.server,
        "elapsed": a.elapsed,
        "opened": None if opened is None else round(opened, 6),
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
