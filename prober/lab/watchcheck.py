"""Hold what the daemon's watch streams measured against the apiservers' truth logs.

Each apiserver logs every real watch it serves (`watch_started`, `watch_ended`: its wall time,
protocol, how it ended and the phase of its own shutdown then; `lab/apiserver/watches.py`).
The daemon logs each watch it established (`watch_attempt`: sent at `t`, its head read `dur`
later, the server its shutdown header named) and how each ended (`watch_end`). Both go onto
the daemon's run clock (`compare.wall_offset`) and are paired, and then judged:

- **landing**: the server named started a watch of that protocol between the request's send
  and its head's arrival (± tolerance): the only interval the truth can lie in;
- **doomed**: the daemon calls a landing doomed exactly when the server was past its T0 as it
  started the watch (its phase is not `before`);
- **end**: a watch the server ended cleanly (its timeout, a drain, a relist, a 410) ends at
  the client within tolerance of it, plus `NOTICE` for a busy client's event loop; one the
  client ended itself (a failed PING, a stall) is how long the LB kept it from learning of
  the server's end. A cut or a reset may reach the client later through an LB that holds the
  flow: that delay is shown, and where the client never learnt of it, its blindness must
  show in the measurement;
- **re-establish**: from an end to the next watch of the stream, measured and true agree
  within tolerance where the end reached the client at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prober.core.models import LogRecord
from prober.core.watch import WATCH, WatchAttempt, WatchEnd
from prober.lab.truth import TruthError, truth_records
from prober.report.analysis import RunAnalysis
from prober.report.watches import watch_results

CLEAN = frozenset({"timeout", "drained", "relisted", "gone"})  # the server ended it in words
# The client ended it (`core.watch.END_HOWS`): its PING check, a stall, an event it refused.
CLIENT_HOWS = frozenset({"ping", "stall", "too_large", "bad_event", "stopped"})
THIRD_PARTY = frozenset({"reset", "client-gone"})  # the server was told: by the LB, or the client
# How long a busy client may take to notice an end that reached it at once: its event loop's
# delay, which no record bounds. Measured on the 2-core machine beside the lab's processes:
# clean ends arrived up to 0.22 s after the server's (aws and gcp at 0.05).
NOTICE = 0.4
SEARCHED = 8  # a group of watches landing together up to this size is searched for its best
Pairs = dict[int, int]  # measured index -> truth index


@dataclass(frozen=True, slots=True)
class TruthWatch:
    apiserver: str
    protocol: str  # the connection's, as the prober names it: "http1" or "http2"
    start: float  # wall time the server began it
    phase: str  # of the server's shutdown as it began (core.phase values)
    end: float | None = None
    how: str = ""
    events: int = 0


@dataclass(slots=True)
class MeasuredWatch:
    stream: str
    protocol: str
    server: str
    sent: float  # run time the WATCH was sent
    established: float  # run time its head arrived
    doomed: bool
    end: float | None = None
    how: str = ""


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


@dataclass(slots=True)
class WatchCheck:
    rows: list[WatchRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def read_truth_watches(path: Path, lease: str | None = None) -> list[TruthWatch]:
    """The real watches one apiserver's truth file records, on `lease`'s name if given."""
    open_: dict[tuple[object, object], dict[str, Any]] = {}
    done: list[TruthWatch] = []
    for number, record in truth_records(path):
        try:
            event = record["event"]
            if event == "watch_started" and (lease is None or lease in record["path"]):
                open_[(record["conn"], record["stream"])] = record
            elif event == "watch_ended" and (record["conn"], record["stream"]) in open_:
                began = open_.pop((record["conn"], record["stream"]))
                done.append(_truth(began, record))
        except (ValueError, KeyError, TypeError) as exc:
            raise TruthError(f"{path}:{number}: not a watch record: {exc!r}") from None
    return sorted(done + [_truth(r, None) for r in open_.values()], key=lambda w: w.start)


def _truth(began: dict[str, Any], ended: dict[str, Any] | None) -> TruthWatch:
    protocol = {"h1": "http1", "h2": "http2"}.get(str(began["protocol"]), str(began["protocol"]))
    return TruthWatch(
        str(began["apiserver"]), protocol, float(began["wall"]),
        str(began["phase"]), None if ended is None else float(ended["wall"]),
        "" if ended is None else str(ended["how"]),
        0 if ended is None else int(str(ended["events"])),
    )  # fmt: skip


def measured_watches(records: Iterable[LogRecord]) -> list[MeasuredWatch]:
    """Each watch the daemon established, with the end that followed it on its stream."""
    out: list[MeasuredWatch] = []
    current: dict[str, MeasuredWatch] = {}
    for r in records:
        if isinstance(r, WatchAttempt) and r.step == "watch" and r.outcome == "ok" and r.server:
            watch = MeasuredWatch(r.stream, str(r.stream_id.protocol), r.server, r.t,
                                  r.t + r.dur, r.doomed)  # fmt: skip
            current[r.stream] = watch
            out.append(watch)
        elif isinstance(r, WatchEnd) and r.stream in current:
            watch = current.pop(r.stream)
            watch.end, watch.how = r.t, r.how
    return out


def pair(
    measured: Sequence[MeasuredWatch], truth: Sequence[TruthWatch], offset: float, tol: float
) -> list[tuple[MeasuredWatch, TruthWatch | None]]:
    """Each measured watch with a truth watch that began inside its landing interval on its
    server. Streams of one protocol through different LBs land on one server at once: among
    the watches whose candidates overlap, the pairing that pairs the most, and of those the
    one whose ends lie nearest, is taken (a search: such a group is one per LB at most)."""
    prefs: list[list[int]] = []
    for m in measured:
        lo, hi = offset + m.sent - tol, offset + m.established + tol
        prefs.append([j for j, t in enumerate(truth) if t.apiserver == m.server
                      and t.protocol == m.protocol and lo <= t.start <= hi])  # fmt: skip
    chosen: dict[int, int] = {}
    for group in _groups(prefs):
        chosen.update(
            _best(group, prefs, lambda i, j: _end_distance(measured[i], truth[j], offset))
        )
    return [(m, truth[chosen[i]] if i in chosen else None) for i, m in enumerate(measured)]


def _groups(prefs: Sequence[Sequence[int]]) -> list[list[int]]:
    """The measured watches in groups that share a candidate, directly or through others."""
    by_truth: dict[int, list[int]] = {}
    for i, fits in enumerate(prefs):
        for j in fits:
            by_truth.setdefault(j, []).append(i)
    seen: set[int] = set()
    groups = []
    for first in range(len(prefs)):
        if first in seen or not prefs[first]:
            continue
        group, todo = [], [first]
        seen.add(first)
        while todo:
            i = todo.pop()
            group.append(i)
            for j in prefs[i]:
                for other in by_truth[j]:
                    if other not in seen:
                        seen.add(other)
                        todo.append(other)
        groups.append(sorted(group))
    return groups


def _best(
    group: Sequence[int], prefs: Sequence[Sequence[int]], cost: Callable[[int, int], float]
) -> Pairs:
    """The assignment of the group's watches to distinct candidates (or none) with the fewest
    unpaired, then the least total end distance."""
    best: tuple[int, float, Pairs] = (len(group) + 1, math.inf, {})

    def search(
        k: int, used: frozenset[int], unpaired: int, total: float, now: dict[int, int]
    ) -> None:
        nonlocal best
        if (unpaired, total) >= best[:2]:
            return
        if k == len(group):
            best = (unpaired, total, dict(now))
            return
        i = group[k]
        for j in prefs[i]:
            if j not in used:
                now[i] = j
                search(k + 1, used | {j}, unpaired, total + cost(i, j), now)
                del now[i]
        search(k + 1, used, unpaired + 1, total, now)

    search(0, frozenset(), 0, 0.0, {})
    return best[2]


def _greedy(
    group: Sequence[int], prefs: Sequence[Sequence[int]], cost: Callable[[int, int], float]
) -> Pairs:
    """Nearest ends first: for a group too large to search (none seen in the lab)."""
    edges = sorted((cost(i, j), i, j) for i in group for j in prefs[i])
    chosen: Pairs = {}
    for _, i, j in edges:
        if i not in chosen and j not in chosen.values():
            chosen[i] = j
    return chosen


def _end_distance(m: MeasuredWatch, t: TruthWatch, offset: float) -> float:
    """How far apart the two ends lie. A watch still open, or held until the daemon stopped,
    says nothing of when its server ended it: every truth fits it as well, but one its
    server ended in words (`CLEAN`), which reaches a client at once: that is another
    client's watch landing beside it (gcp's rollout: a 410 on the same server 0.06 s
    before this watch's head arrived)."""
    if m.end is None or m.how == "stopped":
        return math.inf if t.how in CLEAN else 0.0
    return math.inf if t.end is None else abs(m.end + offset - t.end)


@dataclass(frozen=True, slots=True)
class Context:
    """What every judgement needs: the run clock's wall offset, the tolerance, the run's end
    (run time), each stream's measured blind intervals and the blind threshold."""

    offset: float
    tolerance: float
    end_t: float
    blind: dict[str, list[tuple[float, float]]]
    blind_after: float


def check_watches(
    measured: Sequence[MeasuredWatch], truth: Sequence[TruthWatch], ctx: Context
) -> WatchCheck:
    """Every landing, doomed call, end and re-establish judged."""
    check = WatchCheck()
    previous: dict[str, tuple[MeasuredWatch, TruthWatch, float]] = {}  # its end's error
    for m, t in pair(measured, truth, ctx.offset, ctx.tolerance):
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
        error, prompt = _judge_end(check, m, t, ctx)
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
                                   measured_re, true_re))  # fmt: skip
    return check


def _judge_end(
    check: WatchCheck, m: MeasuredWatch, t: TruthWatch, ctx: Context
) -> tuple[float | None, bool]:
    """The end's error (measured minus true) and whether it reached the client at once."""
    tol = ctx.tolerance
    true_end = None if t.end is None else t.end - ctx.offset
    if true_end is None:
        return None, False  # no end in the truth: the run ended first, or the server was killed
    if true_end > ctx.end_t:
        if m.end is not None and m.how not in CLIENT_HOWS and m.end < ctx.end_t - tol:
            check.problems.append(f"{m.stream}: measured an end ({m.how}) at {m.end:.3f} s of a "
                                  "watch the server still served at the run's end")  # fmt: skip
        return None, False
    if m.how == "stopped" and m.end is not None and true_end >= m.end - tol:
        return None, False  # the daemon's stop ended it, and the server saw it go
    if m.end is None or m.how == "stopped":
        # The client never learnt: blind from the first write after the end (a write period
        # and the threshold on) to the run's end, as its heartbeat must show.
        late = true_end + 2 * ctx.blind_after + tol
        spells = ctx.blind.get(m.stream, [])
        said = f"{m.stream}: the server ended its watch ({t.how}) at {true_end:.3f} s; "
        if any(a <= late and b >= ctx.end_t - tol for a, b in spells):
            check.findings.append(said + "the client never learnt of it (measured blind)")
        else:
            check.problems.append(said + "the client held it on and was never measured blind")
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


HEADERS = ["stream", "watches", "landed", "doomed", "truly doomed", "ends judged",
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
        out.append([
            stream, str(len(rows)), str(sum(r.truth_phase is not None for r in rows)),
            str(sum(r.doomed for r in rows)),
            str(sum(r.truth_phase not in (None, "before") for r in rows)),
            str(len(ends)), _max(ends), str(len(again)), _max(again),
        ])  # fmt: skip
    return out


def _max(values: Sequence[float]) -> str:
    return f"{max(values):.3f} s" if values else "-"


def check_run(
    truth_paths: Sequence[Path], analysis: RunAnalysis, offset: float, tolerance: float
) -> WatchCheck:
    """A lab run's watch streams against every apiserver's truth file."""
    truth = [w for path in truth_paths for w in read_truth_watches(path, "/leases")]
    records = analysis.replay.of_kind(WATCH)
    tracker, results, _ = watch_results(records, analysis.replay.end_t)
    blind = {name: r.blind for name, r in results.items()}
    after = 0.0 if math.isinf(tracker.blind_after) else tracker.blind_after
    ctx = Context(offset, tolerance, analysis.replay.end_t, blind, after)
    return check_watches(measured_watches(records), truth, ctx)
