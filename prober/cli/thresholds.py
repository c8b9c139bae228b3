"""`prober thresholds`: many summaries to per-platform percentiles (thresholds.json), or a
regression gate

Aggregate many runs' summary.json into per (platform, lb, protocol, connection, metric)
P50/P75/P95/P99 and run counts, the history `analyze` judges against.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_out, add_summaries, add_value, forward
from prober.common.errors import UserError
from prober.common.values import positive_int
from prober.report.history.regression import (
    DEFAULT_ALPHA,
    DEFAULT_QUANTILE,
    QUANTILES,
    check_command,
)
from prober.report.history.thresholds import DEFAULT_MIN_RUNS, thresholds_command

EXAMPLE = """\
examples:
  prober thresholds history/ -o thresholds.json --out dashboard/
  prober thresholds --check thresholds.json last-10-runs/      # exit 1 if worse than history
  prober thresholds --from-query-result result.json --out history/   # from the warehouse

SUMMARY is a summary.json from `prober analyze`, or a directory searched for them.
Builds thresholds.json (-o, default OUT/thresholds.json) and OUT/thresholds.html, a dashboard
of every platform side by side. With --check HISTORY it instead tests whether the given runs
are worse than HISTORY (a one-sided binomial test of how many exceed its P75, Holm-corrected
across keys) and writes OUT/regression.json.
Exit codes: 0 done, 1 a regression was found (--check), 2 bad usage or bad input.
"""


def _probability(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def register(sub: Subparsers) -> None:
    parser = add_command(sub, "thresholds", __doc__, EXAMPLE, _run)
    add_summaries(parser, "*")
    parser.add_argument(
        "--from-query-result",
        dest="query_result",
        type=Path,
        metavar="FILE",
        help="instead of summaries: the result of deploy/warehouse/thresholds.sql (JSON)",
    )
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="thresholds.json path")
    add_out(parser)
    add_value(
        parser,
        "--min-runs",
        positive_int,
        DEFAULT_MIN_RUNS,
        metavar="N",
        help=f"runs a key needs to be usable for verdicts (default {DEFAULT_MIN_RUNS})",
    )
    parser.add_argument(
        "--check",
        dest="history",
        type=Path,
        metavar="HISTORY",
        help="test SUMMARY runs against this history",
    )
    parser.add_argument(
        "--quantile",
        choices=sorted(QUANTILES),
        default=DEFAULT_QUANTILE,
        help=f"historical quantile the check counts exceedances of (default {DEFAULT_QUANTILE})",
    )
    parser.add_argument(
        "--alpha",
        type=_probability,
        default=DEFAULT_ALPHA,
        help=f"family-wise false-positive rate of the check (default {DEFAULT_ALPHA})",
    )


def _run(args: argparse.Namespace) -> int:
    if (args.query_result is None) == (not args.summaries):
        raise UserError("give SUMMARY files or --from-query-result, one of the two")
    if args.history is not None and args.query_result is not None:
        raise UserError("--check takes SUMMARY files, not a query result")
    command = check_command if args.history is not None else thresholds_command
    return forward(command, "summaries")(args)
