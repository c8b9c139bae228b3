"""`prober analyze`: event logs to summary.json, JUnit verdicts and an HTML report

Replay event logs through the same trackers as the daemon; write the summary, JUnit verdicts
against the per-platform history, and a self-contained HTML report.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_out, add_value, forward
from prober.common.values import duration
from prober.report.analyze import analyze_command

EXAMPLE = """\
examples:
  prober analyze /var/log/prober/events.jsonl --thresholds thresholds.json --out artifacts/
  prober analyze artifacts/prober/            # every *.jsonl there, with its rotated segments

Reads PATH's rotated segments (PATH.000001.gz, ...) and then PATH. Writes summary.json,
junit.xml and report.html into --out (per run in OUT/<run id>/ when the logs hold several runs).
Exit codes: 0 no test failed (a test failed by design, written failed and then passed as
origin writes a known flake, fails no job), 1 a test failed, 2 bad usage or bad input.
"""

# The watch tests' limits: each flag, and why its default.
WATCH_LIMITS = {
    "--watch-reestablish-within": (
        "watch test: every ended watch established again within this (default: 5s, "
        "client-go's backoff reaches it by a third failed try, scaled as the run's own "
        "backoff was)"
    ),
    "--watch-blind-within": (
        "watch test: no blind interval longer than this (default: 15s, client-go's HTTP/2 "
        "ping timeout, scaled as the run's own was; longer is a flow the LB dropped silently)"
    ),
}


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "analyze", __doc__, EXAMPLE, forward(analyze_command, "eventlogs"))
    parser.add_argument(
        "eventlogs", nargs="+", type=Path, metavar="EVENTLOG", help="event log file or directory"
    )
    parser.add_argument(
        "--platform", help="platform to judge against (default: the run record's platform)"
    )
    parser.add_argument(
        "--thresholds",
        dest="thresholds_path",
        type=Path,
        metavar="FILE",
        help="thresholds.json from `prober thresholds`",
    )
    add_out(parser)
    parser.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="skip and count corrupt lines instead of refusing the log",
    )
    for name, help in WATCH_LIMITS.items():
        add_value(parser, name, duration(), None, metavar="DURATION", help=help)
    parser.add_argument(
        "--pod-logs",
        action="store_true",
        help="EVENTLOG are pod logs (files, or directories of *.log, as CI gathers them) of "
        "daemons run with event_log_stdout: their event records are read, log lines passed over",
    )
