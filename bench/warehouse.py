"""The warehouse path at the scale of a month of CI: N generated runs (default 10,000)
exported, loaded with the checked-in schema, the checked-in BigQuery SQL run on DuckDB
(transpiled by sqlglot), and `prober thresholds --from-query-result` on its result, against
`prober thresholds` over the same summaries: whether they agree exactly, and each step's time.

The baseline is `prober thresholds` over the summaries, timed in the same run; the other
steps are printed as a ratio of it (these machines are noisy: only same-run ratios compare).

    .venv/bin/python bench/warehouse.py [--runs 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb

from prober.cli import main
from tests.support.warehouse import (
    FIRST_START,
    as_bq_json,
    load_rows,
    run_query,
    write_summaries,
)

END = datetime(2100, 1, 1, tzinfo=UTC)


@contextlib.contextmanager
def timed(name: str, times: dict[str, float]) -> Iterator[None]:
    start = time.perf_counter()
    yield
    times[name] = time.perf_counter() - start


def quiet(call: Callable[[], int]) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return call()


def run(runs: int, work: Path) -> int:
    times: dict[str, float] = {}
    history, rows, result = work / "history", work / "rows.jsonl", work / "result.json"
    with timed("generate summaries", times):
        write_summaries(history, runs)
    with timed("prober thresholds (summaries)", times):
        assert quiet(lambda: main(["thresholds", str(history), "--out", str(work / "local")])) == 0
    with timed("prober export", times):
        assert quiet(lambda: main(["export", str(history), "-o", str(rows)])) == 0
    with duckdb.connect() as connection:
        with timed("load rows (DuckDB)", times):
            load_rows(connection, rows)
        with timed("thresholds.sql (DuckDB)", times):
            found = run_query(connection, FIRST_START, END)
    result.write_text(as_bq_json(found))
    args = ["thresholds", "--from-query-result", str(result), "--out", str(work / "warehouse")]
    with timed("prober thresholds --from-query-result", times):
        assert quiet(lambda: main(args)) == 0
    local = json.loads((work / "local" / "thresholds.json").read_text())["entries"]
    warehouse = json.loads((work / "warehouse" / "thresholds.json").read_text())["entries"]
    rows_count = sum(1 for _ in rows.open())
    baseline = times["prober thresholds (summaries)"]
    print(f"{runs} runs, {rows_count} rows ({rows.stat().st_size / 1e6:.1f} MB), "
          f"{len(local)} threshold entries")  # fmt: skip
    for name, seconds in times.items():
        print(f"  {name:<40} {seconds:8.2f} s   {seconds / baseline:6.2f}x baseline")
    same = local == warehouse
    differ = sum(a != b for a, b in zip(local, warehouse, strict=False))
    print(f"export -> query -> thresholds agrees exactly with prober thresholds: {same}"
          + ("" if same else f" ({differ} entries differ)"))  # fmt: skip
    return 0 if same else 1


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prober-warehouse-") as work:
        return run(args.runs, Path(work))


if __name__ == "__main__":
    sys.exit(cli())
