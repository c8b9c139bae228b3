"""summary.json's `rebalancing`: after each restart, the share of the kept HTTP/2 connections'
requests each apiserver answered, per summary period, and how long until each held at least
half its fair share (kubernetes #48610: kept connections stay where they are; `--goaway-chance`
moves them).

The counts are the daemon's, written live in its `summary` records (`core.rebalancing`:
compaction drops the plain successes), summed over every kept HTTP/2 stream; a period's
counts are the difference of two records, so its shares are of that period alone.

- The pool: the kept HTTP/2 connections the daemon held (the most any summary saw, over every
  LB: workers per stream x such streams). One that is smaller than the apiservers cannot put
  one on each, and the section says so in place of shares that would mean nothing.
- A restart: an instance of `core.instances`, from its T1 (its first sign where T1 is not
  known) until the next shutdown's T0 (another disturbance) or the run's last summary.
- Its periods: the summary periods that end after T1 and no later than that end; the first one
  straddles T1.
- Held: the first period from which, in every later period of the restart with enough
  requests to judge (2N: one request is then at most half a fair share), the apiserver
  answered at least half of 1/N of them (N apiservers). Its time is from T1 to
  that period's end; the true instant lies after the start of the period before (a period's
  share is an average: it may have crossed inside either) and the bound is widened by T1's.
  None of them: `never` before the restart's end.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prober.core.instances import Instance
from prober.core.models import Summary, Window
from prober.core.rebalancing import OTHER_HOSTS
from prober.report.format.tables import bound
from prober.report.schema.types import (
    HeldEntry,
    RebalanceEntry,
    RebalancingSection,
    SharePeriodEntry,
)

FAIR_FRACTION = 0.5  # of the fair share 1/N: "held at least half its fair share"


@dataclass(frozen=True, slots=True)
class Tally:
    """One summary record's kept HTTP/2 counts, over every stream: cumulative answers by host
    and the connections held at run time `t`."""

    t: float
    answers: Mapping[str, int]
    pool: int


@dataclass(frozen=True, slots=True)
class Period:
    """The answers by host between two summary records."""

    start: float
    end: float
    answers: Mapping[str, int]

    @property
    def requests(self) -> int:
        return sum(self.answers.values())

    def share(self, host: str) -> float:
        return self.answers.get(host, 0) / self.requests if self.requests else 0.0


@dataclass(frozen=True, slots=True)
class Restart:
    label: str
    host: str
    ready: float
    ready_lo: float | None
    ready_hi: float | None


def tallies(summaries: Sequence[Summary]) -> list[Tally]:
    """Each summary's kept counts, in time order; one per time (a repeat adds nothing)."""
    out: dict[float, Tally] = {}
    for summary in summaries:
        answers: Counter[str] = Counter()
        pool = 0
        for counters in summary.streams:
            answers.update(counters.kept_answers)
            pool += counters.kept_connections
        out[summary.t] = Tally(summary.t, dict(answers), pool)
    return [out[t] for t in sorted(out)]


def periods(counts: Sequence[Tally]) -> list[Period]:
    """The answers of each period between consecutive tallies. A count never goes down within
    one run; where one would, the period counts nothing for that host rather than less."""
    out = []
    for before, after in itertools.pairwise(counts):
        answers = {
            host: max(0, n - before.answers.get(host, 0)) for host, n in after.answers.items()
        }
        out.append(Period(before.t, after.t, {h: n for h, n in sorted(answers.items()) if n}))
    return out


def held_from(spans: Sequence[Period], host: str, floor: float) -> int | None:
    """The first period from which `host` held `floor` of the requests in every period that
    had enough to judge; None if it did not hold it at the last such one. A period judges a
    share only if one request is no more than `floor` of it: fewer (the last, cut short by
    the run's end, say) could swing it by more than the floor itself."""
    start: int | None = None
    least = math.ceil(round(1 / floor, 9)) if floor > 0 else 1  # 2N, without float noise
    for index, period in enumerate(spans):
        if period.requests < least:
            continue
        if period.share(host) < floor:
            start = None
        elif start is None:
            start = index
    return start


def held_entry(restart: Restart, spans: Sequence[Period], host: str, floor: float) -> HeldEntry:
    index = held_from(spans, host, floor)
    if index is None:
        return {"host": host, "seconds": None, "seconds_lo": None, "seconds_hi": None}
    end = spans[index].end
    after = spans[index - 1].start if index > 0 else restart.ready
    ready_lo = restart.ready if restart.ready_lo is None else restart.ready_lo
    ready_hi = restart.ready if restart.ready_hi is None else restart.ready_hi
    return {
        "host": host,
        "seconds": round(end - restart.ready, 6),
        "seconds_lo": round(max(0.0, after - ready_hi), 6),
        "seconds_hi": round(end - ready_lo, 6),
    }


def restart_entry(
    restart: Restart,
    spans: Sequence[Period],
    hosts: Sequence[str],
    until: tuple[float, str],
) -> RebalanceEntry:
    end, end_by = until
    mine = [p for p in spans if p.end > restart.ready and p.end <= end]
    floor = FAIR_FRACTION / len(hosts)
    held = [held_entry(restart, mine, host, floor) for host in hosts]
    entry: RebalanceEntry = {
        "label": restart.label,
        "host": restart.host,
        "ready": restart.ready,
        "ready_lo": restart.ready_lo,
        "ready_hi": restart.ready_hi,
        "until": end,
        "until_by": end_by,
        "periods": [_period_entry(p, hosts) for p in mine],
        "held": held,
        "text": "",
    }
    entry["text"] = restart_text(entry)
    return entry


def restart_text(entry: RebalanceEntry) -> str:
    """When each apiserver held half its fair share after one restart, in one line."""
    parts = []
    for held in entry["held"]:
        if held["seconds"] is None:
            parts.append(f"{held['host']} never before {entry['until_by']}")
        else:
            where = bound(held["seconds_lo"], held["seconds_hi"], 1)
            parts.append(f"{held['host']} after {held['seconds']:.1f} s {where}")
    if not entry["periods"]:
        return f"{entry['label']}: no summary period ended before {entry['until_by']}"
    return f"{entry['label']}: half its fair share held by " + "; ".join(parts)


def _period_entry(period: Period, hosts: Sequence[str]) -> SharePeriodEntry:
    return {
        "start": period.start,
        "end": period.end,
        "requests": period.requests,
        "shares": {h: round(period.share(h), 6) for h in hosts},
    }


def rebalancing_section(
    summaries: Sequence[Summary],
    instances: Sequence[Instance],
    windows: Sequence[Window],
    nodes: Mapping[str, str] | None = None,
) -> RebalancingSection | None:
    """None where the run had no kept HTTP/2 stream, or its log no summary that counted them
    (written before they were counted). Each apiserver is named by its node where `nodes`
    (APIServerID -> node, as the daemon learnt them) or its instances know it."""
    known = {i.host: i.node for i in instances if i.node} | dict(nodes or {})
    counts = [_named(c, known) for c in tallies(summaries)]
    instances = [dataclasses.replace(i, host=known.get(i.host, i.host)) for i in instances]
    windows = [dataclasses.replace(w, host=known.get(w.host, w.host)) for w in windows]
    pool = max((c.pool for c in counts), default=0)
    seen = {h for c in counts for h in c.answers if h != OTHER_HOSTS}
    if not pool and not seen:
        return None
    hosts = sorted(seen | {i.host for i in instances})
    covers = pool >= len(hosts) > 0
    section: RebalancingSection = {
        "pool": pool,
        "apiservers": hosts,
        "covers": covers,
        "half_fair": round(FAIR_FRACTION / len(hosts), 6) if hosts else 0.0,
        "restarts": [],
        "text": "",
    }
    if covers:
        spans = periods(counts)
        last = counts[-1].t
        section["restarts"] = [
            restart_entry(r, spans, hosts, _until(r, windows, last)) for r in restarts(instances)
        ]
    section["text"] = section_text(section)
    return section


def section_text(section: RebalancingSection) -> str:
    pool, n = section["pool"], len(section["apiservers"])
    if not section["covers"]:
        return f"pool of {pool} kept HTTP/2 connections cannot cover {n} apiservers"
    said = f"pool of {pool} kept HTTP/2 connections over {n} apiservers"
    if pool <= 2 * n:  # one connection moving is half a fair share or more
        said += f" (one connection is 1/{pool} of the requests: a share moves by that at once)"
    if not section["restarts"]:
        return f"{said}; no apiserver restarted"
    return f"{said}; half a fair share is {section['half_fair'] * 100:.1f} % of the requests"


def restarts(instances: Sequence[Instance]) -> list[Restart]:
    """Each restarted instance, from its T1 (its first sign where T1 is not known)."""
    out = [
        Restart(i.label, i.host, i.first_t if i.t1 is None else i.t1, i.t1_lo, i.t1_hi)
        for i in instances
    ]
    return sorted(out, key=lambda r: r.ready)


def _until(restart: Restart, windows: Sequence[Window], last: float) -> tuple[float, str]:
    """Where a restart's rebalancing ends: the next shutdown's T0, else the last summary."""
    later = [w for w in windows if w.t0 > restart.ready]
    if later:
        first = min(later, key=lambda w: w.t0)
        return min(first.t0, last), f"the shutdown of {first.host}"
    return last, "the run's end"


def _named(tally: Tally, known: Mapping[str, str]) -> Tally:
    """A tally whose answers are keyed by each apiserver's node where it is known."""
    answers: Counter[str] = Counter()
    for host, n in tally.answers.items():
        answers[known.get(host, host)] += n
    return Tally(tally.t, dict(answers), tally.pool)
