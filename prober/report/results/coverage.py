"""summary.json's `coverage`: the proof of completeness the daemon wrote (`core.coverage`).

Per stream over the whole run, from its newest summary record: the ticks the schedule made
due, the requests started (witness bursts too) and the samples counted, whether or not the
event log kept them. Per closed shutdown window and stream, from the window's `coverage`
record: the ticks due and taken inside it and its gap largest for the schedule then in
force, with its place in run time and wall time, and whether it stayed within its limit.

Nothing here is recomputed: the log drops plain successes (`core.compaction`), so only the
daemon could count them. A log written before the daemon counted this has neither, and the
section is left out (None), as a reader of older summaries expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from prober.core.coverage import GAP_LIMIT, Coverage, CoverageStream
from prober.core.instances import Instance
from prober.core.models import StreamCounters, StreamId, Window, parse_rfc3339, rfc3339
from prober.report.replay.runs import RunLog
from prober.report.results.restarts import shutting_label
from prober.report.schema.types import (
    CoverageSection,
    CoverageStreamEntry,
    CoverageTotalEntry,
    CoverageWindowEntry,
)


def coverage_section(
    log: RunLog, windows: Sequence[Window], instances: Sequence[Instance]
) -> CoverageSection | None:
    """The section, or None for a log with no count of ticks due and no coverage record."""
    totals = [_total(c) for c in log.counters.values() if c.due is not None]
    if not totals and not log.coverage:
        return None
    start = parse_rfc3339(log.run.ts)
    by_window = {(w.host, round(w.t0, 6)): w for w in windows}
    entries = []
    for record in log.coverage:
        window = by_window.get((record.host, round(record.t0, 6)))
        label = shutting_label(window, instances) if window is not None else record.host
        entries.append(_window(record, label, start))
    return {"limit_factor": GAP_LIMIT, "streams": totals, "windows": entries}


def _total(c: StreamCounters) -> CoverageTotalEntry:
    stream = StreamId.parse(c.stream)
    return {
        "stream": c.stream,
        "lb": str(stream.lb),
        "protocol": str(stream.protocol),
        "connection": str(stream.connection),
        "due": c.due or 0,
        "started": c.started or 0,
        "counted": c.samples,
        "skipped": sum(c.skipped.values()),
    }


def _window(record: Coverage, label: str, start: float) -> CoverageWindowEntry:
    return {
        "host": record.host,
        "instance": label,
        "t0": record.t0,
        "end_t": record.end_t,
        "streams": [_stream(s, start) for s in record.streams],
    }


def _stream(s: CoverageStream, start: float) -> CoverageStreamEntry:
    share = s.share
    limit = s.limit
    return {
        "stream": s.stream,
        "lb": str(s.lb),
        "protocol": str(s.protocol),
        "connection": str(s.connection),
        "due": s.due,
        "taken": s.taken,
        "skipped": s.skipped,
        "share": None if share is None else round(share, 4),
        "gap": s.gap,
        "gap_start": s.gap_start,
        "gap_end": s.gap_end,
        "gap_start_ts": None if s.gap_start is None else rfc3339(start + s.gap_start),
        "gap_end_ts": None if s.gap_end is None else rfc3339(start + s.gap_end),
        "scheduled": s.scheduled,
        "limit": None if limit is None else round(limit, 6),
        "within": None if s.gap is None or limit is None else s.gap <= limit,
    }
