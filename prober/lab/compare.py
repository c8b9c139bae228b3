"""Hold what the daemon measured against the lab's ground truth.

The daemon's `window` records say, per apiserver shutdown and stream, when it estimated T0 and
how long after it the stream's LB still delivered requests (`reaction`). The truth says when
T0 really was and when each LB stopped routing (`prober.lab.truth`). Both are brought onto the
daemon's run clock through the samples, which carry wall time (`ts`) and run time (`t`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prober.core.models import LB, Connection, Sample, Window, parse_rfc3339
from prober.lab.truth import LbTruth, ShutdownTruth, expected_reaction, first_down


@dataclass(frozen=True, slots=True)
class Row:
    """One apiserver shutdown as one stream saw it."""

    apiserver: str  # the hostname
    lb: LB
    protocol: str
    connection: Connection
    measured: float | None  # the daemon's reaction; None: no late request on this stream
    truth: float  # the last instant the LB could still deliver a request, after T0
    late: int
    failures: int
    # The LB still routed after the server stopped taking requests, or it resets the
    # connections of a server it marks down, which may have had a request in flight.
    failures_expected: bool

    @property
    def error(self) -> float | None:
        return None if self.measured is None else self.measured - self.truth


@dataclass(frozen=True, slots=True)
class ShutdownResult:
    truth: ShutdownTruth
    window: Window | None  # None: the daemon saw no window for this shutdown
    t0_error: float | None  # the daemon's t0 minus the true T0, seconds
    rows: tuple[Row, ...]


def wall_offset(samples: Sequence[Sample]) -> float:
    """Wall-clock seconds at run time 0: the median of `ts - t` over the samples."""
    if not samples:
        raise ValueError("no samples to relate run time to wall time")
    return statistics.median(parse_rfc3339(s.ts) - s.t for s in samples)


def compare(
    shutdowns: Sequence[ShutdownTruth],
    windows: Sequence[Window],
    lbs: Mapping[LB, LbTruth],
    offset: float,
) -> list[ShutdownResult]:
    """Match each true shutdown with the daemon's window for it, then compare per stream."""
    results = []
    unmatched = list(windows)
    for shutdown in shutdowns:
        window = _closest(shutdown, unmatched, offset)
        if window is None:
            results.append(ShutdownResult(shutdown, None, None, ()))
            continue
        unmatched.remove(window)
        rows = []
        for ws in window.streams:
            lb = lbs.get(ws.lb)
            if lb is None or (lb.reaches is not None and shutdown.hostname not in lb.reaches):
                continue
            down = first_down(lb.events, shutdown.hostname, shutdown.t0) if lb.events else math.inf
            reaction = expected_reaction(shutdown, down, lb.reset_on_down)
            truth = reaction.new if ws.connection is Connection.NEW else reaction.reused
            refusing_from = min(shutdown.not_accepting, shutdown.stopped) - shutdown.t0
            rows.append(
                Row(
                    apiserver=shutdown.hostname,
                    lb=ws.lb,
                    protocol=str(ws.protocol),
                    connection=ws.connection,
                    measured=ws.reaction,
                    truth=truth,
                    late=ws.late,
                    failures=ws.failures,
                    failures_expected=truth >= refusing_from or lb.reset_on_down,
                )
            )
        t0_error = window.t0 + offset - shutdown.t0
        results.append(ShutdownResult(shutdown, window, t0_error, tuple(rows)))
    return results


def _closest(shutdown: ShutdownTruth, windows: Sequence[Window], offset: float) -> Window | None:
    mine = [w for w in windows if w.host == shutdown.apiserver]
    if not mine:
        return None
    best = min(mine, key=lambda w: abs(w.t0 + offset - shutdown.t0))
    # The same host shuts down again only after a restart: a window far from this T0 is another.
    return best if abs(best.t0 + offset - shutdown.t0) < 5.0 else None


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far a measurement may miss the truth before `--check` fails; the two sides differ.

    Early: the last late request precedes the LB's switch by the gap between this stream's
    requests that land on the server (a worker interval times the number of servers, more
    when a loaded machine delays the daemon): a sampling gap, not a wrong answer.
    Late: a request cannot reach a server after the LB stopped routing to it, so a
    measurement past the truth is an error of the measurement itself (the T0 estimate, the
    request's start time), which should stay within tens of milliseconds."""

    early: float = 0.5
    late: float = 0.1


def problems(
    results: Sequence[ShutdownResult], tolerance: Tolerance, expect_failures: bool
) -> list[str]:
    """What `--check` fails on; empty when every measurement is within tolerance."""
    found = []
    total_failures = 0
    for result in results:
        name = result.truth.hostname
        if result.window is None:
            found.append(f"{name}: the daemon saw no shutdown window")
            continue
        for row in result.rows:
            total_failures += row.failures
            where = f"{name} {row.lb} {row.protocol} {row.connection}"
            if row.connection is Connection.NEW and row.measured is None:
                if row.truth > tolerance.early:
                    found.append(f"{where}: no late request, but the LB routed {row.truth:.2f} s")
            elif row.error is not None:
                limit = tolerance.late if row.error > 0 else tolerance.early
                if abs(row.error) > limit:
                    found.append(
                        f"{where}: measured {row.measured:.3f} s, truth {row.truth:.3f} s, "
                        f"error {row.error:+.3f} s beyond {limit} s"
                    )
            if row.failures and not (row.failures_expected or expect_failures):
                found.append(f"{where}: {row.failures} failed requests inside the window")
    if expect_failures and total_failures == 0:
        found.append("the scenario should make requests fail, and none did")
    return found
