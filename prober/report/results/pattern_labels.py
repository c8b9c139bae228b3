"""Every disruption interval of a summary labelled with its pattern (`results.patterns`).

Writes, in summary.json (schema 3): on each interval `pattern`, `pattern_evidence` and
`pattern_confidence`; on each stream `pattern_seconds` (its disruption seconds by pattern);
and at the top `patterns` (every stream's disruption seconds by pattern). The facts come
from the summary itself (windows, every stream's intervals and causes, the watches' blind
spells), the heartbeat's records (its writes left unacknowledged: `heartbeat_stalls`) and,
when `prober analyze` reads several daemons' logs, the other daemons' summaries
(`peers_of`), put on this run's clock by the runs' start times.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from prober.core.models import StreamId, parse_rfc3339
from prober.core.watch import STOPPED, Heartbeat
from prober.report.results.causes import Cause, cause_of, caused_in
from prober.report.results.patterns import STALL_MIN, Case, Peer, Signals, Span, label
from prober.report.schema.types import IntervalEntry, SummaryDocument, WindowEntry


def heartbeat_stalls(beats: Sequence[Heartbeat], end: float) -> list[tuple[float, float]]:
    """When the heartbeat's writes went unacknowledged on every path: two failed writes or more
    in a row (the writer turns to another LB after each failure, so every LB it tried failed),
    from the first one's send to the next acknowledged write's send (or `end`); or one
    acknowledged `STALL_MIN` or more after its send (the server held it: etcd). One failed
    write is no stall: one LB sent it to a dead or lost server (the lab's crash and node-loss
    scenarios). Overlapping stalls merged; writes the daemon's stop cut are none."""
    spells: list[tuple[float, float]] = []
    ordered = sorted((b for b in beats if b.detail != STOPPED), key=lambda b: b.t)
    failed: list[Heartbeat] = []
    for beat in [*ordered, None]:
        if beat is not None and beat.ack is None:
            failed.append(beat)
            continue
        if len(failed) >= 2:
            spells.append((failed[0].t, beat.t if beat is not None else end))
        failed = []
        if beat is not None and beat.ack is not None and beat.ack - beat.t >= STALL_MIN:
            spells.append((beat.t, beat.ack))
    merged: list[tuple[float, float]] = []
    for start, stop in sorted(spells):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def spans_of(summary: SummaryDocument, offset: float = 0.0) -> list[Span]:
    """Every request stream's intervals, moved by `offset` seconds (another run's clock)."""
    return [
        Span(
            s["stream"],
            s["lb"],
            s["protocol"],
            i["start_t"] + offset,
            max(i["end_t"], i["start_t"]) + offset,
            i["samples"],
        )
        for s in summary["streams"]
        for i in s["intervals"]
    ]


def peers_of(summaries: Sequence[SummaryDocument], nodes: Sequence[str | None]) -> list[list[Peer]]:
    """For each run, the other daemons' runs on its clock: those of another node (a daemon
    restarted onto its own file is no peer of itself)."""
    starts = [_start(s) for s in summaries] if len(summaries) > 1 else [None] * len(summaries)
    out: list[list[Peer]] = []
    for me, (summary, node) in enumerate(zip(summaries, nodes, strict=True)):
        peers = []
        for other, (theirs, their_node) in enumerate(zip(summaries, nodes, strict=True)):
            mine, start = starts[me], starts[other]
            if other == me or mine is None or start is None:
                continue
            if (their_node or theirs["run_id"]) == (node or summary["run_id"]):
                continue
            offset = start - mine
            ended = theirs.get("ended")
            end = ended["t"] if ended is not None else 0.0
            lbs = frozenset(s["lb"] for s in theirs["streams"])
            name = their_node or theirs["run_id"]
            peers.append(Peer(name, offset, end + offset, lbs, spans_of(theirs, offset)))
        out.append(peers)
    return out


def pattern_words(interval: IntervalEntry) -> str:
    """`; pattern P (C confidence): evidence` for a failure's text, or "" for an interval of a
    summary written before patterns."""
    pattern = interval.get("pattern")
    if pattern is None:
        return ""
    confidence = interval.get("pattern_confidence")
    return f"; pattern {pattern} ({confidence} confidence): {interval.get('pattern_evidence')}"


def window_patterns(
    summary: SummaryDocument, window: WindowEntry, stream: str, cause: Cause
) -> str:
    """`; pattern P xN (C)` for the stream's intervals of one cause that began inside the
    window (`causes.caused_in`), or "" before patterns."""
    found: Counter[str] = Counter(
        f"{i['pattern']} ({i.get('pattern_confidence')} confidence)"
        for i in caused_in(summary, window, stream, cause)
        if "pattern" in i
    )
    if not found:
        return ""
    return "; pattern " + ", ".join(f"{p} x{n}" for p, n in sorted(found.items()))


def _start(summary: SummaryDocument) -> float | None:
    """The run's start on the wall clock; None where it has none this can read (then it has
    no peers: the judging stage names a damaged start itself)."""
    try:
        return parse_rfc3339(summary["started"]) if "started" in summary else None
    except ValueError:
        return None


def label_summary(
    summary: SummaryDocument, beats: Sequence[Heartbeat], end: float, peers: Sequence[Peer] = ()
) -> None:
    """Label every interval of `summary` in place, and add up its seconds by pattern."""
    watches = summary.get("watches", {})
    blind: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for watch in watches.get("streams", []):
        blind[watch["lb"]] += [(a, b) for a, b in watch["blind"]]
    signals = Signals(
        lbs=frozenset(s["lb"] for s in summary["streams"]),
        protocols=frozenset(s["protocol"] for s in summary["streams"]),
        spans=spans_of(summary),
        stalls=heartbeat_stalls(beats, end),
        blind=dict(blind),
        peers=peers,
    )
    totals: dict[str, float] = defaultdict(float)
    for stream in summary["streams"]:
        lb = StreamId.parse(stream["stream"]).lb
        seconds: dict[str, float] = defaultdict(float)
        for interval in stream["intervals"]:
            cause = cause_of(interval, lb, summary["windows"])
            case = Case(interval, stream["stream"], stream["lb"], stream["protocol"], cause)
            found = label(case, summary["windows"], signals)
            interval["pattern"] = found.pattern.value
            interval["pattern_evidence"] = found.evidence
            interval["pattern_confidence"] = found.confidence.value
            seconds[found.pattern.value] += interval["end_t"] - interval["start_t"]
        stream["pattern_seconds"] = {k: round(v, 6) for k, v in sorted(seconds.items())}
        for name, value in seconds.items():
            totals[name] += value
    summary["patterns"] = {k: round(v, 6) for k, v in sorted(totals.items())}
