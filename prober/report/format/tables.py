"""Plain-text tables for the terminal and CI logs."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces, a rule under the headers."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return lines


def seconds(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f} s"


def secs(value: float) -> str:
    """Seconds in a sentence: two decimals, milliseconds below 0.1 s (`0.29 s`, `40 ms`)."""
    return f"{value * 1000:.0f} ms" if 0 < abs(value) < 0.1 else f"{value:.2f} s"


def bound(lo: float | None, hi: float | None, digits: int = 2) -> str:
    """Where a true value lies, in seconds: `[2.10, 2.62]`, `?` on a side nothing bounds."""
    return "[" + ", ".join("?" if v is None else f"{v:.{digits}f}" for v in (lo, hi)) + "]"


def bounded(value: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """A measured value and its bound, `2.31 s [2.10, 2.62]`; `-` where nothing was measured."""
    return "-" if value is None else f"{seconds(value, digits)} {bound(lo, hi, digits)}"


WIDTH = 120  # a terminal's, and a CI log viewer's


def fold(line: str, indent: str = "", width: int = WIDTH) -> list[str]:
    """A long sentence as lines of at most `width` where its clauses allow: broken only after
    a `; `, so that a figure and its bound stay on one line (`report.inbounds` reads them so);
    a clause longer than the width keeps its own line."""
    clauses = line.split("; ")
    lines = [indent + clauses[0]]
    for clause in clauses[1:]:
        if len(lines[-1]) + 2 + len(clause) <= width:
            lines[-1] += "; " + clause
        else:
            lines[-1] += ";"
            lines.append(indent + "  " + clause)
    return lines
