"""How long the watch streams were blind while a node was gone, as the heartbeat measured it.

A watch whose connection went to the vanished node hears nothing more. client-go's HTTP/2
transport pings after `http2_read_idle_timeout` of silence and drops the connection when the
ping's answer does not come within `http2_ping_timeout`; HTTP/1.1 has no such check, and its
watch hangs until the node is back or an LB resets the flow. The heartbeat makes either
measurable: a write acknowledged and not seen within the blind threshold makes the stream
blind (`core.watch`). Per watch stream through an LB that reaches the node, from the summary's
watch section and the watch records: the blind spells that began while the node was gone,
when the first began (when the heartbeat noticed), and when the stream's watch first ended
while the node was gone, how, and when the next one was established.

While the writer's own connection is on the lost node no write is acknowledged and no watch
can be shown blind: that is the writer's outage, reported beside (the longest time without an
acknowledged write while the node was gone), never counted as a watch's blindness. Nothing
here is judged: `--check` holds watches against the truth elsewhere.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prober.core.models import LB, LogRecord
from prober.core.streamkind import KindStreamId
from prober.core.watch import WATCH, WATCH_STEPS, Heartbeat, WatchAttempt, WatchEnd
from prober.lab.infra.truth import LbTruth
from prober.report.replay.replay import Replay
from prober.report.schema.types import SummaryDocument

Span = tuple[float, float]  # run seconds: the node lost, the node back


@dataclass(frozen=True, slots=True)
class WatchLoss:
    """One watch stream through one node loss; times are seconds after the loss."""

    lb: LB
    protocol: str
    blind: float  # seconds of the blind spells that began while the node was gone
    spells: int
    noticed: float | None  # the first of them began: the heartbeat noticed
    ended: float | None  # the stream's first watch end while the node was gone
    how: str | None  # how that watch ended (`core.watch.END_HOWS`)
    reestablished: float | None  # the next watch established after that end


@dataclass(frozen=True, slots=True)
class HeartbeatLoss:
    """The heartbeat writer while the node was gone."""

    writes: int
    failed: int
    unacknowledged: float  # the longest time without an acknowledged write, in seconds


@dataclass(frozen=True, slots=True)
class Watched:
    """What the watch streams of one run recorded: the streams its run record names, their
    records in file order, and the summary's blind intervals (run seconds) by stream."""

    streams: Sequence[KindStreamId] = ()
    records: Sequence[LogRecord] = ()
    blind: Mapping[str, Sequence[Span]] = field(default_factory=dict)
    blind_after: float = 0.0  # a write unseen this long after its answer makes a stream blind


def watched(replay: Replay, summary: SummaryDocument) -> Watched:
    names = replay.run.streams_of(WATCH)
    streams = [KindStreamId.parse(name, WATCH) for name in names]
    section = summary.get("watches", {})
    blind = {
        entry["stream"]: [(float(a), float(b)) for a, b in entry["blind"]]
        for entry in section.get("streams", [])
    }
    deadline = section.get("blind_deadline") or 0.0
    return Watched(tuple(streams), replay.of_kind(WATCH), blind, deadline)


def watch_losses(
    hostname: str, span: Span, records: Watched, lbs: Mapping[LB, LbTruth]
) -> tuple[WatchLoss, ...]:
    """Each watch stream whose LB can reach `hostname`, through the loss `span`."""
    found = []
    for stream in sorted(records.streams, key=lambda s: (s.lb, s.protocol)):
        truth = lbs.get(stream.lb)
        if truth is None or (truth.reaches is not None and hostname not in truth.reaches):
            continue
        found.append(_watch_loss(stream, span, records))
    return tuple(found)


def _watch_loss(stream: KindStreamId, span: Span, records: Watched) -> WatchLoss:
    start, end = span
    # A spell begins `blind_after` past the answer to a write the stream never saw: one that
    # begins just after the node is back is still the loss's.
    late = end + records.blind_after
    spells = [(a, b) for a, b in records.blind.get(stream.name, ()) if start <= a <= late]
    ends = [
        r
        for r in records.records
        if isinstance(r, WatchEnd) and r.stream == stream.name and start <= r.t <= end
    ]
    first = ends[0] if ends else None
    again = None
    if first is not None:
        again = next(
            (
                r.t + r.dur - start
                for r in records.records
                if isinstance(r, WatchAttempt)
                and r.stream == stream.name
                and r.step in WATCH_STEPS
                and r.outcome == "ok"
                and r.t >= first.t
            ),
            None,
        )
    return WatchLoss(
        lb=stream.lb,
        protocol=str(stream.protocol),
        blind=round(sum(b - a for a, b in spells), 6),
        spells=len(spells),
        noticed=None if not spells else round(spells[0][0] - start, 6),
        ended=None if first is None else round(first.t - start, 6),
        how=None if first is None else first.how,
        reestablished=None if again is None else round(again, 6),
    )


def heartbeat_loss(span: Span, records: Watched) -> HeartbeatLoss:
    start, end = span
    beats = [r for r in records.records if isinstance(r, Heartbeat) and start <= r.t <= end]
    acks = sorted(b.ack for b in beats if b.ack is not None and start <= b.ack <= end)
    edges = [start, *acks, end]
    gap = max((b - a for a, b in itertools.pairwise(edges)), default=0.0)
    return HeartbeatLoss(
        writes=len(beats),
        failed=sum(1 for b in beats if b.ack is None),
        unacknowledged=round(gap, 6),
    )


HEADERS = ["lb", "protocol", "blind", "spells", "noticed", "ended", "how", "re-established"]


def rows(losses: Sequence[WatchLoss]) -> list[list[str]]:
    def sec(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    return [
        [
            str(w.lb),
            w.protocol,
            f"{w.blind:.3f} s",
            str(w.spells),
            sec(w.noticed),
            sec(w.ended),
            w.how or "-",
            sec(w.reestablished),
        ]
        for w in losses
    ]


def per_protocol(losses: Sequence[WatchLoss]) -> list[str]:
    """One line per protocol: its longest blindness, and the earliest notice."""
    lines = []
    for protocol in sorted({w.protocol for w in losses}):
        mine = [w for w in losses if w.protocol == protocol]
        worst = max(mine, key=lambda w: w.blind)
        noticed = [w.noticed for w in mine if w.noticed is not None]
        ended = [w.ended for w in mine if w.ended is not None]
        lines.append(
            f"{protocol}: blind up to {worst.blind:.3f} s ({worst.lb})"
            + (f", first noticed {min(noticed):.3f} s" if noticed else ", never noticed")
            + (f", first watch ended {min(ended):.3f} s" if ended else ", no watch ended")
            + " after the loss"
        )
    return lines
