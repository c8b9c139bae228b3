"""`audit-summary.json` (written by `prober audit summarize`), as typed dicts.

    {"v": 1, "files", "events", "bad_lines",
     "late": [{"apiserver", "user_agent", "source_ip", "user", "verb", "resource",
               "count", "first", "last"}],
     "apiservers", "bad", "api_versions", "invalid_annotations", "problems",
     "problems_total", "notes", "windows"?, "prober"?}

The types are the document as `json.dumps` writes it (times as RFC 3339 strings, null where
unknown), so `AuditSummary.to_json` is checked key by key. `windows` is there only when
shutdown spans were given or found, `prober` only with the prober's event logs.
"""

from typing import Literal, NotRequired, TypedDict


class ArrivalFields(TypedDict):
    count: int
    first: str | None
    last: str | None


class FileEntry(TypedDict):
    path: str
    apiserver: str
    events: int
    bad_lines: int


class LateGroup(ArrivalFields):
    """Late requests to one apiserver from one client, for one verb and resource."""

    apiserver: str
    user_agent: str | None
    source_ip: str | None
    user: str | None
    verb: str | None
    resource: str | None
    prober_stream: str | None  # its User-Agent names the prober's stream (`audit.own`)


class ApiserverEntry(TypedDict):
    apiserver: str
    events: int
    bad_lines: int
    late: int


class WindowEntry(TypedDict):
    """The requests one apiserver received during one shutdown span."""

    apiserver: str
    audited: bool  # whether any audit log of this apiserver was read
    source: str  # "prober" or "events"
    node: str | None
    host: str | None
    start: str
    end: str | None  # None: the end was never seen
    requests: int
    late: int
    user_agents: dict[str, int]


class ProberLate(ArrivalFields):
    """The prober's own late requests on one stream to one apiserver."""

    apiserver: str
    stream: str
    lb: str
    protocol: str
    connection: str
    failed: int  # of them, those the prober saw fail


class ProberSection(TypedDict):
    event_logs: list[str]
    records: int
    skipped_lines: int
    samples: int
    late_requests: int
    late: list[ProberLate]


class AuditSummaryDocument(TypedDict):
    v: Literal[1]
    files: list[FileEntry]
    events: int
    bad_lines: int
    late: list[LateGroup]
    apiservers: list[ApiserverEntry]
    bad: dict[str, int]  # reason -> lines
    api_versions: dict[str, int]
    invalid_annotations: int
    problems: list[str]  # the first ones
    problems_total: int
    notes: list[str]
    windows: NotRequired[list[WindowEntry]]
    prober: NotRequired[ProberSection]
