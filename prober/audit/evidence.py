"""What the prober and the cluster say about shutdowns, for setting the audit log against.

- The prober's event logs (schema v1): its `window` records give each apiserver's shutdown
  window, and its samples' `audit_id` match the audit events' `auditID`. The daemon rotates a
  log `PATH` into gzip segments `PATH.000001.gz`, ... (each new PATH starting with the `run`
  record again); all are read, oldest first.
- Kubernetes Events from kube-apiserver's graceful termination (`ShutdownInitiated` ...
  `TerminationGracefulTerminationFinished`), as `kubectl get events -o json` writes them (a
  List) or one Event per line.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prober.audit.files import InputError
from prober.common import filekinds
from prober.common.segments import NoSuchLog, NotARegularFile, SegmentLines, log_files
from prober.core import strictjson
from prober.core.eventlog import EventLogError, EventLogReader
from prober.core.models import RunRecord, Sample, Window, parse_rfc3339

START_REASON = "ShutdownInitiated"
# The last signal of a graceful termination first; any of them ends the span if it is the last.
END_REASONS = (
    "TerminationGracefulTerminationFinished",
    "HTTPServerStoppedListening",
    "InFlightRequestsDrained",
)


@dataclass(frozen=True, slots=True)
class ShutdownSpan:
    """One apiserver's shutdown, from the instant `/readyz` went false to its end (epoch s)."""

    source: str  # "prober" (a window record) or "events" (Kubernetes Events)
    node: str | None
    host: str | None  # the APIServerID, when the prober saw it
    start: float
    end: float | None  # None when the end was never seen


@dataclass(frozen=True, slots=True)
class SampleRef:
    """The prober's side of one request: which stream sent it, through which LB."""

    stream: str
    lb: str
    protocol: str
    connection: str
    error: str | None


@dataclass
class ProberEvidence:
    files: list[str] = field(default_factory=list)
    records: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    spans: list[ShutdownSpan] = field(default_factory=list)
    samples: dict[str, SampleRef] = field(default_factory=dict)
    samples_seen: int = 0


def segments(path: Path) -> list[Path]:
    """`PATH.000001.gz`, `PATH.000002.gz`, ... then `PATH`: the daemon's rotation order (see
    `prober.common.segments`). Raises `InputError`."""
    try:
        return log_files(path)
    except NotARegularFile:
        raise InputError(f"{path}: not a regular file") from None
    except NoSuchLog:
        raise InputError(
            f"{path}: no such event log (nor rotated segments {path.name}.NNNNNN.gz)"
        ) from None


def read_prober_logs(paths: Iterable[Path]) -> ProberEvidence:
    """Windows and the samples an audit-late request can be: late (the shutdown header said
    so) or failed. A request the apiserver flagged late reached it during its shutdown, so
    its sample either carries `shutdown=true` or lost its answer; other samples are not kept,
    which holds memory to the interesting few in a long run. Raises `InputError`."""
    evidence = ProberEvidence()
    for path in paths:
        clock = _RunClock()
        for segment in segments(path):
            _read_segment(segment, evidence, clock)
    return evidence


@dataclass
class _RunClock:
    """Wall clock minus run clock of the run being read, to turn run seconds into epoch.

    A sample carries both clocks, which is the best link; the run record's start time is
    the fallback."""

    from_run: float | None = None
    from_sample: float | None = None

    @property
    def offset(self) -> float | None:
        return self.from_sample if self.from_sample is not None else self.from_run


def _read_segment(path: Path, evidence: ProberEvidence, clock: _RunClock) -> None:
    evidence.files.append(str(path))
    lines = SegmentLines(path)
    try:
        reader = EventLogReader(lines, source=str(path))
        for record in reader:
            evidence.records += 1
            if isinstance(record, RunRecord):
                clock.from_run, clock.from_sample = parse_rfc3339(record.ts), None
            elif isinstance(record, Sample):
                _add_sample(record, evidence)
                if clock.from_sample is None:
                    clock.from_sample = parse_rfc3339(record.ts) - record.t
            elif isinstance(record, Window) and clock.offset is not None:
                evidence.spans.append(_window_span(record, clock.offset))
    except EventLogError as exc:
        wrong = filekinds.mismatch(path, filekinds.of_file(path), filekinds.EVENT_LOG)
        raise InputError(wrong or str(exc)) from None
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    except zlib.error as exc:
        raise InputError(f"{path}: damaged gzip data: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    evidence.skipped += reader.skipped
    evidence.problems.extend(reader.problems)
    if lines.truncated:
        evidence.problems.append(f"{path}: gzip data ends early")


def _add_sample(sample: Sample, evidence: ProberEvidence) -> None:
    evidence.samples_seen += 1
    if sample.late or sample.error is not None:
        evidence.samples[sample.audit_id] = SampleRef(
            stream=sample.stream,
            lb=sample.lb.value,
            protocol=sample.protocol.value,
            connection=sample.connection.value,
            error=sample.error.value if sample.error else None,
        )


def _window_span(window: Window, offset: float) -> ShutdownSpan:
    return ShutdownSpan(
        source="prober",
        node=window.node,
        host=window.host,
        start=offset + window.t0,
        end=offset + window.end_t,
    )


def read_shutdown_events(path: Path) -> list[ShutdownSpan]:
    """Shutdown spans from Kubernetes Events. Raises `InputError` for a file that is not
    Events; events of other reasons are ignored."""
    occurrences: list[tuple[float, str, str]] = []  # (time, node, reason)
    for event in _events(path):
        reason = event.get("reason")
        if reason != START_REASON and reason not in END_REASONS:
            continue
        node = _event_node(event)
        for when in _event_times(event):
            occurrences.append((when, node, str(reason)))
    return _pair(sorted(occurrences))


def _events(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        whole = strictjson.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        items = whole.get("items") if "items" in whole else [whole]
        if not isinstance(items, list):
            raise InputError(f"{path}: 'items' is not a list of Events")
        yield from (i for i in items if isinstance(i, dict))
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = strictjson.loads(line)
        except ValueError:
            raise InputError(f"{path}:{number}: not a JSON Event") from None
        if isinstance(item, dict):
            yield item


def _event_node(event: dict[str, Any]) -> str:
    source = _mapping(event.get("source"))
    involved = _mapping(event.get("involvedObject") or event.get("regarding"))
    name = str(involved.get("name") or "")
    return str(
        source.get("host")
        or event.get("reportingInstance")
        or name.removeprefix("kube-apiserver-")
        or "unknown"
    )


def _event_times(event: dict[str, Any]) -> list[float]:
    """When it happened; an aggregated Event (count > 1) gives its first and last time."""
    times: list[float] = []
    for key in ("eventTime", "firstTimestamp", "lastTimestamp"):
        value = event.get(key)
        if isinstance(value, str) and value:
            try:
                times.append(parse_rfc3339(value))
            except ValueError:
                continue
    if not times:
        meta = _mapping(event.get("metadata"))
        created = meta.get("creationTimestamp")
        if isinstance(created, str):
            try:
                times.append(parse_rfc3339(created))
            except ValueError:
                return []
    if not times:
        return []
    count = event.get("count") or _mapping(event.get("series")).get("count") or 1
    aggregated = isinstance(count, int) and count > 1
    return sorted({min(times), max(times)}) if aggregated else [min(times)]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pair(occurrences: list[tuple[float, str, str]]) -> list[ShutdownSpan]:
    open_starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    spans: list[ShutdownSpan] = []
    for when, node, reason in occurrences:
        if reason == START_REASON:
            if node in open_starts:
                spans.append(_span(node, open_starts[node], ends.pop(node, None)))
            open_starts[node] = when
            ends.pop(node, None)
        elif node in open_starts:
            ends[node] = when
    for node, start in open_starts.items():
        spans.append(_span(node, start, ends.get(node)))
    return sorted(spans, key=lambda s: (s.start, s.node or ""))


def _span(node: str, start: float, end: float | None) -> ShutdownSpan:
    return ShutdownSpan(source="events", node=node, host=None, start=start, end=end)
