"""The kinds of stream this version knows, and the run record that lists their streams.

Requests are the first kind: one request, one `Sample`, and the records the trackers make of
them. A later kind defines its `KindSpec` in a module of its own and is listed in
`standard_kinds`; readers (`prober analyze`) decode the record types of every kind listed here
and keep each kind's records apart (`report.replay.runs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prober.core.connection_age import ConnectionAges
from prober.core.coverage import Coverage
from prober.core.instances import Instance
from prober.core.models import (
    REQUEST,
    Interval,
    LBSettings,
    PaceChange,
    RunRecord,
    Sample,
    Summary,
    WatchLimits,
    Window,
)
from prober.core.streamkind import KindSpec, KindTable
from prober.core.watch import WATCHES

REQUESTS = KindSpec(
    REQUEST,
    records=(Sample, Interval, Window, Summary, PaceChange, ConnectionAges, Instance, Coverage),
)


def standard_kinds() -> KindTable:
    """A fresh table of every kind of stream this version has (add one to it with `add`)."""
    return KindTable([REQUESTS, WATCHES])


def run_record(
    *,
    run_id: str,
    ts: str,
    platform: str,
    version: str,
    streams: Mapping[str, Sequence[str]],
    lb_settings: LBSettings | None = None,
    node: str | None = None,
    early_for: float | None = None,
    watch_limits: WatchLimits | None = None,
    slow_floor: float | None = None,
) -> RunRecord:
    """The run record for the streams of each kind, by kind (a kind with none is left out)."""
    return RunRecord(
        run_id=run_id,
        ts=ts,
        platform=platform,
        version=version,
        kind_streams={kind: tuple(names) for kind, names in streams.items() if names},
        lb_settings=lb_settings,
        node=node,
        early_for=early_for,
        watch_limits=watch_limits,
        slow_floor=slow_floor,
    )
