"""Which watch in an apiserver's truth each watch the daemon established is: paired by the
connection it went on, and by its timing only where nothing joins the two.

The daemon records each established watch's connection, its local "ip:port" (`WatchAttempt`);
each apiserver records the peer it saw (`watch_started`). Where the path keeps the client's
address (the kernel's pass-through LBs, the service network's DNAT, localhost) the two are the
same, but where a NAT moved the client's port, which its conntrack log says
(`lab.infra.kernel.conntrack`); behind HAProxy the server sees HAProxy's own connection, and
HAProxy's log of each session (`option logasap`: client and backend-side addresses, as it
connects) joins them. A
joined pair is exact: the truth watch of that peer on the server named, of that protocol,
that began inside the watch's landing interval (on HTTP/2 one connection carries one watch
after another, one at a time). An LB's record is trusted by when it was stamped: up to the
head's arrival first, then later (conntrack stamps a flow when it prints it), the client's
own address last, each rank tried for every watch before the next, so a moved port never
takes the watch that kept it. A watch nothing joins (a log line lost, a record without an
address) falls back to time: among the watches landing together on one server, the pairing
that pairs the most, and of those the one whose ends lie nearest, searched in groups of at
most `SEARCHED`, nearest ends first past that. Each pair says which way it was made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prober.core.header import apiserver_id
from prober.core.models import LB
from prober.lab.infra.sessions import ADDRESS, NAT, TIME, Session

CLEAN = frozenset({"timeout", "drained", "relisted", "gone"})  # the server ended it in words
SEARCHED = 8  # a group of watches landing together up to this size is searched for its best
Pairs = dict[int, int]  # measured index -> truth index
# How much a join is trusted, tried in this order across all watches: an LB's record of the
# connection up to its head's arrival, one stamped after it, the client's own address.
EXACT, LATE, OWN = 0, 1, 2


@dataclass(frozen=True, slots=True)
class TruthWatch:
    apiserver: str
    protocol: str  # the connection's, as the prober names it: "http1" or "http2"
    start: float  # wall time the server began it
    phase: str  # of the server's shutdown as it began (core.phase values)
    end: float | None = None
    how: str = ""
    events: int = 0
    peer: str = ""  # "ip:port" of the connection, as the server saw it


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
    lb: LB | None = None
    local: str | None = None  # "ip:port" of its connection


@dataclass(frozen=True, slots=True)
class Joins:
    """Each LB's sessions: HAProxy's, which makes a connection of its own, and a NAT's,
    which may move the client's port. A NAT keeps the client's address otherwise, as every
    other path does; HAProxy never does."""

    sessions: Mapping[LB, Sequence[Session]] = field(default_factory=dict)
    proxies: frozenset[LB] = frozenset()  # the LBs that are HAProxy
    # Each NAT's flows sent to an apiserver itself, in the order a flow meets the NATs (the
    # client's, then the router's): either may move a port again, a hop each.
    transit: Sequence[Sequence[Session]] = ()

    def peers(self, m: MeasuredWatch, offset: float, tol: float) -> list[tuple[str, str, int]]:
        """Each peer `m`'s server may have seen it as, with how that is known and its rank
        (`EXACT`, `LATE`, `OWN`): empty when nothing says."""
        if m.local is None or m.lb is None:
            return []
        before = offset + m.established + tol
        first = self.sessions.get(m.lb, ())
        found = [(s.backend, s.way, r) for s, r in _sessions(first, m.local, m.server, before)]
        if m.lb not in self.proxies:
            found.append((m.local, ADDRESS, OWN))
        return [p for peer in found for p in _onward(peer, m.server, before, self.transit)]


def _onward(
    peer: tuple[str, str, int], server: str, before: float, hops: Sequence[Sequence[Session]]
) -> list[tuple[str, str, int]]:
    """Where the NATs still ahead (`hops`) may have moved a peer's port, likeliest first."""
    if not hops:
        return [peer]
    address, way, rank = peer
    onward = _sessions(hops[0], address, server, before)
    found = []
    for hop, hop_rank in onward:
        moved = hop.backend != address
        found += _onward((hop.backend, NAT if moved else way, max(rank, hop_rank)), server,
                         before, hops[1:])  # fmt: skip
    # Where this NAT's log has the flow, its port as sent is only a last resort.
    return found + _onward((address, way, OWN if onward else rank), server, before, hops[1:])


def _sessions(
    sessions: Iterable[Session], client: str, server: str, before: float
) -> list[tuple[Session, int]]:
    """The sessions from that address to that server, likeliest first: the newest up to
    `before` (a port is used again once its connection is gone; an HTTP/2 connection
    predates the watches it carries), then the later ones, nearest first, since conntrack
    stamps a flow as it prints it, late on a busy machine."""
    mine = [s for s in sessions if s.client == client and apiserver_id(s.server) == server]
    early = sorted((s for s in mine if s.wall <= before), key=lambda s: -s.wall)
    late = sorted((s for s in mine if s.wall > before), key=lambda s: s.wall)
    return [(s, EXACT) for s in early[:1]] + [(s, LATE) for s in late]


@dataclass(frozen=True, slots=True)
class Paired:
    measured: MeasuredWatch
    truth: TruthWatch | None
    way: str  # ADDRESS, LOG or TIME; "" where no truth watch was found
    why: str = ""  # for TIME: why its connection joined nothing


def pair(
    measured: Sequence[MeasuredWatch],
    truth: Sequence[TruthWatch],
    offset: float,
    tol: float,
    joins: Joins | None = None,
) -> list[Paired]:
    """Each measured watch with the truth watch it is, and how that was found."""
    joins = joins or Joins()
    by_peer: dict[tuple[str, str, str], list[int]] = {}
    for j, t in enumerate(truth):
        by_peer.setdefault((t.apiserver, t.protocol, t.peer), []).append(j)
    chosen: dict[int, tuple[int, str]] = {}
    used: set[int] = set()
    peers = [joins.peers(m, offset, tol) for m in measured]

    def landed(m: MeasuredWatch, peer: str) -> int | None:
        """The truth watch of that peer not yet taken that began as `m` landed, nearest."""
        lo, hi = offset + m.sent - tol, offset + m.established + tol
        fits = [j for j in by_peer.get((m.server, m.protocol, peer), ())
                if j not in used and lo <= truth[j].start <= hi]  # fmt: skip
        return min(fits, key=lambda j: abs(truth[j].start - (offset + m.established)), default=None)

    for rank in (EXACT, LATE, OWN):
        for i, m in enumerate(measured):
            if i in chosen:
                continue
            for peer, way, r in peers[i]:  # likeliest first: the first that fits is taken
                if r == rank and (hit := landed(m, peer)) is not None:
                    chosen[i] = (hit, way)
                    used.add(hit)
                    break
    rest = [i for i in range(len(measured)) if i not in chosen]
    for i, j in _by_time([measured[i] for i in rest], truth, used, offset, tol).items():
        chosen[rest[i]] = (j, TIME)
    paired = []
    for i, m in enumerate(measured):
        j, way = chosen.get(i, (-1, ""))
        why = _unjoined(m, peers[i]) if way == TIME else ""
        paired.append(Paired(m, truth[j] if way else None, way, why))
    return paired


def _unjoined(m: MeasuredWatch, peers: Sequence[tuple[str, str, int]]) -> str:
    """Why a watch paired by time joined nothing: what its LB's records offered."""
    if m.local is None or m.lb is None:
        return "the daemon recorded no address for its connection"
    if not peers:
        return f"{m.lb} logged no session from {m.local} to {m.server}"
    seen = ", ".join(dict.fromkeys(f"{peer} ({way})" for peer, way, _ in peers))
    return f"from {m.local}, no {m.protocol} watch began in its landing interval as {seen}"


def _by_time(
    measured: Sequence[MeasuredWatch],
    truth: Sequence[TruthWatch],
    used: set[int],
    offset: float,
    tol: float,
) -> Pairs:
    """The fallback: each watch with a truth watch not yet taken that began inside its
    landing interval on its server; groups that share a candidate are searched together."""
    prefs: list[list[int]] = []
    for m in measured:
        lo, hi = offset + m.sent - tol, offset + m.established + tol
        prefs.append([j for j, t in enumerate(truth) if j not in used and t.apiserver == m.server
                      and t.protocol == m.protocol and lo <= t.start <= hi])  # fmt: skip

    def cost(i: int, j: int) -> float:
        return _end_distance(measured[i], truth[j], offset)

    chosen: Pairs = {}
    for group in _groups(prefs):
        assign = _best if len(group) <= SEARCHED else _greedy
        chosen.update(assign(group, prefs, cost))
    return chosen


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
    """Nearest ends first: for a group too large to search."""
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
