"""A real informer beside the daemon's watch streams: client-go v0.37.2's (`upstream/bin/informer`,
`make upstream`), per LB and protocol, on the daemon's own heartbeat Lease, in both of the ways
client-go syncs: its default watch-list (one watch that sends the current state first) and the
LIST-first reflector (`KUBE_FEATURE_WatchListClient=false`) the daemon runs, like with like.

Each informer prints a JSON line per list, watch start, watch end (with its cause) and event.
They become the daemon's own watch records on its run clock and are fed, with the daemon's
heartbeat writes, to the same tracker (`core.watch.WatchTracker`): watches established, ends
and their causes, relists, blind time (a write not seen within the daemon's threshold) and lag
come out computed one way for both. Where the two differ, one of them is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prober.core.models import LB, LogRecord, Protocol
from prober.core.streamkind import KindStreamId
from prober.core.watch import (
    WATCH,
    Heartbeat,
    WatchAttempt,
    WatchEnd,
    WatchResult,
    WatchSeen,
    WatchTracker,
)
from prober.lab.infra.upstream import GoLine, go_line
from prober.lab.scenarios.informers import MODES, Informer

if TYPE_CHECKING:
    pass


def informer_records(lines: Iterable[str], informer: Informer, offset: float) -> list[LogRecord]:
    """An informer's lines as the daemon's watch records, on the run clock (`offset`: wall
    seconds at run time 0)."""
    stream = KindStreamId("informer", informer.protocol, informer.lb, WATCH)
    out: list[LogRecord] = []
    starts: dict[int, float] = {}
    for text in lines:
        line = go_line(text)
        if line is None:
            continue
        event, t, record = line.event, line.wall - offset, line.fields
        if event == "list":
            outcome = "failed" if record.get("error") else "ok"
            cause = "relist" if record.get("relist") else ""
            out.append(WatchAttempt(t, stream, "list", outcome, relist_cause=cause))
        elif event == "watch_start":
            outcome = "failed" if record.get("error") else "ok"
            cause = "relist" if record.get("relist") else ""
            if record.get("initial_list"):  # watch-list: the state comes first, as a LIST's
                out.append(WatchAttempt(t, stream, "list", outcome, relist_cause=cause))
            if outcome == "ok":
                starts[line.integer("watch_id")] = t
            out.append(WatchAttempt(t, stream, "watch", outcome, relist_cause=cause,
                                    dur=line.number("duration_s")))  # fmt: skip
        elif event == "watch_event" and record.get("rv"):
            out.append(WatchSeen(t, stream, line.integer("rv")))
        elif event == "watch_end":
            started = starts.pop(line.integer("watch_id"), t)
            out.append(WatchEnd(t, stream, started, _how(line), events=line.integer("events")))
    return out


def _how(end: GoLine) -> str:
    """client-go tells a server's clean end from a cut no more than `closed`; a 410 as the
    daemon does; a stop of its own (a relist, the informer's exit) as `stopped`."""
    status = end.fields.get("error_status") or {}
    if isinstance(status, dict) and status.get("code") == 410:
        return "gone"
    return "stopped" if end.text("cause") == "stopped_by_client" else "closed"


@dataclass(frozen=True, slots=True)
class Side:
    """What one watcher (the daemon's stream, or an informer) added up to."""

    who: str
    lb: LB
    protocol: Protocol
    result: WatchResult

    def row(self) -> list[str]:
        r = self.result
        ends = ", ".join(f"{n} {how}" for how, n in sorted(r.ends.items())) or "-"
        relists = sum(r.relists.values())
        lag = r.lag(0.99)
        return [str(self.lb), str(self.protocol), self.who, str(r.established), ends,
                str(relists), f"{r.blind_seconds:.2f} s", f"{longest(r):.2f} s",
                "-" if lag is None else f"{lag:.3f} s"]  # fmt: skip


HEADERS = ["lb", "protocol", "watcher", "watches", "ends", "relists", "blind", "longest blind",
           "lag p99"]  # fmt: skip


def longest(result: WatchResult) -> float:
    """The longest blind spell: how long one dead path went unnoticed. The sum depends on
    how many watches landed on the servers that went away, which differs between watchers."""
    return max((end - start for start, end in result.blind), default=0.0)


def sides(
    daemon: Sequence[LogRecord], informers: dict[Informer, list[LogRecord]], end_t: float
) -> list[Side]:
    """Per LB and protocol, the daemon's stream and then each informer, every one through
    the same tracker with the daemon's heartbeat writes."""
    writes = [r for r in daemon if isinstance(r, Heartbeat)]
    streams = _results(daemon, end_t)
    found: list[Side] = []
    keys = sorted({(i.lb, i.protocol) for i in informers}, key=lambda k: (str(k[0]), k[1]))
    for lb, protocol in keys:
        name = KindStreamId("kube-api", protocol, lb, WATCH).name
        if name in streams:
            found.append(Side("daemon (list first)", lb, protocol, streams[name]))
        for mode in MODES:
            records = informers.get(Informer(lb, protocol, mode))
            if records is None:
                continue
            merged = sorted([*writes, *records], key=lambda r: float(getattr(r, "t", 0.0)))
            results = list(_results(merged, end_t).values()) or [WatchResult(mode)]
            found.append(Side(f"informer {mode}", lb, protocol, results[0]))
    return found


def _results(records: Sequence[LogRecord], end_t: float) -> dict[str, WatchResult]:
    tracker = WatchTracker()
    for record in records:
        if isinstance(record, WatchAttempt | WatchEnd | WatchSeen | Heartbeat):
            tracker.feed(record)
    return {name: r for name, r in tracker.close(end_t).items() if r.established or r.ends}


BLIND_APART = 5.0  # seconds of blindness apart that a reader must be told of


def differences(found: Sequence[Side]) -> list[str]:
    """Where the daemon and client-go's LIST-first informer, like with like on one LB and
    protocol, stayed blind at the longest for times further apart than `BLIND_APART`, or
    where only one of them met a 410. Their ends differ by kind anyway: client-go tells a
    server's clean end from a cut no more than `closed`, and its watches' timeouts are its
    own 5 to 10 minutes, never scaled."""
    by: dict[tuple[LB, Protocol], dict[str, WatchResult]] = {}
    for side in found:
        by.setdefault((side.lb, side.protocol), {})[side.who] = side.result
    said = []
    for (lb, protocol), results in sorted(by.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        daemon, client = results.get("daemon (list first)"), results.get("informer list")
        if daemon is None or client is None:
            continue
        if abs(longest(daemon) - longest(client)) > BLIND_APART:
            said.append(f"{lb} {protocol} watches: blind at the longest {longest(daemon):.2f} s "
                        f"as the daemon measured, {longest(client):.2f} s for client-go's "
                        "informer")  # fmt: skip
        if bool(daemon.ends.get("gone")) != bool(client.ends.get("gone")):
            said.append(f"{lb} {protocol} watches: a 410 met by one of the daemon "
                        f"({daemon.ends.get('gone', 0)}) and client-go's informer "
                        f"({client.ends.get('gone', 0)}) only")  # fmt: skip
    return said


def judge_informers(
    informers: Sequence[Informer],
    logs: Path,
    daemon: Sequence[LogRecord],
    offset: float,
    end_t: float,
) -> list[Side]:
    """Every informer's lines (`logs/<name>.stdout.log`) beside the daemon's streams."""
    read = {}
    for informer in informers:
        path = logs / f"{informer.name}.stdout.log"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        read[informer] = informer_records(lines, informer, offset)
    return sides(daemon, read, end_t)
