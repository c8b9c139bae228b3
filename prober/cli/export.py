"""`prober export`: summaries to warehouse rows (newline-delimited JSON for BigQuery)

Turn summary.json files into rows for the warehouse's run_rows table.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_labels, add_summaries, forward
from prober.report.history.export import LABELS, export_command

EXAMPLE = """\
examples:
  prober export artifacts/prober/summary.json --label job_name="$JOB_NAME" \\
      --label job_run_id="$BUILD_ID" --label release=4.21 --label upgrade=true \\
      --label network_type=OVNKubernetes --label topology=HighlyAvailable -o rows.jsonl
  bq load --source_format=NEWLINE_DELIMITED_JSON --time_partitioning_field=started \\
      prober.run_rows rows.jsonl deploy/warehouse/rows.schema.json

SUMMARY is a summary.json from `prober analyze`, or a directory searched for them.
One JSON line per run x stream, per run x apiserver shutdown x stream and per disruption
interval, each with the run's labels; deploy/warehouse/thresholds.sql turns them into the
thresholds `prober thresholds --from-query-result` writes.
Exit codes: 0 done, 2 bad usage or bad input.
"""


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "export", __doc__, EXAMPLE, forward(export_command, "summaries"))
    add_summaries(parser)
    add_labels(parser, f"a run label, KEY one of {', '.join(LABELS)} (upgrade: true or false)")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="default: stdout")
