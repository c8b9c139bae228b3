"""Restarted apiservers in the warehouse rows and ci-data-loader's autodl files: a row per
instance x LB, every value as summary.json's `restarts` has it, fitting the table schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.report.ci.origin_autodl import SCHEMA
from tests.factories import OTHER, STREAM
from tests.report.daemonlog import run_record, write_daemon_log
from tests.report.test_restarts import early_run
from tests.report.test_warehouse import assert_fits_schema


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("restart-rows")
    log = tmp / "events.jsonl"
    write_daemon_log(log, run_record([STREAM, OTHER]), early_run())
    assert main(["analyze", str(log), "--out", str(tmp / "out")]) == 1  # early: failed
    return tmp / "out" / "summary.json"


def test_a_row_per_restarted_instance_and_lb(summary: Path, tmp_path: Path) -> None:
    rows_file = tmp_path / "rows.jsonl"
    assert main(["export", str(summary), "-o", str(rows_file), "--label=release=4.21"]) == 0
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    for row in rows:
        assert_fits_schema(row)
    restarts = [r for r in rows if r["row_type"] == "restart"]
    [instance] = json.loads(summary.read_text())["restarts"]["instances"]
    assert [r["lb"] for r in restarts] == [b["lb"] for b in instance["lbs"]]
    for row, back in zip(restarts, instance["lbs"], strict=True):
        assert (row["stream"], row["protocol"], row["connection"]) == (None, None, None)
        assert (row["host"], row["start"], row["holder"], row["complete"]) == ("A", 2, None, True)
        assert (row["t1"], row["t1_lo"], row["t1_hi"]) == (
            instance["t1"],
            instance["t1_lo"],
            instance["t1_hi"],
        )
        assert (row["t1_lo_by"], row["t1_hi_by"]) == ("old-instance", "internal-lb answer")
        assert (row["add_back_seconds"], row["add_back_lo"], row["add_back_hi"]) == (
            back["seconds"],
            back["seconds_lo"],
            back["seconds_hi"],
        )
        assert (row["add_back_budget"], row["add_back_verdict"]) == (30.0, "within")
        assert (row["early"], row["unattributed"]) == (4, 0)
        assert row["release"] == "4.21"


def test_the_autodl_file_of_restart_rows(summary: Path, tmp_path: Path) -> None:
    assert main(["origin", str(summary), "--out", str(tmp_path)]) == 0
    [found] = tmp_path.glob("prober-restart-*-autodl.json")
    data = json.loads(found.read_text())
    assert data["schema"] == dict(SCHEMA)
    assert [r["lb"] for r in data["rows"]] == ["external-lb", "internal-lb"]
    assert {r["early"] for r in data["rows"]} == {"4"}
    assert all("stream" not in r for r in data["rows"])  # null: left out
