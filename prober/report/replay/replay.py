"""Replay a run's logged samples through the core trackers, and check the daemon agrees.

A log without samples (`event_log_stdout: compact`) is taken as the daemon measured it.

The daemon logs only the samples the trackers need (`core.compaction`), so feeding them in file
order to fresh trackers (`core.trackers.Trackers`, the daemon's own wiring), registered with the
run record's streams and closed at the end of the run, must give back the daemon's own
`interval` and `window` records exactly. Where it does not, the log was damaged or the daemon
and this reader disagree: each difference becomes a warning naming the stream or the host, and
the replayed records are what the report uses.

The records of other kinds of stream are no samples of the trackers: they pass through as
logged, per kind (`Replay.others`), for whatever report reads that kind.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prober.core.budgets import slow_starts
from prober.core.connection_age import ConnectionAges
from prober.core.instances import DEFAULT_EARLY_FOR, Instance
from prober.core.models import (
    REQUEST,
    Interval,
    LogRecord,
    RunRecord,
    StreamId,
    StreamNameError,
    Window,
    parse_rfc3339,
    rfc3339,
)
from prober.core.perceived import Felt, Retried
from prober.core.samenode import Placement
from prober.core.trackers import Trackers
from prober.report.replay.runs import RunLog
from prober.report.schema.errors import BadInput

_Record = TypeVar("_Record", Interval, Window)


@dataclass(frozen=True, slots=True)
class Replay:
    run: RunRecord
    intervals: tuple[Interval, ...]  # the LBs' (`core.trackers`): every report judges these
    windows: tuple[Window, ...]
    end_t: float
    stragglers: int
    warnings: tuple[str, ...]
    # Every other kind of stream's records, by kind, in file order (`report.replay.runs`).
    others: Mapping[str, tuple[LogRecord, ...]] = field(default_factory=dict)
    # How client-go's retries of each `Retry-After` answer ended (`core.perceived`); empty
    # for a log without samples.
    retries: tuple[Retried, ...] = ()
    # What a client felt of each interval (`core.perceived.Felt`), in the order decided;
    # empty for a log without samples, whose intervals are then all felt.
    felt: tuple[Felt, ...] = ()
    # The same-node path's records (`core.samenode`): the prober's own node, not an LB's,
    # reported apart and never judged as an LB's.
    same_node_intervals: tuple[Interval, ...] = ()
    same_node_windows: tuple[Window, ...] = ()
    # Failures, late answers and resends by the phase their connection was opened in
    # (`core.connection_age`); a log without samples has the daemon's, if it stopped cleanly.
    ages: ConnectionAges | None = None
    # Each apiserver process restarted in the run: T1, every LB's add-back, its early
    # failures (`core.instances`); a log without samples has the daemon's.
    instances: tuple[Instance, ...] = ()

    @classmethod
    def split(
        cls, intervals: Sequence[Interval], windows: Sequence[Window], **fields: Any
    ) -> Replay:
        """A replay of these records, the same-node ones apart from the LBs'."""
        return cls(
            intervals=tuple(i for i in intervals if not i.same_node),
            windows=tuple(w for w in windows if not w.same_node),
            same_node_intervals=tuple(i for i in intervals if i.same_node),
            same_node_windows=tuple(w for w in windows if w.same_node),
            **fields,
        )

    def of_kind(self, kind: str) -> tuple[LogRecord, ...]:
        return self.others.get(kind, ())


def replay(log: RunLog) -> Replay:
    streams = []
    for name in log.run.streams_of(REQUEST):
        try:
            streams.append(StreamId.parse(name))
        except StreamNameError as exc:
            raise BadInput(f"{log.source}: run record: {exc}") from None
    if not log.samples:
        return measured(log)
    nodes = {**log.apiservers, **{w.host: w.node for w in log.windows if w.node}}
    own = None if log.run.node is None else Placement(log.run.node, log.apiservers).on_own_node
    settings = log.run.lb_settings
    exact_delay = settings.shutdown_delay if settings is not None else None
    early_for = log.run.early_for if log.run.early_for is not None else DEFAULT_EARLY_FOR
    trackers = Trackers(
        streams,
        node_of=nodes.get,
        on_own_node=own,
        exact_delay=exact_delay,
        early_for=early_for,
        slow_start=slow_starts(log.run.platform, settings),
    )
    fed = _feed(trackers, log)
    end_t, end_ts = run_end(log)
    closed = _Events.of(trackers.close(end_t, end_ts))
    ages = next(r for r in closed.rest if isinstance(r, ConnectionAges))
    warnings = _unclean_end(log, closed.intervals, closed.windows, end_t)
    if warnings:  # the daemon never closed its trackers: compare what it did log
        warnings += _compare(log, fed.intervals, fed.windows)
    else:
        warnings += _compare(log, fed.intervals + closed.intervals, fed.windows + closed.windows)
    if log.ages is not None and log.ages != ages:
        warnings.append(f"{log.source}: the connection-age table differs from the daemon's")
    instances = fed.instances + closed.instances
    # A daemon that wrote no early_for predates instance records: nothing to hold them to.
    if log.ended is not None and log.run.early_for is not None and log.instances != instances:
        warnings.append(f"{log.source}: the restarted instances differ from the daemon's")
    return Replay.split(
        fed.intervals + closed.intervals,
        fed.windows + closed.windows,
        run=log.run,
        end_t=end_t,
        stragglers=trackers.shutdown.stragglers,
        warnings=tuple(warnings),
        others=_others(log),
        retries=tuple(fed.retries + closed.retries),
        felt=tuple(fed.felt + closed.felt),
        ages=ages,
        instances=tuple(instances),
    )


@dataclass(slots=True)
class _Events:
    """What the trackers emitted, by type."""

    intervals: list[Interval] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    retries: list[Retried] = field(default_factory=list)
    felt: list[Felt] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    rest: list[object] = field(default_factory=list)

    @classmethod
    def of(cls, events: Iterable[object]) -> _Events:
        found = cls()
        found.add(events)
        return found

    def add(self, events: Iterable[object]) -> None:
        lists: tuple[tuple[type, list[Any]], ...] = (
            (Interval, self.intervals),
            (Window, self.windows),
            (Retried, self.retries),
            (Felt, self.felt),
            (Instance, self.instances),
        )
        for event in events:
            into = next((found for kind, found in lists if isinstance(event, kind)), self.rest)
            into.append(event)


def _feed(trackers: Trackers, log: RunLog) -> _Events:
    """Every logged sample, and every identity and /readyz record where the daemon met it
    among them."""
    fed = _Events()
    signals = list(log.signals)
    for index, logged in enumerate(log.samples):
        while signals and signals[0][0] <= index:
            trackers.note(signals.pop(0)[1])
        fed.add(trackers.feed(trackers.mark(logged)))
    for _index, signal in signals:
        trackers.note(signal)
    return fed


def measured(log: RunLog) -> Replay:
    """A log without samples (a `compact` record stream on stdout, or a log whose samples were
    lost): nothing to replay, so the daemon's own windows and intervals are the measurement.

    A full log always holds samples where it holds a window or an interval (each rests on
    late or failed samples, which the daemon always keeps), so the two never mix up."""
    end_t, _ = run_end(log)
    return Replay.split(
        log.intervals,
        log.windows,
        run=log.run,
        end_t=end_t,
        stragglers=0,
        warnings=(),
        others=_others(log),
        ages=log.ages,
        instances=tuple(log.instances),
    )


def _others(log: RunLog) -> dict[str, tuple[LogRecord, ...]]:
    return {kind: tuple(records) for kind, records in log.others.items()}


def run_end(log: RunLog) -> tuple[float, str]:
    """The end of the run: the largest `t` any record carries, with its wall-clock time.

    The daemon closes its trackers when it stops and logs what that closed (windows `end`,
    intervals ending then), and its last summary; the largest time among those and the samples
    is when it stopped. The wall-clock stamp prefers the daemon's own (an interval's `end_ts`)."""
    candidates: list[tuple[float, int, str | None]] = [(0.0, 0, None)]
    candidates += [(s.t, 1, s.ts) for s in log.samples]
    if log.last_summary is not None:
        candidates.append((log.last_summary.t, 2, log.last_summary.ts))
    candidates += [(w.end_t, 0, None) for w in log.windows]
    candidates += [(i.end_t, 3, i.end_ts) for i in log.intervals]
    end_t = max(t for t, _, _ in candidates)
    stamps = sorted((rank, ts) for t, rank, ts in candidates if t == end_t and ts is not None)
    if stamps:
        return end_t, stamps[-1][1]
    return end_t, rfc3339(parse_rfc3339(log.run.ts) + end_t)


def _unclean_end(
    log: RunLog, intervals: list[Interval], windows: list[Window], end_t: float
) -> list[str]:
    """A note when the log ends without the daemon closing what was still open (SIGKILL)."""
    if not intervals and not windows:
        return []
    logged = set(log.intervals) | {_normal(w) for w in log.windows}
    if any(i in logged for i in intervals) or any(_normal(w) in logged for w in windows):
        return []
    return [
        f"{log.source}: the log has no end-of-run records (was the daemon killed?): "
        f"{len(intervals)} intervals and {len(windows)} windows still open were closed "
        f"at the last record, t={end_t:.3f} s"
    ]


def _compare(log: RunLog, intervals: list[Interval], windows: list[Window]) -> list[str]:
    warnings: list[str] = []
    replayed_by_stream = _group(intervals, "stream")
    logged_by_stream = _group(log.intervals, "stream")
    for stream in sorted(replayed_by_stream.keys() | logged_by_stream.keys()):
        mine, theirs = replayed_by_stream.get(stream, []), logged_by_stream.get(stream, [])
        if mine != theirs:
            warnings.append(f"{log.source}: stream {stream}: {_difference(mine, theirs)}")
    replayed_by_host = _group([_normal(w) for w in windows], "host")
    logged_by_host = _group([_normal(w) for w in log.windows], "host")
    for host in sorted(replayed_by_host.keys() | logged_by_host.keys()):
        ours, logged = replayed_by_host.get(host, []), logged_by_host.get(host, [])
        if ours != logged:
            warnings.append(f"{log.source}: host {host}: {_difference(ours, logged)}")
    return warnings


def _difference(mine: Sequence[Interval | Window], theirs: Sequence[Interval | Window]) -> str:
    kind = "intervals" if isinstance((mine or theirs)[0], Interval) else "windows"
    if len(mine) != len(theirs):
        return f"replay gives {len(mine)} {kind}, the daemon logged {len(theirs)}"
    for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        for f in dataclasses.fields(a):
            ours, logged = getattr(a, f.name), getattr(b, f.name)
            if ours != logged:
                return (
                    f"{kind} #{index + 1} differs from the daemon's: "
                    f"{f.name} {_short(ours)} replayed, {_short(logged)} logged"
                )
    return f"{kind} differ from the daemon's"  # pragma: no cover - some field must differ


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _normal(window: Window) -> Window:
    """The listing order of a window's streams is not a measurement: compare sorted."""
    return dataclasses.replace(
        window, streams=tuple(sorted(window.streams, key=lambda s: s.stream))
    )


def _group(records: Sequence[_Record], key: str) -> dict[str, list[_Record]]:
    groups: dict[str, list[_Record]] = defaultdict(list)
    for record in records:
        groups[getattr(record, key)].append(record)
    return dict(groups)
