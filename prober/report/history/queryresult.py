"""`prober thresholds --from-query-result`: the result of `deploy/warehouse/thresholds.sql`
as the same thresholds.json `prober thresholds` writes from summaries.

Read as BigQuery hands it out: `bq query --format=json` (one JSON array, every value a
string), or newline-delimited JSON (the console's download, `bq extract`), numbers as numbers
or as strings. Timestamps as RFC 3339 or as BigQuery prints them (`2026-11-01 00:00:00 UTC`).

Also origin's `query_results.json` (rows with `BackendName`, told by its first row): the
allowed disruption origin computes from CI's BackendDisruption table, where the prober's
`backend-disruption_prober_*.json` files land (docs/ci-formats.md). Only the prober's
backends (`prober-<stream>`) become entries, metric `disruption`; origin's own are skipped
and counted in a note. Its rows are per release, architecture, network and topology too,
which thresholds.json has no place for: of the rows of one platform x LB x protocol x
connection, the one of the most job runs is kept (a tie: the larger P99), the others counted.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from prober.core import strictjson
from prober.core.numbers import is_decimal
from prober.report.history.threshold_rows import (
    ALL_PLATFORMS,
    METRICS,
    QUANTILE_FIELDS,
    Entry,
    sort_entries,
)
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import read_text
from prober.report.schema.keys import Key, parse_key
from prober.report.schema.origin_types import BACKEND_PREFIX, parse_backend_name
from prober.report.schema.types import Metric, Period

COLUMNS = ("platform", "lb", "protocol", "connection", "metric", *QUANTILE_FIELDS, "runs")
# origin's allowed disruption rows (`MasterNodesUpdated` is optional: older files lack it).
ORIGIN_COLUMNS = ("BackendName", "Release", "FromRelease", "Platform", "Architecture",
                  "Network", "Topology", "JobRuns", "P50", "P75", "P95", "P99")  # fmt: skip


def load_query_result(
    path: Path, min_runs: int, note: Callable[[str], None] | None = None
) -> tuple[list[Entry], Period | None]:
    """The entries, in `prober thresholds`' order, and the period the query covered (None
    for origin's file, which does not say). `note` hears what was skipped; by default it
    goes to stderr."""
    rows = _rows(path)
    if rows and "BackendName" in rows[0]:
        return _origin_entries(path, rows, min_runs, note or _note_on_stderr), None
    entries = [_entry(path, i, row, min_runs) for i, row in enumerate(rows)]
    periods = {_period(path, i, row) for i, row in enumerate(rows)}
    if len(periods) > 1:
        raise BadInput(f"{path}: rows of more than one period (period_start, period_end)")
    found = periods.pop() if periods else None
    period: Period | None = None if found is None else {"start": found[0], "end": found[1]}
    return sort_entries(entries), period


def _rows(path: Path) -> list[Mapping[str, object]]:
    text = read_text(path)
    stripped = text.lstrip()
    found: object
    if stripped.startswith("["):
        found = _parsed(path, text)
    else:
        lines = enumerate(text.splitlines(), 1)
        found = [_parsed(path, line, n) for n, line in lines if line.strip()]
    if not isinstance(found, list):
        raise BadInput(f"{path}: expected a JSON array of rows, or JSON lines")
    rows: list[Mapping[str, object]] = []
    for index, row in enumerate(found):
        if not isinstance(row, dict):
            raise BadInput(f"{path}: row {index}: expected an object")
        rows.append(row)
    return rows


def _parsed(path: Path, text: str, line: int | None = None) -> object:
    """One JSON document: the whole file (`line` None), or line `line` of JSON lines."""
    try:
        return strictjson.loads(text)
    except strictjson.JSONInputError as exc:
        if exc.field is not None and line is not None:
            raise BadInput(f"{path}:{line}: {exc}") from None
        raise BadInput(strictjson.located(str(path), exc, "not JSON or JSON lines")) from None
    except ValueError as exc:
        where = str(path) if line is None else f"{path}:{line}"
        raise BadInput(f"{where}: not JSON or JSON lines: {exc}") from None


def _entry(path: Path, index: int, row: Mapping[str, object], min_runs: int) -> Entry:
    where = f"{path}: row {index}"
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise BadInput(f"{where}: no column {missing[0]!r} (is this thresholds.sql's result?)")
    lb, protocol, connection = parse_key(row, where)
    metric = row["metric"]
    if metric not in METRICS:
        raise BadInput(f"{where}.metric: {metric!r} is not one of {list(METRICS)}")
    platform = row["platform"]
    if not isinstance(platform, str):
        raise BadInput(f"{where}.platform: expected a string, got {platform!r:.40}")
    p50, p75, p95, p99 = (_number(where, row, name) for name in QUANTILE_FIELDS)
    runs = _count(where, row, "runs")
    checked: Metric = "reaction" if metric == "reaction" else "disruption"
    return Entry(
        platform.lower(), lb, protocol, connection, checked,
        p50=p50, p75=p75, p95=p95, p99=p99, runs=runs, usable=runs >= min_runs,
    )  # fmt: skip


def _number(where: str, row: Mapping[str, object], name: str) -> float:
    value = row[name]
    try:
        # A string is what `bq --format=json` gives; float() of its shortest repr is exact.
        number = float(value) if isinstance(value, str | int | float) else math.nan
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise BadInput(f"{where}.{name}: expected a number, got {value!r:.40}")
    return number


def _count(where: str, row: Mapping[str, object], name: str) -> int:
    value = row[name]
    if isinstance(value, str) and is_decimal(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput(f"{where}.{name}: expected a positive integer, got {value!r:.40}")
    return value


def _origin_entries(
    path: Path, rows: list[Mapping[str, object]], min_runs: int, note: Callable[[str], None]
) -> list[Entry]:
    kept: dict[tuple[str, Key], Entry] = {}
    others: Counter[str] = Counter()  # origin's own backends, by name
    aside = unplaced = 0
    for index, row in enumerate(rows):
        entry = _origin_entry(f"{path}: row {index}", row, min_runs)
        if isinstance(entry, str):
            others[entry] += 1
            continue
        if not entry.platform:  # origin's history has rows of jobs of no known platform
            unplaced += 1
            continue
        ident = (entry.platform, entry.key)
        current = kept.get(ident)
        if current is not None:
            aside += 1
        if current is None or (entry.runs, entry.p99) > (current.runs, current.p99):
            kept[ident] = entry
    if not kept:
        raise BadInput(
            f"{path}: none of its {len(rows)} rows is a prober backend ({BACKEND_PREFIX}<stream>)"
        )
    if others:
        note(
            f"{path}: skipped {others.total()} rows of {len(others)} backends not the "
            f"prober's (origin's own, e.g. {min(others)})"
        )
    if unplaced:
        note(f"{path}: skipped {unplaced} rows of the prober's without a Platform")
    if aside:
        note(
            f"{path}: {aside} rows of a platform x LB x protocol x connection read before "
            "(another release, architecture, network, topology or target): kept the row of "
            "the most job runs"
        )
    return sort_entries(kept.values())


def _origin_entry(where: str, row: Mapping[str, object], min_runs: int) -> Entry | str:
    """A prober backend's row as an entry, or the name of a backend that is not ours."""
    missing = [c for c in ORIGIN_COLUMNS if c not in row]
    if missing:
        raise BadInput(f"{where}: no column {missing[0]!r} (is this origin's query_results.json?)")
    name, platform = _string(where, row, "BackendName"), _string(where, row, "Platform")
    stream = parse_backend_name(name)
    if stream is None:
        return name
    p50, p75, p95, p99 = (_number(where, row, q.upper()) for q in QUANTILE_FIELDS)
    runs = _count(where, row, "JobRuns")
    return Entry(
        platform.lower(), stream.lb, stream.protocol, stream.connection, "disruption",
        p50=p50, p75=p75, p95=p95, p99=p99, runs=runs, usable=runs >= min_runs,
    )  # fmt: skip


def _string(where: str, row: Mapping[str, object], name: str) -> str:
    value = row[name]
    if not isinstance(value, str):
        raise BadInput(f"{where}.{name}: expected a string, got {value!r:.40}")
    return value


def _note_on_stderr(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def _period(path: Path, index: int, row: Mapping[str, object]) -> tuple[str, str] | None:
    start, end = row.get("period_start"), row.get("period_end")
    if start is None and end is None:
        return None
    where = f"{path}: row {index}"
    return _timestamp(where, "period_start", start), _timestamp(where, "period_end", end)


def _timestamp(where: str, name: str, value: object) -> str:
    """RFC 3339 in UTC, from what BigQuery or DuckDB print for a TIMESTAMP."""
    text = value.strip() if isinstance(value, str) else ""
    if text.endswith(" UTC"):
        text = text[: -len(" UTC")] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"{where}.{name}: expected a timestamp, got {value!r:.40}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def runs_in(entries: Iterable[Entry]) -> int:
    """How many runs a query's result covers: per platform, its most counted key (every
    run has a disruption value for each of its keys)."""
    most: dict[str, int] = {}
    for e in entries:
        if e.platform != ALL_PLATFORMS:
            most[e.platform] = max(most.get(e.platform, 0), e.runs)
    return sum(most.values())
