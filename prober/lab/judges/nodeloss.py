"""Judge a vanished node: what the daemon saw while one master dropped every packet.

No apiserver shut down, so there is no `shutdown=true` to reason from and no graceful window
may appear. What there is: requests that hang until the daemon's timeout (a SYN nobody answers,
a kept connection whose peer is silent), and each LB's health checker marking the node down
after its failed checks, which the lab logs (the truth). Per stream, the daemon's failed
requests sent while the node was gone give:

* the LB's measured reaction, on its new-connection streams: from the loss to the last failed
  request sent (the LB still chose the lost node then), a lower bound on the true reaction;
  a failure sent after the LB marked the node down would be the LB sending a new flow to a
  node it had given up, or the daemon's times being wrong: either is a problem;
* the error classes a client meets: `timeout`, for a new connection to a silent node and a
  kept one alike, never `connect_refused` (nobody sends the RST); `connection_reset` only on
  a kept connection through an LB that resets a target's flows when it marks it down (AWS).
  An LB that deletes the flows also re-hashes a hung SYN's retransmission to a healthy
  target: a new connection then succeeds late instead of failing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prober.core.models import LB, Connection, ErrorClass, Interval, Sample, Window
from prober.lab.infra.lbstate import Outage
from prober.lab.infra.truth import LbTruth, first_down
from prober.lab.judges.lossblind import (
    HeartbeatLoss,
    Watched,
    WatchLoss,
    heartbeat_loss,
    watch_losses,
)


@dataclass(frozen=True, slots=True)
class LossRow:
    """One stream through one node loss; times are seconds after the loss."""

    lb: LB
    protocol: str
    connection: Connection
    failures: int
    errors: dict[str, int]  # failures by error class
    first: float | None  # the first failed request's send time
    last: float | None  # the last one's: the measured reaction on a new-connection stream
    truth: float | None  # when the LB stopped choosing the node (None: a direct path, never)
    intervals: int  # disruption intervals that began while the node was gone
    disrupted: float  # their seconds, summed


@dataclass(frozen=True, slots=True)
class NodeLoss:
    hostname: str
    lost: float  # wall time
    back: float  # wall time the node was restored
    rows: tuple[LossRow, ...]
    watches: tuple[WatchLoss, ...] = ()  # measured by the heartbeat, not judged (`lossblind`)
    heartbeat: HeartbeatLoss | None = None


def judge(
    outage: Outage,
    samples: Sequence[Sample],
    intervals: Sequence[Interval],
    *,
    lbs: Mapping[LB, LbTruth],
    offset: float,
    watched: Watched | None = None,
) -> NodeLoss:
    """`outage`: a node that is back; `offset`: wall seconds at the daemon's run time 0
    (`compare.wall_offset`); `watched`: the run's watch streams, whose blindness is
    measured through the loss."""
    assert outage.back is not None, "judged once the node is back"
    rows = []
    for lb, truth in sorted(lbs.items()):
        if truth.reaches is not None and outage.hostname not in truth.reaches:
            continue
        records = (samples, intervals)
        rows += [
            _row(outage, offset, (lb, p, c), truth=truth, records=records)
            for p in ("http1", "http2")
            for c in (Connection.NEW, Connection.REUSED)
        ]
    if watched is None:
        return NodeLoss(outage.hostname, outage.lost, outage.back, tuple(rows))
    span = (outage.lost - offset, outage.back - offset)
    return NodeLoss(
        outage.hostname,
        outage.lost,
        outage.back,
        tuple(rows),
        watches=watch_losses(outage.hostname, span, watched, lbs),
        heartbeat=heartbeat_loss(span, watched),
    )


def _row(
    outage: Outage,
    offset: float,
    key: tuple[LB, str, Connection],
    *,
    truth: LbTruth,
    records: tuple[Sequence[Sample], Sequence[Interval]],
) -> LossRow:
    assert outage.back is not None
    start, end = outage.lost - offset, outage.back - offset  # in run seconds
    lb, protocol, connection = key
    samples, intervals = records

    def ours(record: Sample | Interval) -> bool:
        return (record.lb, str(record.protocol), record.connection) == key

    mine = [s for s in samples if ours(s) and s.failed and start <= s.t <= end]
    spans = [i for i in intervals if ours(i) and start <= i.start_t <= end]
    down = first_down(truth.events, outage.hostname, outage.lost, until=outage.back)
    return LossRow(
        lb=lb,
        protocol=protocol,
        connection=connection,
        failures=len(mine),
        errors=dict(Counter(str(s.error) for s in mine)),
        first=min((s.t - start for s in mine), default=None),
        last=max((s.t - start for s in mine), default=None),
        truth=None if math.isinf(down) else down - outage.lost,
        # A failure answered after the interval it belongs to closed is counted in a
        # zero-length interval of its own (`core.disruption`): not one more outage.
        intervals=sum(1 for i in spans if i.seconds > 0),
        disrupted=sum(i.seconds for i in spans),
    )


def problems(
    loss: NodeLoss, windows: Sequence[Window], lbs: Mapping[LB, LbTruth], tolerance: float
) -> list[str]:
    found = [
        f"a graceful shutdown window was invented for a node that vanished: host {w.host}"
        for w in windows
    ]
    direct = [r for r in loss.rows if r.lb is LB.LOCALHOST]
    if direct and not any(r.failures for r in direct):
        found.append(f"{loss.hostname}: nothing failed on the direct path to the vanished node")
    for row in loss.rows:
        name = f"{loss.hostname} {row.lb} {row.protocol} {row.connection}"
        # Nobody answers for a vanished node: requests time out. Only an LB that resets the
        # flows of a target it marks down (AWS) turns a kept connection's hang into a reset.
        truth = lbs.get(row.lb)
        resets = truth is not None and truth.reset_on_down and row.connection is Connection.REUSED
        allowed = {ErrorClass.TIMEOUT.value, *([ErrorClass.CONNECTION_RESET.value] * resets)}
        unexpected = {e: n for e, n in row.errors.items() if e not in allowed}
        if unexpected:
            found.append(
                f"{name}: a silent node should give {' or '.join(sorted(allowed))}, got "
                + ", ".join(f"{n} {e}" for e, n in sorted(unexpected.items()))
            )
        late = row.last is not None and row.truth is not None and row.last > row.truth + tolerance
        if row.connection is Connection.NEW and late:
            found.append(
                f"{name}: a request sent {row.last:.3f} s after the loss failed, after the LB "
                f"had marked the node down at {row.truth:.3f} s"
            )
    return found


HEADERS = ["lb", "protocol", "conn", "failed", "errors", "first", "last (measured)", "truth"]
HEADERS += ["intervals", "disrupted"]


def rows(loss: NodeLoss) -> list[list[str]]:
    def sec(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    return [
        [
            str(r.lb),
            r.protocol,
            str(r.connection),
            str(r.failures),
            ", ".join(f"{n} {e}" for e, n in sorted(r.errors.items())) or "-",
            sec(r.first),
            sec(r.last),
            sec(r.truth) if r.truth is not None else "never (direct)",
            str(r.intervals),
            sec(r.disrupted),
        ]
        for r in loss.rows
    ]
