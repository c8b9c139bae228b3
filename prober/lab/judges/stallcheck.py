"""The `no-marker` scenario's claim: each watch-list stall the daemon measured lasted as long
as its server held that watch without the end marker.

The daemon times a stall from its request to the watch's end (`core.watchsync`); its server
records the watch's start and end (`watch_started`, `watch_ended`) and that it withheld the
marker (`initial_events_end`, `withheld`). Each stalled watch-list is found in its server's
truth as the watch checks find every watch (`watchpairs.pair`: by its connection). The
server's length lies in the daemon's bound [length - head, length] (the request reached the
server by the time its head came back; the end came back after the server sent it), within
the lab's tolerance for the end's way back through the LB and the time a busy client takes to
notice an end that reached it (`watchcheck.NOTICE`, as the watch checks allow every end).
Where the lab cut the watch's path while the server held it (an LB that resets a server's
flows as it marks it down, a node lost: `watchcheck.Cut`), the two ends are apart by design:
the client hears of the cut at once (a reset) or late (a silent drop), the server of nothing
until its timeout. Such a stall is listed with its cut, not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prober.core.truthlog import InitialEventsEnd
from prober.core.watch import STOPPED, WATCH
from prober.core.watchsync import WatchSync
from prober.lab.infra.truth import read_truth
from prober.lab.judges.watchcheck import NOTICE, Cut, measured_watches, read_truth_watches
from prober.lab.judges.watchpairs import Joins, pair
from prober.report.verdicts.analysis import RunAnalysis


@dataclass(frozen=True, slots=True)
class StallRow:
    stream: str
    start: float  # run time of its request
    length: float  # measured
    lo: float
    hi: float
    truth: float | None  # the server's own length; None: not found, or cut by the stop
    how: str
    cut: str = ""  # what cut the watch's path while the server held it (`Cut.what`)


@dataclass(slots=True)
class StallCheck:
    rows: list[StallRow] = field(default_factory=list)
    withheld: int = 0  # markers the servers withheld
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def check_stalls(
    truth_paths: Sequence[Path],
    analysis: RunAnalysis,
    offset: float,
    tolerance: float,
    *,
    joins: Joins | None = None,
    cuts: Sequence[Cut] = (),
) -> StallCheck:
    """Every stall the daemon recorded against its server's record of that watch."""
    check = StallCheck()
    truth = [w for path in truth_paths for w in read_truth_watches(path, "/leases")]
    check.withheld = sum(
        isinstance(r, InitialEventsEnd) and r.withheld for p in truth_paths for r in read_truth(p)
    )
    records = analysis.replay.of_kind(WATCH)
    measured = measured_watches(records)
    truths = {id(p.measured): p.truth for p in pair(measured, truth, offset, tolerance,
                                                    joins or Joins())}  # fmt: skip
    for sync in (r for r in records if isinstance(r, WatchSync) and r.stalled):
        mine = (m for m in measured if m.stream == sync.stream and m.sent == sync.started)
        watch = next(mine, None)  # the watch of that request: sent at the sync's start
        t = truths.get(id(watch)) if watch is not None else None
        length = sync.length
        seconds = None if t is None or t.end is None or sync.how == STOPPED else t.end - t.start
        cut = next((c.what for c in cuts if watch and t and c.broke(watch, t)), "")
        row = StallRow(sync.stream, sync.started, length, max(0.0, length - sync.head), length,
                       seconds, sync.how if not sync.synced else "synced", cut)  # fmt: skip
        check.rows.append(row)
        if cut or seconds is None:
            continue
        if not row.lo - tolerance - NOTICE <= seconds <= row.hi + tolerance:
            check.problems.append(
                f"{sync.stream}: a watch-list stall of {length:.3f} s from {sync.started:.3f} s "
                f"(bound [{row.lo:.3f}, {row.hi:.3f}], its end noticed within {NOTICE:g} s); its "
                f"server held it {seconds:.3f} s"
            )
    judged = [r for r in check.rows if r.truth is not None and not r.cut]
    if not check.rows:
        check.problems.append(f"no watch-list stall measured; the servers withheld "
                              f"{check.withheld} initial-events-end markers")  # fmt: skip
    elif not judged:
        check.problems.append("no measured stall was found in its server's truth")
    else:
        worst = max(abs(r.length - r.truth) for r in judged if r.truth is not None)
        cut_paths = sum(bool(r.cut) for r in check.rows)
        check.findings.append(
            f"watch-list stalls: {len(check.rows)} measured ({check.withheld} markers withheld), "
            f"{len(judged)} judged against the server's watch, each inside its bound (the "
            f"largest difference {worst:.3f} s); {cut_paths} whose path the lab cut, not judged"
        )
    return check


HEADERS = ["stream", "start", "stall", "bound", "server held", "how", "path cut"]


def table_rows(check: StallCheck) -> list[list[str]]:
    return [
        [r.stream, f"{r.start:.2f} s", f"{r.length:.3f} s", f"[{r.lo:.3f}, {r.hi:.3f}]",
         "-" if r.truth is None else f"{r.truth:.3f} s", r.how, r.cut or "-"]
        for r in check.rows
    ]  # fmt: skip
