"""One kube-apiserver audit log line: is it an audit Event, and did it arrive too late?

Two annotations mark a request that reached an apiserver late in its graceful termination
(OpenShift's carry patches to k8s.io/apiserver, and upstream's `filters/with_retry_after.go`):

- `openshift.io/during-graceful`, value `loopback=<bool>,<host>,readyz=false`: the request came
  on a connection accepted after 80 % of the shutdown delay. Its presence is the verdict.
- `apiserver.k8s.io/shutdown`, value `elapsed=<dur> threshold=<pct>% late=<bool> self=<bool>
  loopback=<bool>`: written on every request during shutdown; late when `late=true`, or, when the
  `late` field is absent, when the threshold is over 80 %.

Summarize and follow both go through `Scanner`, so the same lines give the same counts.
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from prober.core import strictjson

DURING_GRACEFUL = "openshift.io/during-graceful"
SHUTDOWN = "apiserver.k8s.io/shutdown"
LATE_THRESHOLD_PERCENT = 80.0
AUDIT_GROUP = "audit.k8s.io/"
MAX_PROBLEMS_KEPT = 100
# Stages of one request share its auditID; late IDs are remembered this long (in requests) so
# each request counts once. Stages of one request are written within seconds of each other.
SEEN_IDS_CAPACITY = 20_000


class BadReason(StrEnum):
    """Why a line is not counted as an audit event. Every such line is counted under one."""

    NOT_UTF8 = "not_utf8"  # binary garbage
    NOT_JSON = "not_json"
    NOT_AN_EVENT = "not_an_event"  # JSON, but not an audit.k8s.io Event
    BLANK = "blank"
    TOO_LONG = "too_long"  # over the line limit: skipped without being held in memory
    TRUNCATED = "truncated"  # a partial last line of a file that will not grow any more
    UNREADABLE = "unreadable"  # the file stopped decoding (corrupt gzip, I/O error)


@dataclass(frozen=True, slots=True)
class TooLong:
    """A line that exceeded the limit; its bytes were skipped, not kept."""


TOO_LONG = TooLong()
Line = bytes | TooLong


@dataclass(frozen=True, slots=True)
class LateRequest:
    """A request an apiserver received late in its graceful termination."""

    audit_id: str | None
    user_agent: str | None
    source_ip: str | None
    user: str | None
    verb: str | None
    resource: str | None
    received: float | None  # epoch seconds, from requestReceivedTimestamp
    annotation: str  # which of the two annotations said so
    loopback: bool | None
    peer: str | None  # the host field of `openshift.io/during-graceful`


@dataclass
class ScanStats:
    """What a run of lines held. Adding two of these gives the counts of both."""

    events: int = 0
    bad: Counter[str] = field(default_factory=Counter)
    api_versions: Counter[str] = field(default_factory=Counter)
    invalid_annotations: int = 0

    @property
    def bad_lines(self) -> int:
        return sum(self.bad.values())

    def add(self, other: ScanStats) -> None:
        self.events += other.events
        self.bad.update(other.bad)
        self.api_versions.update(other.api_versions)
        self.invalid_annotations += other.invalid_annotations


class Problems:
    """The first problems found, each `where: what`, and how many there were in all."""

    def __init__(self, kept: Iterable[str] = (), total: int = 0) -> None:
        self.kept: list[str] = list(kept)[:MAX_PROBLEMS_KEPT]
        self.total = max(total, len(self.kept))

    def add(self, message: str) -> None:
        self.total += 1
        if len(self.kept) < MAX_PROBLEMS_KEPT:
            self.kept.append(message)


class SeenIds:
    """The audit IDs of recently counted late requests, oldest dropped past `capacity`."""

    def __init__(self, ids: Iterable[str] = (), capacity: int = SEEN_IDS_CAPACITY) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict((i, None) for i in ids)
        self._capacity = capacity
        self._trim()

    def first_time(self, audit_id: str) -> bool:
        if audit_id in self._ids:
            return False
        self._ids[audit_id] = None
        self._trim()
        return True

    def ids(self) -> list[str]:
        return list(self._ids)

    def _trim(self) -> None:
        while len(self._ids) > self._capacity:
            self._ids.popitem(last=False)


EventHook = Callable[[str, dict[str, Any]], None]


class Scanner:
    """Classifies lines of one apiserver's audit log, counting into `stats`.

    `scan` returns the late request a line records, once per request (stages of one request
    share an auditID), or None. `on_event(apiserver, event)` sees every valid event.
    """

    def __init__(
        self, seen: SeenIds, problems: Problems, on_event: EventHook | None = None
    ) -> None:
        self._seen = seen
        self._problems = problems
        self._on_event = on_event

    def scan(
        self,
        line: Line,
        apiserver: str,
        stats: ScanStats,
        where: Callable[[], str],
        *,
        tail: bool = False,
    ) -> LateRequest | None:
        """`tail`: the unterminated end of a file that will not grow; counted as truncated
        unless it is a whole event."""
        event = self._event(line, stats, where, tail)
        if event is None:
            return None
        stats.events += 1
        version = event["apiVersion"]
        stats.api_versions[version] += 1
        if self._on_event is not None:
            self._on_event(apiserver, event)
        annotations = event.get("annotations")
        if type(annotations) is not dict or not (
            DURING_GRACEFUL in annotations or SHUTDOWN in annotations
        ):
            return None
        late = late_request(event, annotations)
        if late is None:
            return None
        if isinstance(late, str):
            stats.invalid_annotations += 1
            self._problems.add(f"{where()}: {late}")
            return None
        if late.audit_id is not None and not self._seen.first_time(late.audit_id):
            return None
        return late

    def _event(
        self, line: Line, stats: ScanStats, where: Callable[[], str], tail: bool
    ) -> dict[str, Any] | None:
        reason = BadReason.TOO_LONG
        if type(line) is bytes:
            try:
                event = strictjson.loads(line)
            except ValueError:
                reason = _why_not_json(line)
            else:
                if (
                    type(event) is dict
                    and event.get("kind") == "Event"
                    and str(event.get("apiVersion")).startswith(AUDIT_GROUP)
                ):
                    return event
                reason = BadReason.NOT_AN_EVENT
        self.bad(BadReason.TRUNCATED if tail else reason, stats, where)
        return None

    def bad(
        self, reason: BadReason, stats: ScanStats, where: Callable[[], str], detail: str = ""
    ) -> None:
        stats.bad[reason.value] += 1
        said = reason.value.replace("_", " ")
        self._problems.add(f"{where()}: {said}: {detail}" if detail else f"{where()}: {said}")


def _why_not_json(line: bytes) -> BadReason:
    if not line.strip():
        return BadReason.BLANK
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return BadReason.NOT_UTF8
    return BadReason.NOT_JSON


def late_request(event: dict[str, Any], annotations: dict[str, Any]) -> LateRequest | str | None:
    """The late request `event` records, None if it was not late, or why the annotation is
    not one the apiserver writes (the event is then not counted as late)."""
    loopback: bool | None = None
    peer: str | None = None
    graceful = annotations.get(DURING_GRACEFUL)
    if graceful is not None:
        annotation = DURING_GRACEFUL
        # The value only describes the connection; the annotation's presence is the verdict.
        parts = str(graceful).split(",")
        if len(parts) == 3 and parts[0].startswith("loopback="):
            loopback = _bool(parts[0].removeprefix("loopback="))
            peer = parts[1] or None
    else:
        annotation = SHUTDOWN
        fields = parse_shutdown_annotation(str(annotations[SHUTDOWN]))
        if isinstance(fields, str):
            return fields
        late, loopback = fields
        if not late:
            return None
    return LateRequest(
        audit_id=_text(event.get("auditID")),
        user_agent=_text(event.get("userAgent")),
        source_ip=_first_source_ip(event.get("sourceIPs")),
        user=_username(event.get("user")),
        verb=_text(event.get("verb")),
        resource=_resource(event),
        received=received_at(event),
        annotation=annotation,
        loopback=loopback,
        peer=peer,
    )


def parse_shutdown_annotation(value: str) -> tuple[bool, bool | None] | str:
    """(late, loopback) from an `apiserver.k8s.io/shutdown` value, or why it is invalid."""
    fields: dict[str, str] = {}
    for part in value.split():
        key, sep, val = part.partition("=")
        if not sep:
            return f"{SHUTDOWN}={value[:100]!r}: {part[:40]!r} is not key=value"
        fields[key] = val
    loopback = _bool(fields.get("loopback", ""))
    late = _bool(fields.get("late", ""))
    if late is not None:
        return late, loopback
    threshold = fields.get("threshold", "").removesuffix("%")
    try:
        return float(threshold) > LATE_THRESHOLD_PERCENT, loopback
    except ValueError:
        return f"{SHUTDOWN}={value[:100]!r}: neither late=<bool> nor threshold=<pct>%"


def received_at(event: dict[str, Any]) -> float | None:
    """When the apiserver received the request, in epoch seconds; v1alpha1 had `timestamp`."""
    for key in ("requestReceivedTimestamp", "timestamp", "stageTimestamp"):
        value = event.get(key)
        if type(value) is str:
            try:
                return _dt.datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None


def user_agent_product(user_agent: str | None) -> str:
    """The product token of a User-Agent (`kubelet/v1.29.0 (linux/amd64) kubernetes/abc` ->
    `kubelet`), so a metric label keyed on it stays bounded."""
    if not user_agent:
        return "unknown"
    token = user_agent.split("/", 1)[0].split(" ", 1)[0].strip()
    cleaned = "".join(c for c in token[:64] if c.isalnum() or c in "-_.:")
    return cleaned or "unknown"


def _bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text)


def _text(value: Any) -> str | None:
    return value if type(value) is str and value else None


def _first_source_ip(value: Any) -> str | None:
    # The first is the original client: kube-apiserver lists X-Forwarded-For, then the peer.
    if type(value) is list and value:
        return _text(value[0])
    return None


def _username(value: Any) -> str | None:
    return _text(value.get("username")) if type(value) is dict else None


def _resource(event: dict[str, Any]) -> str | None:
    """`resource[/subresource]`, or the URL path of a non-resource request such as `/readyz`."""
    ref = event.get("objectRef")
    if type(ref) is dict and _text(ref.get("resource")):
        sub = _text(ref.get("subresource"))
        return f"{ref['resource']}/{sub}" if sub else str(ref["resource"])
    uri = _text(event.get("requestURI"))
    return uri.split("?", 1)[0] if uri else None
