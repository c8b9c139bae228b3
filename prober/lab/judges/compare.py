"""Hold what the daemon measured against the lab's ground truth.

The daemon's `window` records say, per apiserver shutdown and stream, when it estimated T0 and
how long after it the stream's LB still delivered requests (`reaction`). The truth says when
T0 really was and when each LB stopped routing (`prober.lab.infra.truth`). Both are brought onto the
daemon's run clock through the samples, which carry wall time (`ts`) and run time (`t`).

One pass, in this order: the clock (`wall_offset`), each true shutdown matched with its window
and each of the window's streams beside its LB's truth (`compare`), then what `--check` fails
on (`problems`) and what a reader must know though nothing failed (`findings`). What the
comparison prints and writes is `lab.comparetable`'s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prober.core.models import LB, Connection, Window, WindowStream, parse_rfc3339
from prober.lab.infra.truth import LbTruth, ShutdownTruth, expected_reaction, first_down
from prober.report.format.tables import bound, seconds
from prober.report.replay.runs import RunLog


@dataclass(frozen=True, slots=True)
class Row:
    """One apiserver shutdown as one stream saw it."""

    apiserver: str  # the hostname
    lb: LB
    protocol: str
    connection: Connection
    measured: float | None  # the daemon's reaction; None: no late request on this stream
    lo: float | None  # where the daemon says the true reaction lies (None: unbounded)
    hi: float | None
    truth: float  # the last instant the LB could still deliver a request, after T0
    late: int
    failures: int
    # The LB still routed after the server stopped taking requests, or it resets the
    # connections of a server it marks down, which may have had a request in flight.
    failures_expected: bool
    bound_by: str | None = None  # what set hi (`core.reaction`): said when the truth is above it
    truth_until: float | None = None  # a truth that is a span: [truth, truth_until]
    lb_lag: float = 0.0  # how much of the truth the lab LB's own lag made (`ServerEvent.lag`)

    @property
    def error(self) -> float | None:
        """The measured reaction off the truth (0 inside a span of truth)."""
        if self.measured is None:
            return None
        until = self.truth if self.truth_until is None else self.truth_until
        return min(0.0, self.measured - self.truth) + max(0.0, self.measured - until)

    def outside(self, tolerance: float) -> float | None:
        """How far the truth lies outside [lo, hi] beyond `tolerance` (negative: below lo);
        None when inside, or when a span of truth meets the bound."""
        return outside(self.truth, self.lo, self.hi, tolerance, self.truth_until)

    @property
    def label(self) -> str:
        """The shutdown and the stream, as problems and findings name them."""
        return f"{self.apiserver} {self.lb} {self.protocol} {self.connection}"

    @property
    def width(self) -> float | None:
        return None if self.lo is None or self.hi is None else self.hi - self.lo


@dataclass(frozen=True, slots=True)
class ShutdownResult:
    truth: ShutdownTruth
    window: Window | None  # None: the daemon saw no window for this shutdown
    t0_error: float | None  # the daemon's t0 minus the true T0, seconds
    rows: tuple[Row, ...]
    offset: float = 0.0  # wall-clock seconds at the daemon's run time 0


def outside(
    truth: float,
    lo: float | None,
    hi: float | None,
    tolerance: float,
    until: float | None = None,
) -> float | None:
    """How far a truth (or the span [truth, until]) lies outside [lo, hi] beyond
    `tolerance` (negative: below lo); None when inside. None bounds nothing on its side."""
    last = truth if until is None else until
    if lo is not None and last < lo - tolerance:
        return last - lo
    if hi is not None and truth > hi + tolerance:
        return truth - hi
    return None


def wall_offset(log: RunLog) -> float:
    """Wall-clock seconds at run time 0: the median of `ts - t` over the samples; without
    samples (a compact record stream), the run record's own start, which is that instant."""
    if not log.samples:
        return parse_rfc3339(log.run.ts)
    return statistics.median(parse_rfc3339(s.ts) - s.t for s in log.samples)


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
        if window is not None:
            unmatched.remove(window)
        results.append(_result(shutdown, window, lbs, offset))
    return results


def _closest(shutdown: ShutdownTruth, windows: Sequence[Window], offset: float) -> Window | None:
    mine = [w for w in windows if w.host == shutdown.apiserver]
    if not mine:
        return None
    best = min(mine, key=lambda w: abs(w.t0 + offset - shutdown.t0))
    # The same host shuts down again only after a restart: a window far from this T0 is another.
    return best if abs(best.t0 + offset - shutdown.t0) < 5.0 else None


def _result(
    shutdown: ShutdownTruth, window: Window | None, lbs: Mapping[LB, LbTruth], offset: float
) -> ShutdownResult:
    """A shutdown's rows: each stream of its window whose LB can reach its server."""
    if window is None:
        return ShutdownResult(shutdown, None, None, (), offset)
    rows = []
    for ws in window.streams:
        lb = lbs.get(ws.lb)
        if lb is not None and (lb.reaches is None or shutdown.hostname in lb.reaches):
            rows.append(_row(shutdown, ws, lb))
    t0_error = window.t0 + offset - shutdown.t0
    return ShutdownResult(shutdown, window, t0_error, tuple(rows), offset)


def _row(shutdown: ShutdownTruth, ws: WindowStream, lb: LbTruth) -> Row:
    """One stream's measurement beside the truth: the last instant its LB could still deliver
    a request to the server, for a new connection or a reused one."""
    down = (
        first_down(lb.events, shutdown.hostname, shutdown.t0, until=shutdown.stopped)
        if lb.events
        else math.inf
    )
    reaction = expected_reaction(shutdown, down, lb.reset_on_down)
    lag = max((e.lag for e in lb.events if e.wall == down and not e.up), default=0.0)
    new = ws.connection is Connection.NEW
    truth = reaction.new if new else reaction.reused
    until = None if new or reaction.reused_until == truth else reaction.reused_until
    refusing_from = min(shutdown.not_accepting, shutdown.stopped) - shutdown.t0
    return Row(
        apiserver=shutdown.hostname,
        lb=ws.lb,
        protocol=str(ws.protocol),
        connection=ws.connection,
        measured=ws.reaction,
        lo=ws.reaction_lo,
        hi=ws.reaction_hi,
        truth=truth,
        late=ws.late,
        failures=ws.failures,
        failures_expected=truth >= refusing_from or lb.reset_on_down,
        bound_by=ws.bound_by,
        truth_until=until,
        lb_lag=lag,
    )


def problems(
    results: Sequence[ShutdownResult], tolerance: float, expect_failures: bool
) -> list[str]:
    """What `--check` fails on: a truth outside [lo - tolerance, hi + tolerance] (a reaction,
    or T0), a shutdown the daemon did not see, failures where none should be."""
    found = []
    for result in results:
        found += _shutdown_problems(result, tolerance, expect_failures)
    failures = sum(row.failures for result in results for row in result.rows)
    if expect_failures and failures == 0:
        found.append("the scenario should make requests fail, and none did")
    return found


def _shutdown_problems(
    result: ShutdownResult, tolerance: float, expect_failures: bool
) -> list[str]:
    name = result.truth.hostname
    if result.window is None:
        return [f"{name}: the daemon saw no shutdown window"]
    found = []
    window, true_t0 = result.window, result.truth.t0 - result.offset
    if outside(true_t0, window.t0_lo, window.t0_hi, tolerance) is not None:
        found.append(
            f"{name}: true T0 at {true_t0:.3f} s, outside the bound "
            f"{bound(window.t0_lo, window.t0_hi, 3)}"
        )
    for row in result.rows:
        off = row.outside(tolerance)
        if off is not None:
            by = f", hi set by {row.bound_by}" if off > 0 and row.bound_by else ""
            found.append(
                f"{row.label}: truth {row.truth:.3f} s, outside the bound "
                f"{bound(row.lo, row.hi, 3)} by {off:+.3f} s "
                f"(measured {seconds(row.measured, 3)}{by})"
            )
        if row.failures and not (row.failures_expected or expect_failures):
            found.append(f"{row.label}: {row.failures} failed requests inside the window")
    return found


def findings(results: Sequence[ShutdownResult]) -> list[str]:
    """What a reader must know though nothing failed: a bound wider than the reaction it
    bounds (the sampling cannot tell the LB's reaction apart from its own gaps), or open."""
    found = []
    for result in results:
        for row in result.rows:
            if row.truth <= 0 or (row.connection is Connection.REUSED and row.measured is None):
                continue  # a reused stream whose connections were all elsewhere: no reaction
            if row.measured is None and row.hi is None:
                found.append(
                    f"{row.label}: no late request and no upper bound: the stream says "
                    f"nothing of a {row.truth:.3f} s reaction"
                )
            elif row.measured is None:
                continue
            elif row.hi is None:
                found.append(
                    f"{row.label}: no upper bound (nothing after the last late request "
                    f"showed the LB had stopped); truth {row.truth:.3f} s"
                )
            elif row.width is not None and row.width > row.truth:
                found.append(
                    f"{row.label}: bound {bound(row.lo, row.hi, 3)} is {row.width:.3f} s wide, "
                    f"wider than the reaction itself ({row.truth:.3f} s)"
                )
    return found
