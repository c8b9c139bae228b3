"""What the comparison with the truth (`lab.judges.compare`) prints and writes: a row per shutdown
and stream, the T0 estimates off the true T0, and the shutdowns of lab-result.json."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prober.lab.judges.compare import ShutdownResult
from prober.report.format.tables import bound, seconds, table

HEADERS = ["apiserver", "lb", "protocol", "conn", "measured", "bound", "hi set by", "truth"]
HEADERS += ["error"]
HEADERS += ["late", "failed"]


def rows_table(results: Sequence[ShutdownResult], tolerance: float) -> list[str]:
    """The measured reaction and its bound beside the truth, a row per shutdown and stream;
    `!` marks a truth outside the bound and failures where none should be."""
    return table(HEADERS, _rows(results, tolerance))


def _rows(results: Sequence[ShutdownResult], tolerance: float) -> list[list[str]]:
    rows = []
    for result in results:
        if result.window is None:
            rows.append([result.truth.hostname, "(no window seen)", *["-"] * 9])
            continue
        for row in result.rows:
            rows.append(
                [
                    row.apiserver,
                    str(row.lb),
                    row.protocol,
                    str(row.connection),
                    seconds(row.measured, 3),
                    bound(row.lo, row.hi, 3) + (" !" if row.outside(tolerance) is not None else ""),
                    row.bound_by or "-",
                    seconds(row.truth, 3)
                    + ("" if row.truth_until is None else f" to {row.truth_until:.3f}"),
                    "-" if row.error is None else f"{row.error:+.3f} s",
                    str(row.late),
                    str(row.failures)
                    + ("" if row.failures == 0 or row.failures_expected else " !"),
                ]
            )
    return rows


def t0_lines(results: Sequence[ShutdownResult]) -> list[str]:
    lines = []
    for result in results:
        if result.window is None or result.t0_error is None:
            continue
        w = result.window
        lines.append(
            f"{result.truth.hostname}: T0 bound [{w.t0_lo:.3f}, {w.t0_hi:.3f}] s "
            f"(±{(w.t0_hi - w.t0_lo) / 2 * 1000:.0f} ms), the estimate off the true T0 by "
            f"{result.t0_error * 1000:+.0f} ms"
        )
    return lines


def shutdowns_json(results: Sequence[ShutdownResult]) -> list[dict[str, Any]]:
    return [
        {
            "apiserver": r.truth.hostname,
            "host": r.truth.apiserver,
            "seen": r.window is not None,
            "t0_error": r.t0_error,
            "t0_uncertainty": None if r.window is None else (r.window.t0_hi - r.window.t0_lo) / 2,
            "streams": [
                {
                    "lb": str(row.lb),
                    "protocol": row.protocol,
                    "connection": str(row.connection),
                    "measured": row.measured,
                    "lo": row.lo,
                    "hi": row.hi,
                    "truth": row.truth,
                    "truth_until": row.truth_until,
                    "error": row.error,
                    "late": row.late,
                    "failures": row.failures,
                    "failures_expected": row.failures_expected,
                }
                for row in r.rows
            ],
        }
        for r in results
    ]
