"""Read event logs into runs: the `run` record and everything logged under it.

One event log normally holds one run. A daemon restarted onto the same file appends a new
`run` record with a new id, which starts a new run; the same `run` record repeated at the head
of each rotated segment continues the current one.

Records of the kinds of stream other than requests that the reader is given (`kinds`,
`core.kinds.standard_kinds()` by default) are kept per kind in `RunLog.others`, in file order,
whether or not any report has code for them; a record kind of no known kind is skipped and
counted, as every reader does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prober.common import filekinds
from prober.core.connection_age import ConnectionAges
from prober.core.coverage import Coverage
from prober.core.eventlog import AnyRecord, EventLogError, EventLogReader
from prober.core.instances import Instance
from prober.core.kinds import standard_kinds
from prober.core.models import (
    REQUEST,
    ApiserverNode,
    IdentitySeen,
    Interval,
    LogRecord,
    PaceChange,
    ReadyzAnswer,
    Record,
    RunEnd,
    RunRecord,
    Sample,
    StreamCounters,
    StreamId,
    StreamNameError,
    Summary,
    Window,
)
from prober.core.streamkind import KindTable
from prober.report.replay.eventfiles import LineSource, event_logs
from prober.report.replay.podlogs import RecordLines, pod_log_files
from prober.report.schema.errors import BadInput


@dataclass(slots=True)
class RunLog:
    """What one run logged, in file order."""

    run: RunRecord
    source: str  # the event log it came from, for messages
    samples: list[Sample] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    last_summary: Summary | None = None
    counters: dict[str, StreamCounters] = field(default_factory=dict)  # newest per stream
    summaries: list[Summary] = field(default_factory=list)  # every one, in file order
    paces: list[PaceChange] = field(default_factory=list)  # when the sampling rate changed
    # The records of every other kind of stream, by kind, as the daemon wrote them.
    others: dict[str, list[LogRecord]] = field(default_factory=dict)
    ended: RunEnd | None = None  # None: the stop path never finished (the run ended abruptly)
    apiservers: dict[str, str] = field(default_factory=dict)  # host -> node, as the daemon learnt
    ages: ConnectionAges | None = None  # the daemon's connection-age table, made at its stop
    # Each identity and /readyz record with the number of samples logged before it: a replay
    # feeds it to the trackers where the daemon did.
    signals: list[tuple[int, IdentitySeen | ReadyzAnswer]] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)  # as the daemon wrote them
    coverage: list[Coverage] = field(default_factory=list)  # per window (`core.coverage`)

    def add_any(self, record: AnyRecord, kinds: KindTable) -> None:
        """A record of any kind of stream: the request kind's in their lists, the others'
        under their kind."""
        if isinstance(record, RunEnd):
            self.ended = record
        elif isinstance(record, ApiserverNode):
            self.apiservers[record.host] = record.node
        elif isinstance(record, IdentitySeen | ReadyzAnswer):
            self.signals.append((len(self.samples), record))
            if isinstance(record, IdentitySeen) and record.node:
                self.apiservers.setdefault(record.host, record.node)
        elif isinstance(record, Instance):
            self.instances.append(record)
        elif isinstance(record, ConnectionAges):
            self.ages = record
        elif isinstance(record, Coverage):
            self.coverage.append(record)
        elif isinstance(record, Sample | Interval | Window | Summary | PaceChange):
            self.add(record)
        else:
            owner = kinds.owner(record.KIND) or record.KIND
            self.others.setdefault(owner, []).append(record)

    def add(self, record: Sample | Interval | Window | Summary | PaceChange) -> None:
        if isinstance(record, Sample):
            self.samples.append(record)
        elif isinstance(record, Interval):
            self.intervals.append(record)
        elif isinstance(record, Window):
            self.windows.append(record)
        elif isinstance(record, PaceChange):
            self.paces.append(record)
        else:
            self.summaries.append(record)
            if self.last_summary is None or record.t >= self.last_summary.t:
                self.last_summary = record
            for counters in record.streams:
                self.counters[counters.stream] = counters


@dataclass(slots=True)
class ReadStats:
    files: list[Path] = field(default_factory=list)
    lines: int = 0
    skipped: int = 0
    unknown_kinds: int = 0
    truncated: int = 0  # files whose last line (or gzip stream) was cut short
    log_lines: int = 0  # pod logs: the daemon's log lines passed over between records
    notes: list[str] = field(default_factory=list)  # pod logs: what was left out, and why
    problems: list[str] = field(default_factory=list)


def load_runs(
    args: Iterable[Path],
    *,
    skip_bad_lines: bool = False,
    pod_logs: bool = False,
    kinds: KindTable | None = None,
) -> tuple[list[RunLog], ReadStats]:
    """Every run in the event logs the arguments name, in the order they first appear; with
    `pod_logs`, in pod logs of daemons that echoed their records to stdout (`replay.podlogs`).

    A corrupt line (not JSON, or not a valid v1 record) is bad input unless `skip_bad_lines`;
    a truncated last line and records of unknown kinds are skipped and counted either way.
    """
    reading = _Reading(kinds or standard_kinds(), skip_bad_lines, pod_logs)
    for arg in args:
        logs = [[path] for path in pod_log_files(arg)] if pod_logs else event_logs(arg)
        for files in logs:
            reading.read_log(files)
    if pod_logs and not reading.runs:
        why = "; ".join(reading.stats.notes[:3]) or "no run record"
        raise BadInput(f"no run in the pod logs: {why}")
    return list(reading.runs.values()), reading.stats


@dataclass(slots=True)
class _Reading:
    """What the logs of one `load_runs` call share as each is read: how to read them, the
    runs found so far (a run may go on in another log), and the counts."""

    kinds: KindTable
    skip_bad_lines: bool
    pod_logs: bool
    runs: dict[str, RunLog] = field(default_factory=dict)
    stats: ReadStats = field(default_factory=ReadStats)

    def read_log(self, files: list[Path]) -> None:
        """One log: its rotated segments, then the file itself."""
        log_name = str(files[-1])
        current: RunLog | None = None
        records = orphans = 0
        lines_before = self.stats.lines
        for path in files:
            self.stats.files.append(path)
            source = LineSource(path)
            records_only = RecordLines(source) if self.pod_logs else None
            reader = EventLogReader(
                records_only or source,
                source=str(path),
                strict=not self.skip_bad_lines,
                types=self.kinds.record_types,
            )
            try:
                for record in reader:
                    records += 1
                    if not _well_named(record, f"{path}:{reader.lines}", self.skip_bad_lines):
                        self.stats.skipped += 1
                        continue
                    if isinstance(record, RunRecord):
                        current = self.runs.setdefault(record.run_id, RunLog(record, log_name))
                    elif current is None and self.pod_logs:
                        # `oc logs` returns the kubelet's newest file only: once it rotated, the
                        # log begins inside a run whose record went with an older file. The daemon
                        # writes it again before every summary (`daemon/echo.py`): from there on.
                        orphans += 1
                    elif current is None:
                        raise BadInput(
                            f"{path}:{reader.lines}: a {record.KIND} record before any run record"
                        )
                    else:
                        current.add_any(record, self.kinds)
            except EventLogError as exc:
                wrong = filekinds.mismatch(path, filekinds.of_file(path), filekinds.EVENT_LOG)
                hint = " (written by a newer prober?)" if "schema version" in str(exc) else ""
                raise BadInput(wrong or f"{exc}{hint}") from None
            self.stats.lines += reader.lines
            self.stats.log_lines += records_only.passed if records_only is not None else 0
            self.stats.skipped += reader.skipped
            self.stats.unknown_kinds += reader.unknown_kinds
            self.stats.truncated += int(reader.truncated or source.truncated)
            self.stats.problems.extend(reader.problems)
            if source.truncated:
                self.stats.problems.append(f"{path}: gzip data ends early")
        if records == 0 and self.pod_logs:
            # A container that died before its first record; the others may hold self.runs.
            self.stats.notes.append(
                f"{log_name}: no event records (event_log_stdout off?): left out"
            )
            return
        if orphans:
            self.stats.skipped += orphans
            self.stats.notes.append(
                f"{log_name}: {orphans} records before its first run record (the log rotated): "
                "left out"
            )
        if records == 0:
            lines = self.stats.lines - lines_before
            why = f"no usable records in {lines} lines" if lines else "no records"
            raise BadInput(f"{log_name}: empty event log ({why})")


def _well_named(record: AnyRecord, where: str, skip: bool) -> bool:
    """Whether the record's stream names parse; a bad one is BadInput unless skipped."""
    problem = _bad_stream_name(record)
    if problem is not None and not skip:
        raise BadInput(f"{where}: {record.KIND} record: {problem}")
    return problem is None


def _bad_stream_name(record: AnyRecord) -> str | None:
    """What is wrong with a request stream's name the record carries (every report parses
    them back into LB, protocol and connection), or None. Another kind's records name their
    streams as that kind does: the codec checked them if the kind said how (`kind_identity`)."""
    if not isinstance(record, Record):
        return None
    if isinstance(record, Sample | Interval):
        names: Iterable[str] = (record.stream,)
    elif isinstance(record, PaceChange):
        names = () if record.stream is None else (record.stream,)
    elif isinstance(record, RunRecord):
        names = record.streams_of(REQUEST)
    else:  # Window, Summary
        names = (s.stream for s in record.streams)
    for name in names:
        problem = _stream_problem(name)
        if problem is not None:
            return problem
    return None


@functools.lru_cache(maxsize=1024)  # a run has a dozen names, met on every line
def _stream_problem(name: str) -> str | None:
    try:
        StreamId.parse(name)
    except StreamNameError as exc:
        return str(exc)
    return None
