"""The prober's results in OpenShift CI's own files, beside origin's in a job's artifacts
(docs/ci-formats.md):

- `e2e-timelines_prober_<stamp>.json`: monitor intervals, for Sippy's intervals chart (the
  watch streams' blind intervals and doomed re-watches too: `origin_watches`);
- `backend-disruption_prober_<stamp>.json`: per stream, its disruption, which ci-tools loads
  into the BackendDisruption table that origin's allowed disruption is computed from;
- `prober-<row type>-<stamp>-autodl.json`: the warehouse rows, which ci-data-loader loads;

`<stamp>` is the run's start, UTC, `YYYYMMDD-HHMMSS`, as origin stamps its own files.

Every file is built from the rows `export.export_rows` makes of the summary: one reading of
a summary, with its checks, serves the warehouse and these files alike.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO, cast

from prober.common import filekinds
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.core.durations import format_go_duration
from prober.core.models import Connection, StreamId, parse_rfc3339
from prober.report.analyze import analyze_runs, run_dir
from prober.report.ci.origin_autodl import autodl_files
from prober.report.ci.origin_timeline import disruption_line, timeline
from prober.report.ci.origin_watches import watch_intervals
from prober.report.history.export import Row, export_rows, parse_labels, summary_files
from prober.report.schema.errors import BadInput
from prober.report.schema.jsonio import read_json, write_json
from prober.report.schema.origin_types import (
    BackendDisruption,
    BackendDisruptionList,
    DataFile,
    IntervalList,
    backend_name,
)
from prober.report.schema.types import SummaryDocument

OriginDocument = IntervalList | BackendDisruptionList | DataFile


def write_origin_files(
    summary: SummaryDocument, out: Path, *, labels: Mapping[str, str | bool] | None = None
) -> list[Path]:
    """Write the run's files into `out` (created) and return their paths. `labels` are the
    run's warehouse labels (`export.LABELS`), carried by the autodl rows.

    BadInput names what the summary lacks (a summary written before it kept its start time
    has no `started`, and nothing to stamp the files with); OSError is the caller's."""
    rows = _rows(summary, labels or {})
    started = rows[0]["started"] if rows else summary["started"]
    stamp = _stamp(started)
    watches = watch_intervals(summary.get("watches"), started)
    documents: dict[str, OriginDocument] = {
        f"e2e-timelines_prober_{stamp}.json": timeline(rows, watches),
        f"backend-disruption_prober_{stamp}.json": backend_disruptions(rows),
    }
    for row_type, data in autodl_files(rows).items():
        documents[f"prober-{row_type}-{stamp}-autodl.json"] = data
    out.mkdir(parents=True, exist_ok=True)
    return [_write(out / name, document) for name, document in documents.items()]


def backend_disruptions(rows: Sequence[Row]) -> BackendDisruptionList:
    """One entry per stream of the run, those without disruption too (a 0 s is history)."""
    lines: dict[str, list[str]] = {}
    for row in rows:
        if row["row_type"] == "interval":
            lines.setdefault(row["stream"], []).append(disruption_line(row))
    entries: dict[str, BackendDisruption] = {}
    for row in rows:
        if row["row_type"] == "stream":
            entry = _backend_disruption(row, lines.get(row["stream"], []))
            entries[entry["Name"]] = entry
    return {"BackendDisruptions": dict(sorted(entries.items()))}


def _backend_disruption(row: Row, lines: list[str]) -> BackendDisruption:
    stream = StreamId.parse(row["stream"])
    name = backend_name(stream.name)
    return {
        "Name": name,
        "BackendName": name,  # as origin's serializer writes it: the name, once more
        "ConnectionType": "New" if stream.connection == Connection.NEW else "Reused",
        # Exact, not rounded: ci-tools rounds each file's value up to a second itself.
        "DisruptedDuration": format_go_duration(row["disruption_seconds"]),
        "DisruptionMessages": lines,
        "LoadBalancerType": stream.lb.value,
        "Protocol": stream.protocol.value,
        "TargetAPI": stream.target,
    }


def _rows(summary: SummaryDocument, labels: Mapping[str, str | bool]) -> list[Row]:
    """The summary's warehouse rows. `export_rows` reads a summary from a file: the document
    goes through one, so that the very row builder, and its checks, serves here too."""
    with tempfile.TemporaryDirectory(prefix="prober-origin-") as directory:
        path = Path(directory) / "summary.json"
        write_json(path, summary)
        try:
            return list(export_rows(path, labels))
        except BadInput as exc:
            # Name the run, not the temporary file.
            where = f"summary of run {summary.get('run_id')!r}"
            raise BadInput(str(exc).replace(str(path), where)) from None


def _stamp(started: str) -> str:
    moment = datetime.fromtimestamp(math.floor(parse_rfc3339(started)), UTC)
    return moment.strftime("%Y%m%d-%H%M%S")


def _write(path: Path, document: OriginDocument) -> Path:
    """Whole or not at all: the file is renamed into place once written. The partial file's
    leading dot keeps it out of every loader's pattern (`backend-disruption*`, `*autodl.json`,
    `e2e-timelines*.json`) if the writer dies before the rename."""
    partial = path.with_name(f".{path.name}.partial")
    # Four spaces: Go's json.MarshalIndent(v, "", "    "), as origin writes its files.
    partial.write_text(json.dumps(document, indent=4, allow_nan=False) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def origin_command(
    inputs: Sequence[Path],
    *,
    labels: Sequence[str],
    out: Path,
    events: bool = False,
    pod_logs: bool = False,
    stdout: TextIO | None = None,
) -> int:
    """Each run's results in OpenShift CI's own files (`origin.write_origin_files`), in `out`,
    or in one directory per run there when there are several. The runs come from summaries,
    or from event logs (`events`) or pod logs (`pod_logs`) replayed as `prober analyze` does."""
    stdout = stdout or sys.stdout
    written: list[Path] = []
    parsed = parse_labels(labels)
    runs = _origin_runs(inputs, parsed, events or pod_logs, pod_logs)
    for summary in runs:
        target = run_dir(out, summary["run_id"], len(runs) > 1)
        with writing(f"into {target}"):
            written += write_origin_files(summary, target, labels=parsed)
    for path in written:
        print(f"wrote {path}", file=stdout)
    return ExitCode.OK


def _origin_runs(
    inputs: Sequence[Path], labels: dict[str, str | bool], logs: bool, pod_logs: bool
) -> list[SummaryDocument]:
    if logs:
        analyses, _ = analyze_runs(inputs, pod_logs=pod_logs)
        return [analysis.summary for analysis in analyses]
    summaries = []
    for path in summary_files(inputs):
        # The export's reading checks every field the files are built from, naming the
        # file: what it passed is a document `write_origin_files` can build from.
        list(export_rows(path, labels))
        summaries.append(cast(SummaryDocument, read_json(path, filekinds.SUMMARY)))
    return summaries
