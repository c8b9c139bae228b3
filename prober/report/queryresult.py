"""`prober thresholds --from-query-result`: the result of `deploy/warehouse/thresholds.sql`
as the same thresholds.json `prober thresholds` writes from summaries.

Read as BigQuery hands it out: `bq query --format=json` (one JSON array, every value a
string), or newline-delimited JSON (the console's download, `bq extract`), numbers as numbers
or as strings. Timestamps as RFC 3339 or as BigQuery prints them (`2026-11-01 00:00:00 UTC`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from prober.report.documents import Metric, Period
from prober.report.errors import BadInput
from prober.report.summary import parse_key, read_text
from prober.report.thresholds import ALL_PLATFORMS, METRICS, QUANTILE_FIELDS, Entry, sort_entries

COLUMNS = ("platform", "lb", "protocol", "connection", "metric", *QUANTILE_FIELDS, "runs")


def load_query_result(path: Path, min_runs: int) -> tuple[list[Entry], Period | None]:
    """The entries, in `prober thresholds`' order, and the period the query covered."""
    rows = _rows(path)
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
    try:
        if stripped.startswith("["):
            found = json.loads(text)
        else:
            found = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise BadInput(f"{path}: not JSON or JSON lines: {exc}") from None
    if not isinstance(found, list):
        raise BadInput(f"{path}: expected a JSON array of rows, or JSON lines")
    rows: list[Mapping[str, object]] = []
    for index, row in enumerate(found):
        if not isinstance(row, dict):
            raise BadInput(f"{path}: row {index}: expected an object")
        rows.append(row)
    return rows


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
    runs = _count(where, row)
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


def _count(where: str, row: Mapping[str, object]) -> int:
    value = row["runs"]
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadInput(f"{where}.runs: expected a positive integer, got {value!r:.40}")
    return value


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
