"""`prober origin`: summaries or event logs to OpenShift CI's own files (intervals, backend
disruption, autodl)

Write each run's results in the files openshift/origin leaves in a job's artifacts, which Sippy,
ci-tools and ci-data-loader pick up.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_labels, forward
from prober.report.ci.origin import origin_command
from prober.report.history.export import LABELS

EXAMPLE = """\
examples:
  prober origin artifacts/prober/summary.json --out "$ARTIFACT_DIR" \\
      --label job_name="$JOB_NAME" --label job_run_id="$BUILD_ID" --label release=4.21
  prober origin history/ --out origin-files/    # one directory per run
  prober origin --events /var/log/prober/events.jsonl --out origin-files/
  prober origin --pod-logs artifacts/prober/pods/ --out "$ARTIFACT_DIR"

INPUT is a summary.json from `prober analyze`, or a directory searched for them; with
--events, event logs (as `prober analyze` takes them), with --pod-logs, pod logs of daemons
run with event_log_stdout; each run is replayed as `prober analyze` does.
Writes, per run, stamped with its start (UTC):
  e2e-timelines_prober_<YYYYMMDD-HHMMSS>.json      monitor intervals (Sippy's chart)
  backend-disruption_prober_<YYYYMMDD-HHMMSS>.json per stream, its disruption (ci-tools)
  prober-<row type>-<YYYYMMDD-HHMMSS>-autodl.json  the warehouse rows (ci-data-loader)
Backends are named prober-<stream>, never one of origin's names. See docs/ci-formats.md.
Exit codes: 0 done, 2 bad usage or bad input.
"""


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "origin", __doc__, EXAMPLE, forward(origin_command, "inputs"))
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--events", action="store_true", help="INPUT: event logs")
    kind.add_argument("--pod-logs", action="store_true", help="INPUT: pod logs")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="output directory (created)"
    )
    add_labels(parser, f"a run label for the autodl rows, KEY one of {', '.join(LABELS)}")
