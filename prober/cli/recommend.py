"""`prober recommend`: shutdown-delay-duration per platform from the history

Recommend kube-apiserver's shutdown-delay-duration per platform.

Argument parsing only; the work is in the layer below.
"""

from __future__ import annotations

from pathlib import Path

from prober.cli.parsing import Subparsers, add_command, add_value, forward
from prober.common.values import non_negative_float
from prober.report.recommend import DEFAULT_BUFFER, recommend_command

EXAMPLE = """\
examples:
  prober recommend --thresholds thresholds.json
  prober recommend --thresholds thresholds.json --platform gcp --buffer 15 --out artifacts/

Per platform: the delay that keeps the worst late arrival (P99 reaction of new connections,
and separately of reused ones) under 80 % of the window plus a buffer, rounded up to 5 s, next
to the value OpenShift uses today and why it differs. --out writes recommendations.json.
Exit codes: 0 done, 2 bad usage or bad input.
"""


def register(sub: Subparsers) -> None:
    parser = add_command(
        sub, "recommend", __doc__, EXAMPLE, forward(recommend_command, "thresholds")
    )
    parser.add_argument("--thresholds", type=Path, required=True, metavar="FILE")
    parser.add_argument("--platform", help="only this platform")
    add_value(
        parser,
        "--buffer",
        non_negative_float,
        DEFAULT_BUFFER,
        metavar="SECONDS",
        help=f"margin after the worst late arrival (default {DEFAULT_BUFFER:g})",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="write recommendations.json here")
