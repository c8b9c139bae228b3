"""The warehouse path without a warehouse: `prober export` rows loaded into DuckDB with the
checked-in table schema, the checked-in BigQuery SQL (transpiled by sqlglot) run over them,
and `prober thresholds --from-query-result` on its result equal to `prober thresholds` on the
same summaries."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from prober.cli import main
from tests.support.warehouse import (
    FIRST_START,
    as_bq_json,
    load_rows,
    run_query,
    schema,
    write_summaries,
)

RUNS = 400
END = datetime(2027, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("history")
    write_summaries(directory, RUNS)
    return directory


def export(history: Path, out: Path, *labels: str) -> Path:
    rows = out / "rows.jsonl"
    args = ["export", str(history), "-o", str(rows), *(f"--label={x}" for x in labels)]
    assert main(args) == 0
    return rows


def query(rows: Path, start: datetime = FIRST_START, end: datetime = END) -> list[dict[str, Any]]:
    with duckdb.connect() as connection:
        load_rows(connection, rows)
        return run_query(connection, start, end)


def thresholds(tmp_path: Path, name: str, *args: str) -> dict[str, Any]:
    out = tmp_path / name
    assert main(["thresholds", *args, "--min-runs", "30", "--out", str(out)]) == 0
    doc: dict[str, Any] = json.loads((out / "thresholds.json").read_text())
    return doc


def test_export_query_and_thresholds_agree_exactly(history: Path, tmp_path: Path) -> None:
    rows = export(history, tmp_path, "job_name=periodic-e2e-aws", "upgrade=true")
    result = tmp_path / "result.json"
    result.write_text(as_bq_json(query(rows)))
    warehouse = thresholds(tmp_path, "warehouse", "--from-query-result", str(result))
    local = thresholds(tmp_path, "local", str(history))
    assert warehouse["entries"] == local["entries"]  # every percentile, to the last bit
    assert {e["platform"] for e in local["entries"]} == {"aws", "gcp", "azure", "metal", "all"}
    assert warehouse["period"] == {"start": "2026-10-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"}
    assert local["period"]["start"] == "2026-10-01T00:00:00.000000Z"


def test_the_query_takes_the_runs_of_its_period_and_a_run_loaded_twice_once(
    history: Path, tmp_path: Path
) -> None:
    rows = export(history, tmp_path)
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(rows.read_text() * 2)
    once, twice = query(rows), query(doubled)
    assert twice == once
    # Runs start 7 minutes apart: the 100th at 11:33, the 101st at 11:40.
    hundredth = datetime(2026, 10, 1, 11, 34, tzinfo=UTC)
    early = query(rows, FIRST_START, hundredth)
    assert max(r["runs"] for r in early if r["platform"] == "all") == 100
    summaries = sorted(history.rglob("summary.json"))[:100]
    result = tmp_path / "early.json"
    result.write_text(as_bq_json(early))
    warehouse = thresholds(tmp_path, "early", "--from-query-result", str(result))
    local = thresholds(tmp_path, "early-local", *map(str, summaries))
    assert warehouse["entries"] == local["entries"]


def test_one_platform_has_no_pooled_entries_either_way(tmp_path: Path) -> None:
    history = tmp_path / "gcp-only"
    write_summaries(history, 60, seed=3, platforms=("gcp",))
    result = tmp_path / "result.json"
    result.write_text(as_bq_json(query(export(history, tmp_path))))
    warehouse = thresholds(tmp_path, "warehouse", "--from-query-result", str(result))
    local = thresholds(tmp_path, "local", str(history))
    assert warehouse["entries"] == local["entries"]
    assert {e["platform"] for e in local["entries"]} == {"gcp"}


def assert_fits_schema(row: dict[str, Any]) -> None:
    """Every column the row has is the schema's, of its type; null only where nullable."""
    fields = {f["name"]: f for f in schema()}
    kinds = {"STRING": str, "INTEGER": int, "FLOAT": float, "BOOLEAN": bool, "TIMESTAMP": str}
    assert set(row) <= set(fields), set(row) - set(fields)
    for name, field in fields.items():
        value = row.get(name)
        if value is None:
            assert field["mode"] == "NULLABLE", name
        else:
            assert isinstance(value, kinds[field["type"]]), (name, value)
    assert row["schema_version"] == 1


def test_every_row_fits_the_schema(history: Path, tmp_path: Path) -> None:
    rows = export(history, tmp_path, "network_type=OVNKubernetes", "release=4.21")
    seen = set()
    for line in rows.read_text().splitlines():
        row = json.loads(line)
        seen.add(row["row_type"])
        assert_fits_schema(row)
        assert (row["network_type"], row["release"], row["upgrade"]) == (
            "OVNKubernetes",
            "4.21",
            None,
        )
    assert seen == {"stream", "shutdown", "interval"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "colour=blue"], "--label 'colour=blue': expected KEY=VALUE with KEY one of "
         "network_type, topology, upgrade, release, job_name, job_run_id"),
        (["--label", "upgrade=maybe"], "--label 'upgrade=maybe': expected true or false"),
        (["--label", "release=4.21", "--label", "release=4.22"], "--label release: given twice"),
    ],
)  # fmt: skip
def test_bad_labels_are_one_line_and_exit_2(
    history: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["export", str(history / "run-000000"), *args]) == 2
    assert capsys.readouterr().err == f"prober export: {message}\n"


def test_a_summary_without_its_start_time_is_named(tmp_path: Path, capsys) -> None:
    old = tmp_path / "summary.json"
    old.write_text(json.dumps({"v": 2, "run_id": "r", "platform": "aws", "windows": [],
                               "streams": [], "worst": []}))  # fmt: skip
    assert main(["export", str(old)]) == 2
    assert capsys.readouterr().err == (
        f"prober export: {old}: no 'started' (written before summaries carried the run's start "
        "time): run prober analyze on its event log again\n"
    )


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ('[{"platform": "aws"}]', "row 0: no column 'lb' (is this thresholds.sql's result?)"),
        ('{"a": 1}', "row 0: no column 'platform' (is this thresholds.sql's result?)"),
        ("[1]", "row 0: expected an object"),
        ("not json", "1: not JSON or JSON lines: Expecting value: line 1 column 1 (char 0)"),
        ('{"a": 1}\n{"p99": NaN}', "2: p99: expected a finite number, got NaN"),
        ('[{"a": 1},\n {"p99": NaN}]', "2: [1].p99: expected a finite number, got NaN"),
    ],
)
def test_a_bad_query_result_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], result: str, message: str
) -> None:
    path = tmp_path / "result.json"
    path.write_text(result)
    assert main(["thresholds", "--from-query-result", str(path), "--out", str(tmp_path)]) == 2
    separator = ":" if message[0].isdigit() else ": "  # a line number follows the name
    assert capsys.readouterr().err == f"prober thresholds: {path}{separator}{message}\n"
