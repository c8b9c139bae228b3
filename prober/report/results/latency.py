"""summary.json's `latency`: per stream, the answer time's p50 and p99 before the shutdown
windows, inside them and after, and whether it was slow but up (`core.latency`).

    "latency": {"recorded", "multiple", "floor", "min_quiet", "min_in_window", "ratio",
                "streams": [{"stream", "lb", "protocol", "connection",
                             "before_windows": {"count", "p50", "p99",
                                                "connect": {...}, "tls": {...}},
                             "in_windows": {...}, "after_windows": {...},
                             "slow_but_up", "why"}]}

`connect` and `tls` (within the answer time) are there for a stream whose requests opened
connections (every request of a new-connection stream; a reused one's replacements).
The figures come from the newest `summary` record's histograms, which the daemon counted live
from every sample, logged or not: the same numbers live and on re-analysis. A stream with no
summary record has no histograms: its phases count 0 and nothing is compared. `recorded` is
false where no summary record has any (a log written before the daemon counted them): then
every stream says so. The floor is the run's (`slow_floor`, in its `run` record), else the
default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from prober.core.latency import (
    DEFAULT_SLOW_FLOOR,
    LATENCY_RATIO,
    MIN_IN_WINDOW,
    MIN_QUIET,
    SLOW_MULTIPLE,
    Part,
    PhaseFigures,
    RunPhase,
    figures,
    slow_but_up,
)
from prober.core.models import StreamId
from prober.report.replay.runs import RunLog

UNRECORDED = "the log has no answer times (written by a daemon before it counted them)"


class Figures(TypedDict):
    count: int
    p50: float | None
    p99: float | None


class PhaseEntry(Figures):
    connect: NotRequired[Figures]  # the TCP connect of the connections the requests opened
    tls: NotRequired[Figures]  # their TLS handshake


class LatencyStreamEntry(TypedDict):
    stream: str
    lb: str
    protocol: str
    connection: str
    before_windows: PhaseEntry
    in_windows: PhaseEntry
    after_windows: PhaseEntry
    slow_but_up: bool
    why: str


class LatencySection(TypedDict):
    recorded: bool  # whether the log's summary records carry answer times at all
    multiple: float
    floor: float
    min_quiet: int
    min_in_window: int
    ratio: float
    streams: list[LatencyStreamEntry]


def latency_section(log: RunLog, streams: Sequence[StreamId]) -> LatencySection:
    floor = log.run.slow_floor if log.run.slow_floor is not None else DEFAULT_SLOW_FLOOR
    entries = [_entry(log, stream, floor) for stream in streams]
    recorded = any(c.latency for c in log.counters.values())
    if not recorded:
        for entry in entries:
            entry["why"] = f"not compared: {UNRECORDED}"
    return {
        "recorded": recorded,
        "multiple": SLOW_MULTIPLE,
        "floor": floor,
        "min_quiet": MIN_QUIET,
        "min_in_window": MIN_IN_WINDOW,
        "ratio": LATENCY_RATIO,
        "streams": entries,
    }


def _entry(log: RunLog, stream: StreamId, floor: float) -> LatencyStreamEntry:
    counters = log.counters.get(stream.name)
    written = counters.latency if counters is not None else {}
    phases = figures(written)
    setup = {part: figures(written, part) for part in (Part.CONNECT, Part.TLS)}
    opened = any(f.count for f in setup[Part.CONNECT].values())
    finding = slow_but_up(written, floor)

    def phase(p: RunPhase) -> PhaseEntry:
        f = phases[p.value]
        entry: PhaseEntry = {"count": f.count, "p50": f.p50, "p99": f.p99}
        if opened:
            entry["connect"] = _figures(setup[Part.CONNECT][p.value])
            entry["tls"] = _figures(setup[Part.TLS][p.value])
        return entry

    return {
        "stream": stream.name,
        "lb": str(stream.lb),
        "protocol": str(stream.protocol),
        "connection": str(stream.connection),
        "before_windows": phase(RunPhase.BEFORE),
        "in_windows": phase(RunPhase.IN),
        "after_windows": phase(RunPhase.AFTER),
        "slow_but_up": finding.slow,
        "why": finding.why,
    }


def _figures(f: PhaseFigures) -> Figures:
    return {"count": f.count, "p50": f.p50, "p99": f.p99}


def slow_streams(section: LatencySection) -> list[LatencyStreamEntry]:
    return [e for e in section["streams"] if e["slow_but_up"]]
