"""`prober dashboard`: many periods' thresholds.json to one page: latest snapshot and P99 trend

Draw the latest period's thresholds across platforms and, per LB, how each platform's P99
reaction and disruption moved over the periods.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_out, forward
from prober.report.history.html_dashboard import dashboard_command

EXAMPLE = """\
examples:
  prober dashboard weekly/*/thresholds.json --out dashboard/
  prober dashboard 2026-w40.json 2026-w41.json 2026-w42.json

THRESHOLDS is a thresholds.json from `prober thresholds` (from summaries, or from the warehouse
with --from-query-result), one per period; each must say its period. Writes OUT/dashboard.html:
the latest period's platforms side by side, and per LB and metric each platform's P99 over the
periods (of the LB's worst protocol and connection in each period).
Exit codes: 0 done, 2 bad usage or bad input (a bad file, a file without a period, two files
of the same period).
"""


def register(sub: Subparsers) -> None:
    parser = add_command(
        sub, "dashboard", __doc__, EXAMPLE, forward(dashboard_command, "thresholds")
    )
    parser.add_argument("thresholds", nargs="+", type=Path, metavar="THRESHOLDS")
    add_out(parser, "where dashboard.html goes (created; default the current directory)")
