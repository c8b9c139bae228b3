"""ci-data-loader's autodl files (`prober-<row type>-<stamp>-autodl.json`): the warehouse rows
`export.export_rows` makes of a summary, one file per row type, in origin's `DataFile` shape
(origin `pkg/dataloader/types.go`; origin_types.DataFile).

Every file names the same table, with the whole schema of `deploy/warehouse/rows.schema.json`:
the loader then builds the very table `prober export` loads (one table, four kinds of row,
`row_type`), and `deploy/warehouse/thresholds.sql` runs on it with only its table name
changed. The loader adds `JobRunName` and `Source`; `started` is the partition column, so it
adds no `PartitionTime`.

Values. A row is a map of strings (`Rows []map[string]string`): an int64 as its digits, a
float64 as Python's shortest repr (which Go's ParseFloat and BigQuery read back exactly), a
bool as `true`/`false`, a timestamp as the RFC 3339 text the summary holds. A null is left
out: a string map cannot say null, an empty string is no int64, float64 or timestamp, and
the loader's schema columns are optional ("the data does not have to be included").
A row type without rows writes no file, as origin's own writers do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

from prober.core.numbers import micro
from prober.report.history.export import Row
from prober.report.schema.origin_types import AutodlType, DataFile

TABLE: Final = "prober_run_rows"
PARTITION_COLUMN: Final = "started"
CHUNK_SIZE: Final = 5000  # the loader's default, stated
EXPIRATION_DAYS: Final = 365  # likewise; both are read only when the table is created
ROW_TYPES: Final = ("stream", "shutdown", "interval", "restart")

# deploy/warehouse/rows.schema.json's columns, in its order, with the loader's name of each
# BigQuery type. A copy, because the image holds the prober package only (Dockerfile): the
# file is not there where `prober origin` runs. tests/report/test_origin.py holds the two equal.
SCHEMA: Final[Mapping[str, AutodlType]] = {
    "schema_version": "int64",
    "row_type": "string",
    "run_id": "string",
    "started": "timestamp",
    "platform": "string",
    "network_type": "string",
    "topology": "string",
    "upgrade": "bool",
    "release": "string",
    "job_name": "string",
    "job_run_id": "string",
    "stream": "string",
    "lb": "string",
    "protocol": "string",
    "connection": "string",
    "samples": "int64",
    "disruption_seconds": "float64",
    "windows": "int64",
    "host": "string",
    "node": "string",
    "delay": "float64",
    "closed_by": "string",
    "t0": "float64",
    "t0_lo": "float64",
    "t0_hi": "float64",
    "late": "int64",
    "failures": "int64",
    "max_elapsed": "float64",
    "reaction": "float64",
    "reaction_lo": "float64",
    "reaction_hi": "float64",
    "bound_by": "string",
    "start_t": "float64",
    "end_t": "float64",
    "seconds": "float64",
    "start_lo": "float64",
    "start_hi": "float64",
    "end_lo": "float64",
    "end_hi": "float64",
    "error": "string",
    "detail": "string",
    "interval_samples": "int64",
    "felt_disruption_seconds": "float64",
    "felt": "bool",
    "pattern": "string",
    "pattern_confidence": "string",
    "pattern_evidence": "string",
    "start": "int64",
    "holder": "string",
    "t1": "float64",
    "t1_lo": "float64",
    "t1_hi": "float64",
    "t1_lo_by": "string",
    "t1_hi_by": "string",
    "add_back_seconds": "float64",
    "add_back_lo": "float64",
    "add_back_hi": "float64",
    "add_back_budget": "float64",
    "add_back_verdict": "string",
    "early": "int64",
    "unattributed": "int64",
    "complete": "bool",
}


def autodl_files(rows: Sequence[Row]) -> dict[str, DataFile]:
    """Per row type that has rows, its data file."""
    files: dict[str, DataFile] = {}
    for row_type in ROW_TYPES:
        found = [_strings(r) for r in rows if r["row_type"] == row_type]
        if found:
            files[row_type] = {
                "table_name": TABLE,
                "schema": dict(SCHEMA),
                "schema_mapping": {},
                "rows": found,
                "chunk_size": CHUNK_SIZE,
                "expiration_days": EXPIRATION_DAYS,
                "partition_column": PARTITION_COLUMN,
            }
    return files


def _strings(row: Row) -> dict[str, str]:
    return {
        name: as_string(SCHEMA[name], value) for name, value in row.items() if value is not None
    }


def as_string(kind: AutodlType, value: object) -> str:
    """A row value as the loader reads a value of its column's type."""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "json":
        return json.dumps(value, allow_nan=False, separators=(",", ":"))
    if kind == "float64" and isinstance(value, int | float):
        return repr(micro(float(value)))
    return str(value)
