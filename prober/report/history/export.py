"""`prober export`: summary.json files as warehouse rows, newline-delimited JSON that
`bq load --source_format=NEWLINE_DELIMITED_JSON` takes with `deploy/warehouse/rows.schema.json`.

One table, four kinds of row (`row_type`), each carrying the run's labels:
- `stream`: one per run x stream: its samples and disruption seconds (raw, and as a client
  felt them), and how many shutdown windows the run saw (a run with none contributes no
  reaction to the history);
- `shutdown`: one per run x apiserver shutdown x stream: the reaction with its bound and what
  set it, late requests, failures, the window's T0 with its bound;
- `interval`: one per disruption interval, with its edges' bounds and whether a client felt it;
- `restart`: one per restarted apiserver x LB (summary.json's `restarts`): T1 with its bound
  and the signals that set it, the LB's add-back with its bound against its worst, the early
  and unattributed failures through it. It has no stream: `stream`, `protocol` and
  `connection` are null on it (those columns were relaxed to NULLABLE for it; a table made
  before takes the rows with `bq load --schema_update_option=ALLOW_FIELD_RELAXATION`).
`deploy/warehouse/thresholds.sql` turns them into the same percentiles `prober thresholds`
computes from the summaries (`tests/report/test_warehouse.py` holds the two equal).

Field names are stable; a change to any is a new `schema_version`. A field added is no change:
a summary written before it has none, and its rows carry null there.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from prober.common import filekinds
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.models import LB, StreamId, StreamNameError
from prober.report.history.history import RunFacts, load_run_facts, started_of
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import read_json
from prober.report.schema.keys import parse_key

EXPORT_VERSION: Final = 1
# The run's labels: what the release team slices the history by. `platform` comes from the
# summary; the rest from `--label` (a CI step knows them from its environment).
LABELS: Final = ("network_type", "topology", "upgrade", "release", "job_name", "job_run_id")
BOOLEAN_LABELS: Final = frozenset({"upgrade"})
_TRUE, _FALSE = {"true", "yes", "1"}, {"false", "no", "0"}

Row = dict[str, Any]


def parse_labels(pairs: Sequence[str]) -> dict[str, str | bool]:
    """`KEY=VALUE` flags: known keys only, each once; `upgrade` is true or false."""
    labels: dict[str, str | bool] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in LABELS:
            raise BadInput(
                f"--label {pair!r}: expected KEY=VALUE with KEY one of {', '.join(LABELS)}"
            )
        if key in labels:
            raise BadInput(f"--label {key}: given twice")
        if key in BOOLEAN_LABELS:
            if value.lower() not in _TRUE | _FALSE:
                raise BadInput(f"--label {pair!r}: expected true or false")
            labels[key] = value.lower() in _TRUE
        else:
            labels[key] = value
    return labels


def read_summary(path: Path) -> tuple[RunFacts, Mapping[str, object]]:
    """The one reading of a summary.json that every command shares (thresholds, --check,
    export, origin): every field checked, each fault one line naming the file and field, so
    that no command passes a summary another refuses."""
    facts = load_run_facts(path)  # the version, the top level, `worst`
    doc = read_json(path, filekinds.SUMMARY)
    for _ in _rows(path, doc, {"schema_version": EXPORT_VERSION}):
        pass  # `windows`, `streams` and their intervals
    return facts, doc


def export_rows(path: Path, labels: Mapping[str, str | bool]) -> Iterator[Row]:
    """The rows of one summary.json, stream rows first, or BadInput naming what is wrong."""
    _, doc = read_summary(path)
    yield from _rows(path, doc, _run_fields(path, doc, labels))


def _rows(path: Path, doc: Mapping[str, object], run: Row) -> Iterator[Row]:
    windows = _list(path, doc, "windows")
    for i, entry in enumerate(_list(path, doc, "streams")):
        where = f"streams[{i}]"
        stream = _object(path, entry, where)
        yield {**run, **_stream_fields(path, stream, where), "row_type": "stream",
               "samples": _get(path, stream, "samples", where, int),
               "disruption_seconds": _get(path, stream, "disruption_seconds", where, float),
               "windows": len(windows),
               "felt_disruption_seconds": _get(path, stream, "felt_disruption_seconds", where,
                                               float, optional=True)}  # fmt: skip
    for w, window in enumerate(windows):
        yield from _shutdown_rows(path, run, window, f"windows[{w}]")
    for i, entry in enumerate(_list(path, doc, "streams")):
        stream = _object(path, entry, f"streams[{i}]")
        ids = _stream_fields(path, stream, f"streams[{i}]")
        for j, interval in enumerate(_get(path, stream, "intervals", f"streams[{i}]", list)):
            yield {**run, **ids, "row_type": "interval",
                   **_interval_fields(path, interval, f"streams[{i}].intervals[{j}]")}  # fmt: skip
    yield from _restart_rows(path, run, doc.get("restarts"))


def write_rows(paths: Sequence[Path], labels: Mapping[str, str | bool], out: TextIO) -> int:
    """Every summary's rows as JSON lines on `out`; the number of rows. A bad summary stops
    the export before its first row is written, so a load never takes half a run."""
    count = 0
    for path in paths:
        rows = list(export_rows(path, labels))
        for row in rows:
            out.write(json.dumps(row, allow_nan=False, separators=(",", ":")) + "\n")
        count += len(rows)
    return count


def _run_fields(path: Path, doc: Mapping[str, object], labels: Mapping[str, str | bool]) -> Row:
    started = started_of(path, doc)
    if started is None:
        raise BadInput(
            f"{path}: no 'started' (written before summaries carried the run's start time):"
            " run prober analyze on its event log again"
        )
    run: Row = {"schema_version": EXPORT_VERSION}
    run["run_id"] = _get(path, doc, "run_id", "", str)
    run["started"] = started
    run["platform"] = _get(path, doc, "platform", "", str).lower()
    for label in LABELS:
        run[label] = labels.get(label)
    return run


def _stream_fields(path: Path, entry: object, where: str) -> Row:
    entry = _object(path, entry, where)
    lb, protocol, connection = parse_key(entry, f"{path}: {where}")
    stream = _get(path, entry, "stream", where, str)
    try:
        StreamId.parse(stream)  # what the origin files name backends by
    except StreamNameError as exc:
        raise BadInput(f"{path}: {where}.stream: {exc}") from None
    return {"stream": stream, "lb": lb.value,
            "protocol": protocol.value, "connection": connection.value}  # fmt: skip


def _shutdown_rows(path: Path, run: Row, window: object, where: str) -> Iterator[Row]:
    window = _object(path, window, where)
    shared: Row = {"host": _get(path, window, "host", where, str),
                   "node": _get(path, window, "node", where, str, optional=True),
                   "delay": _get(path, window, "delay", where, float),
                   "closed_by": _get(path, window, "closed_by", where, str)}  # fmt: skip
    for name in ("t0", "t0_lo", "t0_hi"):
        shared[name] = _get(path, window, name, where, float)
    for s, stream in enumerate(_get(path, window, "streams", where, list)):
        here = f"{where}.streams[{s}]"
        row: Row = {**run, **_stream_fields(path, stream, here), "row_type": "shutdown", **shared}
        for name in ("late", "failures"):
            row[name] = _get(path, stream, name, here, int)
        for name in ("max_elapsed", "reaction", "reaction_lo", "reaction_hi"):
            row[name] = _get(path, stream, name, here, float, optional=True)
        row["bound_by"] = _get(path, stream, "bound_by", here, str, optional=True)
        yield row


def _interval_fields(path: Path, entry: object, where: str) -> Row:
    entry = _object(path, entry, where)
    row: Row = {}
    for name in ("start_t", "end_t"):
        row[name] = _get(path, entry, name, where, float)
    row["seconds"] = row["end_t"] - row["start_t"]  # as `Interval.seconds`
    for name in ("start_lo", "start_hi", "end_lo", "end_hi"):
        row[name] = _get(path, entry, name, where, float, optional=True)
    row["error"] = _get(path, entry, "error", where, str)
    row["detail"] = _get(path, entry, "detail", where, str)
    row["interval_samples"] = _get(path, entry, "samples", where, int)
    row["felt"] = _get(path, entry, "felt", where, bool, optional=True)
    for name in ("pattern", "pattern_confidence", "pattern_evidence"):  # `results.patterns`
        row[name] = _get(path, entry, name, where, str, optional=True)
    return row


def _restart_rows(path: Path, run: Row, section: object) -> Iterator[Row]:
    if section is None:
        return  # a run without restarts, or a summary written before them
    section = _object(path, section, "restarts")
    for i, entry in enumerate(_get(path, section, "instances", "restarts", list)):
        where = f"restarts.instances[{i}]"
        instance = _object(path, entry, where)
        shared: Row = {"host": _get(path, instance, "host", where, str),
                       "node": _get(path, instance, "node", where, str, optional=True),
                       "start": _get(path, instance, "start", where, int),
                       "holder": _get(path, instance, "holder", where, str, optional=True),
                       "complete": _get(path, instance, "complete", where, bool)}  # fmt: skip
        for name in ("t1", "t1_lo", "t1_hi"):
            shared[name] = _get(path, instance, name, where, float, optional=True)
        for name in ("t1_lo_by", "t1_hi_by"):
            shared[name] = _get(path, instance, name, where, str, optional=True)
        for j, back in enumerate(_get(path, instance, "lbs", where, list)):
            yield {**run, "row_type": "restart", **shared,
                   **_add_back_fields(path, back, f"{where}.lbs[{j}]")}  # fmt: skip


def _add_back_fields(path: Path, entry: object, where: str) -> Row:
    entry = _object(path, entry, where)
    lb = _get(path, entry, "lb", where, str)
    try:
        LB(lb)
    except ValueError:
        raise BadInput(f"{path}: {where}.lb: not a load balancer: {lb!r:.40}") from None
    row: Row = {"stream": None, "lb": lb, "protocol": None, "connection": None}
    for name, column in (("seconds", "add_back_seconds"), ("seconds_lo", "add_back_lo"),
                         ("seconds_hi", "add_back_hi"), ("budget", "add_back_budget")):  # fmt: skip
        row[column] = _get(path, entry, name, where, float, optional=True)
    row["add_back_verdict"] = _get(path, entry, "verdict", where, str, optional=True)
    for name in ("early", "unattributed"):
        row[name] = _get(path, entry, name, where, int)
    return row


def _list(path: Path, doc: Mapping[str, object], name: str) -> list[object]:
    value: list[object] = _get(path, doc, name, "", list)
    return value


def _object(path: Path, value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise BadInput(f"{path}: {where}: expected an object")
    return value


def _get(
    path: Path,
    entry: Mapping[str, object],
    name: str,
    where: str,
    kind: type,
    *,
    optional: bool = False,
) -> Any:
    """A field of the expected JSON type (a float field takes an int: JSON spells 5.0 as 5);
    None only where `optional` (a v1 summary has no bounds: they export as null)."""
    value = entry.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool):
        if kind is bool:
            return value
    elif kind is float and isinstance(value, int | float):
        if math.isfinite(value):
            return float(value)
    elif isinstance(value, kind):
        return value
    field = f"{where}.{name}" if where else f"field {name!r}"
    raise BadInput(f"{path}: {field}: expected {_NAMES[kind]}, got {value!r:.40}")


_NAMES = {
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    bool: "true or false",
}


def summary_files(args: Sequence[Path]) -> list[Path]:
    """Summary files named directly, and every summary.json under a directory."""
    files: list[Path] = []
    for arg in args:
        if arg.is_dir():
            found = sorted(arg.rglob("summary.json"))
            if not found:
                raise BadInput(f"{arg}: no summary.json in this directory")
            files += found
        elif arg.is_file():
            files.append(arg)
        else:
            raise BadInput(f"{arg}: no such file")
    return files


def load_facts(args: Sequence[Path], stderr: TextIO) -> list[RunFacts]:
    """Every run once: a summary copied twice into the artifacts would count double."""
    seen: dict[tuple[str, str], str] = {}
    facts = []
    for path in summary_files(args):
        run, _ = read_summary(path)
        ident = (run.platform.lower(), run.run_id)
        if ident in seen:
            print(
                f"warning: {path}: run {run.run_id} already read from {seen[ident]}: skipped",
                file=stderr,
            )
            continue
        seen[ident] = str(path)
        facts.append(run)
    return facts


def export_command(
    summaries: Sequence[Path],
    *,
    labels: Sequence[str],
    output: Path | None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Warehouse rows (JSON lines) of the summaries, on stdout or into `output`."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    parsed = parse_labels(labels)
    paths = summary_files(summaries)
    if output is None:
        count = write_rows(paths, parsed, stdout)
    else:
        # Into a file beside it, renamed when whole: a load never takes half an export.
        partial = output.with_name(output.name + ".partial")
        with writing(output), partial.open("w", encoding="utf-8") as stream:
            count = write_rows(paths, parsed, stream)
        with writing(output):
            partial.replace(output)
    print(f"exported {count} rows from {len(paths)} summaries", file=stderr)
    return ExitCode.OK
