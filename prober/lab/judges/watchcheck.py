"""Hold what the daemon's watch streams measured against the apiservers' truth logs.

Each apiserver logs every real watch it serves (`watch_started`, `watch_ended`: its wall time,
protocol, the peer it saw, how it ended and the phase of its own shutdown then;
`fakeapiserver/watches.py`). The daemon logs each watch it established (`watch_attempt`: sent
at `t`, its head read `dur` later, the server its shutdown header named, its connection's
address) and how each ended (`watch_end`). Both go onto the daemon's run clock
(`compare.wall_offset`), are paired by their connection (`watchpairs`), and judged:

- **landing**: the server named started a watch of that protocol between the request's send
  and its head's arrival (± tolerance): the only interval the truth can lie in;
- **doomed**: the daemon calls a landing doomed exactly when the server was past its T0 as it
  started the watch (its phase is not `before`);
- **end**: a watch the server ended cleanly (its timeout, a drain, a relist, a 410) ends at
  the client within tolerance of it, plus `NOTICE` for a busy client's event loop; one the
  client ended itself (a failed PING, a stall) is how long the LB kept it from learning of
  the server's end. A cut or a reset may reach the client later through an LB that holds the
  flow: that delay is shown, and where the client never learnt of it, its blindness must
  show in the measurement. Where the lab cut the path itself while the server still served
  the watch (`Cut`: a node lost, a process killed, an LB resetting flows), a server's end
  that came later went into a dead path: the client is judged against the cut;
- **re-establish**: from an end to the next watch of the stream, measured and true agree
  within tolerance where the end reached the client at once.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prober.core.models import LB, LogRecord
from prober.core.truthlog import WatchEnded, WatchStarted
from prober.core.watch import WATCH, WATCH_STEPS, Heartbeat, WatchAttempt, WatchEnd
from prober.lab.infra.truth import read_truth
from prober.lab.judges.watchpairs import CLEAN, Joins, MeasuredWatch, TruthWatch, pair
from prober.report.results.watches import watch_results
from prober.report.verdicts.analysis import RunAnalysis

# The client ended it (`core.watch.END_HOWS`): its PING check, a stall, an event it refused.
CLIENT_HOWS = frozenset({"ping", "stall", "too_large", "bad_event", "stopped"})
THIRD_PARTY = frozenset({"reset", "client-gone"})  # the server was told: by the LB, or the client
# How long a busy client may take to notice an end that reached it at once: its event loop's
# delay, which no record bounds. Measured on the 2-core machine beside the lab's processes:
# clean ends arrived up to 0.22 s after the server's (aws and gcp at 0.05).
NOTICE = 0.4


@dataclass(frozen=True, slots=True)
class Cut:
    """A path the lab broke itself, from `wall` (epoch seconds) until `until` (None: for
    good): every path to `server` (an APIServerID) where `lb` is None (its node lost, its
    process killed), else that LB's (it reset the server's flows as it marked it down). A
    server's end that came after it went into a dead path: the client's end and blindness
    are judged against the cut instead. A path that comes back (`until`: a node back, and
    TCP's retransmissions, whose waits doubled through the outage, through again) delivers
    what the server sent before its end, and nothing after."""

    wall: float
    server: str
    what: str  # for the reader: "master-0's node lost", "external-lb reset its flows"
    lb: LB | None = None
    until: float | None = None

    def broke(self, m: MeasuredWatch, t: TruthWatch) -> bool:
        """Whether this cut, not the server, ended what `m` could hear of `t`: it came while
        the server served the watch, on the watch's path, and the path was still dead when
        the server ended it (a node back before that carried the watch on)."""
        if self.server != t.apiserver or (self.lb is not None and self.lb is not m.lb):
            return False
        if not t.start < self.wall < (math.inf if t.end is None else t.end):
            return False
        return self.until is None or t.end is None or t.end <= self.until


@dataclass(frozen=True, slots=True)
class WatchRow:
    """One measured watch beside its truth; errors are measured minus true, seconds."""

    stream: str
    server: str
    doomed: bool
    truth_phase: str | None  # None: no truth watch found for it
    end_how: str
    truth_how: str
    end_error: float | None
    reestablish: float | None
    truth_reestablish: float | None
    paired_by: str = ""  # watchpairs.ADDRESS, LOG or TIME; "" unpaired
    cut: str = ""  # what ended it, where the lab cut its path (`Cut.what`)
    unjoined: str = ""  # paired by time: why its connection joined nothing


@dataclass(slots=True)
class WatchCheck:
    rows: list[WatchRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def read_truth_watches(path: Path, lease: str | None = None) -> list[TruthWatch]:
    """The real watches one apiserver's truth file records, on `lease`'s name if given."""
    open_: dict[tuple[int, int], WatchStarted] = {}
    done: list[TruthWatch] = []
    for record in read_truth(path):
        if isinstance(record, WatchStarted) and (lease is None or lease in record.path):
            open_[(record.conn, record.stream)] = record
        elif isinstance(record, WatchEnded) and (record.conn, record.stream) in open_:
            began = open_.pop((record.conn, record.stream))
            done.append(_truth(began, record))
    return sorted(done + [_truth(r, None) for r in open_.values()], key=lambda w: w.start)


def _truth(began: WatchStarted, ended: WatchEnded | None) -> TruthWatch:
    protocol = {"h1": "http1", "h2": "http2"}.get(began.protocol, began.protocol)
    return TruthWatch(
        began.apiserver, protocol, began.wall, str(began.phase),
        None if ended is None else ended.wall, "" if ended is None else ended.how,
        0 if ended is None else ended.events, began.peer,
    )  # fmt: skip


def measured_watches(records: Iterable[LogRecord]) -> list[MeasuredWatch]:
    """Each watch the daemon established, with the end that followed it on its stream."""
    out: list[MeasuredWatch] = []
    current: dict[str, MeasuredWatch] = {}
    for r in records:
        if isinstance(r, WatchAttempt) and r.step in WATCH_STEPS and r.outcome == "ok" and r.server:
            watch = MeasuredWatch(r.stream, str(r.stream_id.protocol), r.server, r.t,
                                  r.t + r.dur, r.doomed, lb=r.stream_id.lb,
                                  local=r.local)  # fmt: skip
            current[r.stream] = watch
            out.append(watch)
        elif isinstance(r, WatchEnd) and r.stream in current:
            watch = current.pop(r.stream)
            watch.end, watch.how = r.t, r.how
    return out


@dataclass(frozen=True, slots=True)
class Context:
    """What every judgement needs: the run clock's wall offset, the tolerance, the run's end
    (run time), each stream's measured blind intervals, the blind threshold, each heartbeat
    write acknowledged (sent, acknowledged; run time, in order), how a client's connection
    shows at its server (`watchpairs.Joins`) and the paths the lab cut."""

    offset: float
    tolerance: float
    end_t: float
    blind: dict[str, list[tuple[float, float]]]
    blind_after: float
    writes: Sequence[tuple[float, float]] = ()
    joins: Joins = field(default_factory=Joins)
    cuts: Sequence[Cut] = ()

    def cut(self, m: MeasuredWatch, t: TruthWatch) -> Cut | None:
        """The first cut that broke the watch's path while its server served it."""
        return min((c for c in self.cuts if c.broke(m, t)), key=lambda c: c.wall, default=None)


def check_watches(
    measured: Sequence[MeasuredWatch], truth: Sequence[TruthWatch], ctx: Context
) -> WatchCheck:
    """Every landing, doomed call, end and re-establish judged."""
    check = WatchCheck()
    previous: dict[str, tuple[MeasuredWatch, TruthWatch, float]] = {}  # its end's error
    for paired in pair(measured, truth, ctx.offset, ctx.tolerance, ctx.joins):
        m, t = paired.measured, paired.truth
        if t is None:
            check.problems.append(
                f"{m.stream}: measured a watch on {m.server} established at {m.established:.3f}"
                f" s; no {m.protocol} watch began there between {m.sent:.3f} and "
                f"{m.established:.3f} s (± {ctx.tolerance:g} s)"
            )
            check.rows.append(WatchRow(m.stream, m.server, m.doomed, None, m.how, "", None,
                                       None, None))  # fmt: skip
            continue
        if m.doomed != (t.phase != "before"):
            check.problems.append(
                f"{m.stream}: the watch on {m.server} at {m.established:.3f} s was "
                f"{'called' if m.doomed else 'not called'} doomed; the server was in phase "
                f"{t.phase} as it began it"
            )
        cut = ctx.cut(m, t)
        if cut is None:
            error, prompt = _judge_end(check, m, t, ctx)
        else:
            error, prompt = _judge_cut(check, m, t, cut, ctx), False
        measured_re = true_re = None
        before, ended, late = previous.get(m.stream, (None, None, 0.0))
        if before and ended and before.end is not None and ended.end is not None:
            # The client learnt of the end `late` s after the server made it, and got its next
            # head up to a landing interval after the server began it: the two agree within
            # both, and the tolerance.
            measured_re, true_re = m.established - before.end, t.start - ended.end
            slack = ctx.tolerance + (m.established - m.sent) + abs(late)
            if abs(measured_re - true_re) > slack:
                check.problems.append(
                    f"{m.stream}: re-established in {measured_re:.3f} s as measured, "
                    f"{true_re:.3f} s from the server's end to its next start"
                )
        if prompt and error is not None:
            previous[m.stream] = (m, t, error)
        else:
            previous.pop(m.stream, None)  # an end that reached the client late: not judged
        check.rows.append(WatchRow(m.stream, m.server, m.doomed, t.phase, m.how, t.how, error,
                                   measured_re, true_re, paired.way,
                                   "" if cut is None else cut.what, paired.why))  # fmt: skip
    return check


def _judge_end(
    check: WatchCheck, m: MeasuredWatch, t: TruthWatch, ctx: Context
) -> tuple[float | None, bool]:
    """The end's error (measured minus true) and whether it reached the client at once."""
    tol = ctx.tolerance
    true_end = None if t.end is None else t.end - ctx.offset
    if true_end is None:
        return None, False  # no end in the truth: the run ended first
    if true_end > ctx.end_t:
        if m.end is not None and m.how not in CLIENT_HOWS and m.end < ctx.end_t - tol:
            check.problems.append(f"{m.stream}: measured an end ({m.how}) at {m.end:.3f} s of a "
                                  "watch the server still served at the run's end")  # fmt: skip
        return None, False
    if m.how == "stopped" and m.end is not None and true_end >= m.end - tol:
        return None, False  # the daemon's stop ended it, and the server saw it go
    if m.end is None or m.how == "stopped":
        said = f"{m.stream}: the server ended its watch ({t.how}) at {true_end:.3f} s"
        _judge_held(check, m.stream, true_end, said, ctx)
        return None, False
    error = m.end - true_end
    if m.how in CLIENT_HOWS:
        # The client's own health check ended it: after the server's end, that is how long
        # the LB kept the client from learning of it.
        if error > tol:
            check.findings.append(
                f"{m.stream}: the server ended its watch ({t.how}) at {true_end:.3f} s; the "
                f"client learnt of it by its own {m.how} {error:.3f} s later"
            )
        return error, False
    third_party = t.how in THIRD_PARTY  # a reset both ends got: either may see it first
    if (error < -tol and not third_party) or (t.how in CLEAN and error > tol + NOTICE):
        check.problems.append(
            f"{m.stream}: the watch on {m.server} ended ({m.how}) at {m.end:.3f} s as measured; "
            f"the server ended it ({t.how}) at {true_end:.3f} s"
        )
    elif error > tol + NOTICE:
        check.findings.append(
            f"{m.stream}: the server's watch ended ({t.how}) at {true_end:.3f} s; the client "
            f"learnt of it ({m.how}) {error:.3f} s later"
        )
    return error, -tol <= error <= tol + NOTICE


def _judge_cut(
    check: WatchCheck, m: MeasuredWatch, t: TruthWatch, cut: Cut, ctx: Context
) -> float | None:
    """A watch whose path the lab cut while its server served it: the client can learn of
    the cut no sooner than it came (by a reset, a close a node back delivered, its own PING),
    and what it never learnt of must show as blindness: from the cut on where the path stayed
    dead, from the server's end where it came back."""
    tol, at = ctx.tolerance, cut.wall - ctx.offset
    said = f"{m.stream}: {cut.what} at {at:.3f} s, cutting the watch on {m.server}"
    if m.end is None or m.how == "stopped":
        deaf: float | None = at
        if cut.until is not None:
            end = None if t.end is None else t.end - ctx.offset
            deaf = end if end is not None and end <= ctx.end_t else None
            said += "" if end is None else f"; the server ended it ({t.how}) at {end:.3f} s"
        if deaf is not None:  # else the path came back to a watch its server still served
            _judge_held(check, m.stream, deaf, said, ctx)
        return None
    error = m.end - at
    if error < -tol and m.how not in CLIENT_HOWS:
        check.problems.append(f"{said}; it ended ({m.how}) at {m.end:.3f} s as measured, "
                              "before anything ended it")  # fmt: skip
    elif error > tol + NOTICE:
        check.findings.append(f"{said}; the client learnt of it ({m.how}) {error:.3f} s later")
    return error


def _judge_held(check: WatchCheck, stream: str, deaf: float, said: str, ctx: Context) -> None:
    """A watch the client held on after it went deaf at `deaf` (run time): blind from the
    first write sent after that (an event no deaf watch can carry: one sent before may have
    gone out first), from its acknowledgement and the threshold on to the run's end, as the
    heartbeat must show, where one came with time to show it. A writer that had none
    acknowledged (its own connection on a lost node) cannot show it: said, not failed."""
    tol = ctx.tolerance
    first = bisect.bisect_left(ctx.writes, (deaf + tol, -math.inf))
    ack = ctx.writes[first][1] if first < len(ctx.writes) else None
    if ack is None or ack + ctx.blind_after + tol >= ctx.end_t:
        check.findings.append(f"{said}; the client never learnt of it, and no heartbeat write "
                              "acknowledged after that left time to show it blind")  # fmt: skip
        return
    spells = ctx.blind.get(stream, [])
    if any(a <= ack + ctx.blind_after + tol and b >= ctx.end_t - tol for a, b in spells):
        check.findings.append(f"{said}; the client never learnt of it (measured blind)")
    else:
        check.problems.append(
            f"{said}; the client held it on and was never measured blind (the write "
            f"acknowledged at {ack:.3f} s was due by {ack + ctx.blind_after:.3f} s)"
        )


HEADERS = ["stream", "watches", "landed", "paired by", "doomed", "truly doomed", "ends judged",
           "end error max", "re-establish judged", "re-establish error max"]  # fmt: skip


def table_rows(check: WatchCheck) -> list[list[str]]:
    """Per stream: how many of each judgement there were, and the largest errors."""
    by: dict[str, list[WatchRow]] = {}
    for row in check.rows:
        by.setdefault(row.stream, []).append(row)
    out = []
    for stream, rows in sorted(by.items()):
        ends = [abs(r.end_error) for r in rows if r.end_error is not None]
        again = [abs(r.reestablish - r.truth_reestablish) for r in rows
                 if r.reestablish is not None and r.truth_reestablish is not None]  # fmt: skip
        ways: dict[str, int] = {}
        for r in rows:
            if r.paired_by:
                ways[r.paired_by] = ways.get(r.paired_by, 0) + 1
        out.append([
            stream, str(len(rows)), str(sum(r.truth_phase is not None for r in rows)),
            ", ".join(f"{way} {n}" for way, n in sorted(ways.items())) or "-",
            str(sum(r.doomed for r in rows)),
            str(sum(r.truth_phase not in (None, "before") for r in rows)),
            str(len(ends)), _max(ends), str(len(again)), _max(again),
        ])  # fmt: skip
    return out


def _max(values: Sequence[float]) -> str:
    return f"{max(values):.3f} s" if values else "-"


def check_run(
    truth_paths: Sequence[Path],
    analysis: RunAnalysis,
    offset: float,
    tolerance: float,
    *,
    joins: Joins | None = None,
    cuts: Sequence[Cut] = (),
) -> WatchCheck:
    """A lab run's watch streams against every apiserver's truth file."""
    truth = [w for path in truth_paths for w in read_truth_watches(path, "/leases")]
    records = analysis.replay.of_kind(WATCH)
    tracker, results, _ = watch_results(records, analysis.replay.end_t)
    blind = {name: r.blind for name, r in results.items()}
    after = 0.0 if math.isinf(tracker.blind_after) else tracker.blind_after
    writes = sorted((r.t, r.ack) for r in records if isinstance(r, Heartbeat) and r.ack is not None)
    ctx = Context(offset, tolerance, analysis.replay.end_t, blind, after, writes,
                  joins or Joins(), cuts)  # fmt: skip
    return check_watches(measured_watches(records), truth, ctx)
