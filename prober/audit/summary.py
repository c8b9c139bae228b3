"""`prober audit summarize`: late requests per apiserver, grouped by who sent them.

Reads every family's files oldest first through the shared `Scanner`, groups late requests by
(apiserver, user agent, source IP, user, verb, resource) with first and last arrival, and, when
given, sets them against the prober's samples (its own requests, by audit ID) and shutdown
spans (every request an apiserver received between a shutdown's start and its end).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prober.audit.document import (
    ApiserverEntry,
    ArrivalFields,
    AuditSummaryDocument,
    FileEntry,
    LateGroup,
    ProberLate,
    ProberSection,
    WindowEntry,
)
from prober.audit.event import (
    LateRequest,
    Problems,
    Scanner,
    ScanStats,
    SeenIds,
    received_at,
    user_agent_product,
)
from prober.audit.evidence import ProberEvidence, ShutdownSpan
from prober.audit.files import DEFAULT_MAX_LINE_BYTES, Family, scan_file
from prober.audit.own import prober_stream
from prober.core.header import apiserver_id
from prober.core.models import ErrorClass, rfc3339

SCHEMA_VERSION: Final = 1
# (apiserver, user_agent, source_ip, user, verb, resource)
GroupKey = tuple[str, str | None, str | None, str | None, str | None, str | None]
# (apiserver, stream, lb, protocol, connection)
ProberKey = tuple[str, str, str, str, str]


@dataclass
class Arrivals:
    """How many requests of one kind, and when the first and the last arrived."""

    count: int = 0
    first: float | None = None
    last: float | None = None
    failed: int = 0  # prober requests only: the prober saw this request fail

    def add(self, when: float | None) -> None:
        self.count += 1
        if when is not None:
            self.first = when if self.first is None else min(self.first, when)
            self.last = when if self.last is None else max(self.last, when)

    def to_json(self) -> ArrivalFields:
        return {"count": self.count, "first": _ts(self.first), "last": _ts(self.last)}


@dataclass
class FileReport:
    path: str
    apiserver: str
    stats: ScanStats


@dataclass
class SpanTally:
    """The requests one apiserver received during one shutdown span."""

    span: ShutdownSpan
    apiserver: str
    audited: bool  # whether any audit log of this apiserver was read
    ids: set[str] = field(default_factory=set)
    requests: int = 0
    late: int = 0
    user_agents: Counter[str] = field(default_factory=Counter)

    def holds(self, when: float) -> bool:
        return self.span.start <= when and (self.span.end is None or when <= self.span.end)

    def to_json(self) -> WindowEntry:
        return {
            "apiserver": self.apiserver,
            "audited": self.audited,
            "source": self.span.source,
            "node": self.span.node,
            "host": self.span.host,
            "start": rfc3339(self.span.start),
            "end": _ts(self.span.end),
            "requests": self.requests,
            "late": self.late,
            "user_agents": dict(self.user_agents.most_common()),
        }


class SpanCounter:
    """Counts each request once (stages share an auditID) into the spans it fell in."""

    def __init__(self, spans: Sequence[ShutdownSpan], apiservers: Sequence[str]) -> None:
        self.tallies = [_resolve(span, apiservers) for span in spans]
        self._by_apiserver: dict[str, list[SpanTally]] = {}
        for tally in self.tallies:
            self._by_apiserver.setdefault(tally.apiserver, []).append(tally)

    def event(self, apiserver: str, event: dict[str, Any]) -> None:
        tallies = self._by_apiserver.get(apiserver)
        if not tallies:
            return
        when = received_at(event)
        if when is None:
            return
        audit_id = event.get("auditID")
        for tally in tallies:
            if not tally.holds(when):
                continue
            if isinstance(audit_id, str):
                if audit_id in tally.ids:
                    continue
                tally.ids.add(audit_id)
            tally.requests += 1
            tally.user_agents[user_agent_product(event.get("userAgent"))] += 1

    def late(self, apiserver: str, late: LateRequest) -> None:
        if late.received is None:
            return
        for tally in self._by_apiserver.get(apiserver, []):
            if tally.holds(late.received):
                tally.late += 1


def _resolve(span: ShutdownSpan, apiservers: Sequence[str]) -> SpanTally:
    """Which audited apiserver a span is about: by node name, else by APIServerID, which
    kube-apiserver derives from its host name (the node name on OpenShift)."""
    for name in apiservers:
        if name in (span.node, span.host) or (span.host and apiserver_id(name) == span.host):
            return SpanTally(span, name, audited=True)
    return SpanTally(span, span.node or span.host or "unknown", audited=False)


@dataclass
class AuditSummary:
    files: list[FileReport] = field(default_factory=list)
    stats: ScanStats = field(default_factory=ScanStats)
    per_apiserver: dict[str, ScanStats] = field(default_factory=dict)
    late: dict[GroupKey, Arrivals] = field(default_factory=dict)
    late_by_apiserver: Counter[str] = field(default_factory=Counter)
    problems: Problems = field(default_factory=Problems)
    notes: list[str] = field(default_factory=list)
    spans: list[SpanTally] = field(default_factory=list)
    evidence: ProberEvidence | None = None
    prober_late: dict[ProberKey, Arrivals] = field(default_factory=dict)

    def add_late(self, apiserver: str, late: LateRequest) -> None:
        key = (apiserver, late.user_agent, late.source_ip, late.user, late.verb, late.resource)
        self.late.setdefault(key, Arrivals()).add(late.received)
        self.late_by_apiserver[apiserver] += 1
        ref = self.evidence.samples.get(late.audit_id or "") if self.evidence else None
        if ref is not None:
            prober_key = (apiserver, ref.stream, ref.lb, ref.protocol, ref.connection)
            arrivals = self.prober_late.setdefault(prober_key, Arrivals())
            arrivals.add(late.received)
            # A request the prober's stop cut was not seen to fail: nobody saw it end.
            arrivals.failed += ref.error not in (None, ErrorClass.STOPPED)

    @property
    def own_late(self) -> int:
        """The late requests whose User-Agent names the prober (`audit.own`)."""
        return sum(a.count for key, a in self.late.items() if prober_stream(key[1]) is not None)

    @property
    def apiservers(self) -> list[str]:
        return sorted(self.per_apiserver)

    def late_groups(self) -> list[tuple[GroupKey, Arrivals]]:
        return sorted(self.late.items(), key=lambda kv: (kv[0][0], -kv[1].count, _order(kv)))

    def to_json(self) -> AuditSummaryDocument:
        body: AuditSummaryDocument = {
            "v": SCHEMA_VERSION,
            "files": [_file_entry(f) for f in self.files],
            "events": self.stats.events,
            "bad_lines": self.stats.bad_lines,
            "late": [_late_group(key, arrivals) for key, arrivals in self.late_groups()],
            "apiservers": [self._apiserver_entry(name) for name in self.apiservers],
            "bad": dict(sorted(self.stats.bad.items())),
            "api_versions": dict(sorted(self.stats.api_versions.items())),
            "invalid_annotations": self.stats.invalid_annotations,
            "problems": self.problems.kept,
            "problems_total": self.problems.total,
            "notes": self.notes,
        }
        if self.spans:
            body["windows"] = [tally.to_json() for tally in self.spans]
        if self.evidence is not None:
            body["prober"] = self._prober_json(self.evidence)
        return body

    def _apiserver_entry(self, name: str) -> ApiserverEntry:
        return {
            "apiserver": name,
            "events": self.per_apiserver[name].events,
            "bad_lines": self.per_apiserver[name].bad_lines,
            "late": self.late_by_apiserver[name],
        }

    def _prober_json(self, evidence: ProberEvidence) -> ProberSection:
        return {
            "event_logs": evidence.files,
            "records": evidence.records,
            "skipped_lines": evidence.skipped,
            "samples": evidence.samples_seen,
            "late_requests": sum(a.count for a in self.prober_late.values()),
            "late": [_prober_late(key, a) for key, a in sorted(self.prober_late.items())],
        }


def _file_entry(f: FileReport) -> FileEntry:
    return {
        "path": f.path,
        "apiserver": f.apiserver,
        "events": f.stats.events,
        "bad_lines": f.stats.bad_lines,
    }


def _late_group(key: GroupKey, arrivals: Arrivals) -> LateGroup:
    apiserver, user_agent, source_ip, user, verb, resource = key
    return {
        "apiserver": apiserver,
        "user_agent": user_agent,
        "source_ip": source_ip,
        "user": user,
        "verb": verb,
        "resource": resource,
        "prober_stream": prober_stream(user_agent),
        **arrivals.to_json(),
    }


def _prober_late(key: ProberKey, arrivals: Arrivals) -> ProberLate:
    apiserver, stream, lb, protocol, connection = key
    return {
        "apiserver": apiserver,
        "stream": stream,
        "lb": lb,
        "protocol": protocol,
        "connection": connection,
        **arrivals.to_json(),
        "failed": arrivals.failed,
    }


def _order(item: tuple[GroupKey, Arrivals]) -> tuple[str, ...]:
    key, arrivals = item
    return (_ts(arrivals.first) or "", *(part or "" for part in key[1:]))


def _ts(epoch: float | None) -> str | None:
    return None if epoch is None else rfc3339(epoch)


def summarize(
    families: Sequence[Family],
    *,
    evidence: ProberEvidence | None = None,
    spans: Sequence[ShutdownSpan] = (),
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AuditSummary:
    summary = AuditSummary(evidence=evidence)
    apiservers = sorted({f.apiserver for f in families})
    all_spans = [*spans, *(evidence.spans if evidence else ())]
    counter = SpanCounter(all_spans, apiservers) if all_spans else None
    summary.spans = counter.tallies if counter else []
    scanner = Scanner(SeenIds(), summary.problems, counter.event if counter else None)
    for family in families:
        per_apiserver = summary.per_apiserver.setdefault(family.apiserver, ScanStats())
        paths = family.files()
        if not paths:
            summary.notes.append(f"{family.key}: its files vanished before they were read")

        def on_late(late: LateRequest, apiserver: str = family.apiserver) -> None:
            summary.add_late(apiserver, late)
            if counter is not None:
                counter.late(apiserver, late)

        for path in paths:
            stats = ScanStats()
            scan_file(path, family.apiserver, scanner, stats, on_late, max_len=max_line_bytes)
            summary.files.append(FileReport(str(path), family.apiserver, stats))
            per_apiserver.add(stats)
            summary.stats.add(stats)
    return summary
