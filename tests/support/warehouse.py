"""Many runs' summaries in the shape `prober analyze` writes (windows, streams, intervals, and
`worst` drawn from them by the product's own rule), and the warehouse on an embedded engine:
the export's rows in DuckDB, the checked-in BigQuery SQL transpiled by sqlglot."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prober.core.models import LB, Connection, Protocol, StreamId, rfc3339
from prober.report.results.summary import SUMMARY_VERSION, worst_entries
from prober.report.schema.types import IntervalEntry, SummaryDocument, WindowEntry

REPO = Path(__file__).resolve().parents[2]
WAREHOUSE = REPO / "deploy" / "warehouse"
TABLE = "prober.run_rows"
PLATFORMS = ("aws", "gcp", "azure", "metal")
LBS = (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK)
FIRST_START = datetime(2026, 10, 1, tzinfo=UTC)
DUCKDB_TYPES = {
    "STRING": "VARCHAR",
    "INTEGER": "BIGINT",
    "FLOAT": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMPTZ",
}


def streams_of(rng: random.Random) -> list[StreamId]:
    """Every LB x protocol x connection; now and then a second target on one LB, whose
    streams share keys with the first (the key's value is then the larger)."""
    streams = [StreamId("kube-api", p, lb, c) for lb in LBS for p in Protocol for c in Connection]
    if rng.random() < 0.2:
        streams += [
            StreamId("kube-api-alt", p, LB.INTERNAL, c) for p in Protocol for c in Connection
        ]
    return streams


def summary(
    index: int, rng: random.Random, platforms: tuple[str, ...] = PLATFORMS
) -> SummaryDocument:
    streams = streams_of(rng)
    platform = rng.choice(platforms)
    if rng.random() < 0.05:
        platform = platform.upper()  # as an Infrastructure object may say it
    windows = [_window(w, streams, rng) for w in range(rng.choice((0, 1, 3, 3)))]
    intervals = {s.name: _intervals(rng) for s in streams}
    seconds = {
        name: sum(i["end_t"] - i["start_t"] for i in found) for name, found in intervals.items()
    }
    started = FIRST_START + timedelta(minutes=7 * index)
    return {
        "v": SUMMARY_VERSION,
        "run_id": f"run-{index:06d}",
        "started": rfc3339(started.timestamp()),
        "platform": platform,
        "windows": windows,
        "streams": [
            {
                **_ids(s),
                "samples": rng.randint(100, 5000),
                "retried": {},
                "disruption_seconds": seconds[s.name],
                "intervals": intervals[s.name],
            }
            for s in streams
        ],
        "worst": worst_entries(streams, windows, seconds, seconds),
    }


def _ids(s: StreamId) -> dict[str, str]:
    return {"stream": s.name, "lb": s.lb.value, "protocol": s.protocol.value,
            "connection": s.connection.value}  # fmt: skip


def _window(index: int, streams: list[StreamId], rng: random.Random) -> WindowEntry:
    t0 = round(100.0 + 200 * index + rng.random(), 6)
    entries = []
    for s in streams:
        late = rng.choice((0, 0, 1, 5, 40))
        reaction = round(rng.uniform(-0.05, 25.0), 6) if late else None
        entries.append({
            **_ids(s), "late": late, "max_elapsed": None if not late else float(rng.randint(0, 70)),
            "reaction": reaction,
            "reaction_lo": None if reaction is None else round(reaction - rng.random() / 10, 6),
            "reaction_hi": None if reaction is None else round(reaction + rng.random() / 10, 6),
            "bound_by": None if reaction is None else rng.choice(("failure", "sampling")),
            "failures": rng.choice((0, 0, 2)),
        })  # fmt: skip
    return {"host": f"host-{index}", "node": f"master-{index}", "delay": 70.0, "t0": t0,
            "t0_lo": round(t0 - 0.02, 6), "t0_hi": round(t0 + 0.01, 6), "closed_by": "stopped",
            "streams": entries}  # type: ignore[typeddict-item]  # fmt: skip


def _intervals(rng: random.Random) -> list[IntervalEntry]:
    found: list[IntervalEntry] = []
    start = 50.0
    for _ in range(rng.choice((0, 0, 0, 1, 2))):
        start = round(start + rng.uniform(1, 100), 6)
        end = round(start + rng.uniform(0.01, 4), 6)
        found.append({
            "start_t": start, "end_t": end, "start_lo": round(start - 0.05, 6),
            "start_hi": start, "end_lo": round(end - 0.05, 6), "end_hi": end,
            "start_ts": "2026-10-01T00:00:00Z", "end_ts": "2026-10-01T00:00:01Z",
            "error": "connect_refused", "detail": "connection refused", "samples": 3,
        })  # fmt: skip
        start = end
    return found


def write_summaries(
    directory: Path, count: int, seed: int = 7, platforms: tuple[str, ...] = PLATFORMS
) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for index in range(count):
        run = directory / f"run-{index:06d}" / "summary.json"
        run.parent.mkdir(parents=True, exist_ok=True)
        run.write_text(json.dumps(summary(index, rng, platforms)))
        paths.append(run)
    return paths


def schema() -> list[dict[str, str]]:
    fields: list[dict[str, str]] = json.loads((WAREHOUSE / "rows.schema.json").read_text())
    return fields


def load_rows(connection: Any, rows: Path) -> None:
    """The export's rows into `prober.run_rows`, typed by the checked-in schema (a row the
    schema does not describe fails the load, as `bq load` would fail it)."""
    fields = schema()
    columns = {f["name"]: DUCKDB_TYPES[f["type"]] for f in fields}
    definition = ", ".join(
        f"{name} {kind}{' NOT NULL' if f['mode'] == 'REQUIRED' else ''}"
        for (name, kind), f in zip(columns.items(), fields, strict=True)
    )
    connection.execute("CREATE SCHEMA IF NOT EXISTS prober")
    connection.execute(f"CREATE TABLE {TABLE} ({definition})")
    spec = "{" + ", ".join(f"'{n}': '{k}'" for n, k in columns.items()) + "}"
    connection.execute(
        f"INSERT INTO {TABLE} SELECT * FROM read_json(?, format='newline_delimited', "
        f"columns={spec}, union_by_name=false)",
        [str(rows)],
    )


def thresholds_query() -> str:
    """The checked-in BigQuery SQL, as DuckDB runs it."""
    import sqlglot

    text = (WAREHOUSE / "thresholds.sql").read_text()
    (statement,) = sqlglot.transpile(text, read="bigquery", write="duckdb")
    return statement


def run_query(connection: Any, start: datetime, end: datetime) -> list[dict[str, Any]]:
    cursor = connection.execute(thresholds_query(), {"start": start, "end": end})
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def as_bq_json(result: list[dict[str, Any]]) -> str:
    """What `bq query --format=json` prints: an array, every value a string."""

    def text(value: object) -> str:
        if isinstance(value, datetime):
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return value if isinstance(value, str) else repr(value)

    return json.dumps([{k: text(v) for k, v in row.items()} for row in result])
