"""Where a verdict's evidence is: anchors in `report.html`, and run times as UTC.

A failed test's message names the window or the interval it rests on by the anchor the page
gives it, so that a reader of `junit.xml` goes from the message to the picture in one step.
Windows are numbered in the order the summary lists them (from 1), a stream's intervals in
its own order, as the page numbers its rows.
"""

from __future__ import annotations

from prober.core.models import parse_rfc3339, rfc3339

REPORT = "report.html"


def window_anchor(number: int) -> str:
    return f"window-{number}"


def interval_anchor(stream: str, number: int) -> str:
    return f"{stream}-interval-{number}"


def link(anchor: str) -> str:
    """Where it is, as a message says it."""
    return f"{REPORT}#{anchor}"


def utc(started: str | None, t: float) -> str | None:
    """Run time `t` as wall-clock UTC, from the run's start (`summary.started`); None for a
    summary written before it was kept. The run's clock is monotonic and the start's is the
    wall clock read once: the two agree to the wall clock's own steps. A start that is no
    time (the run record is the log's to say) gives None too."""
    if started is None:
        return None
    try:
        return rfc3339(parse_rfc3339(started) + t)
    except (ValueError, OverflowError, OSError):
        return None


def instance_anchor(host: str, start: int) -> str:
    """A restarted apiserver process: its host (the APIServerID) and which start there."""
    return f"restart-{host}-{start}"
