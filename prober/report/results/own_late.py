"""summary.json's `own_late`: per apiserver and shutdown window, the connections the daemon
itself opened in the delay's last 20 % and the requests it sent on them.

The late-connection test ("requests on connections established in the last 20 % of
--shutdown-delay-duration") can be failed by the probe itself: cluster-kube-apiserver-operator
#2222 found origin's own new-connections probe among its late requests. The apiserver calls a
connection late when it accepted it past 80 % of its delay (`openshift.io/during-graceful`);
this section names the daemon's share of them, so that a reader of that test, or of
`prober audit`, knows which late requests were the probe's own.

A connection is its stream, local port and opening (`t - connection_age`, the start of its
TCP connect: the server accepted it within that handshake's first round trip). It is one of a
window's when an answer on it names the window's server, and late when its opening lies in
the delay's last 20 % by that window's bounds (`core.connection_age.shutdown_of`: T0 anywhere
in `[t0_lo, t0_hi]`, the delay exact where the run's settings give it). Where the bounds also
allow an earlier or later phase it `maybe` is, counted apart. Its requests are every sample
sent on it, answered or not.

Every such sample is in the event log: an answer from a server inside its window is late
(`shutdown=true`), and what comes after its delay fails; compaction keeps both
(`core.compaction`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prober.core.connection_age import shutdown_of
from prober.core.models import Sample, Window
from prober.core.phase import ShutdownPhase
from prober.report.schema.types import OwnLateSection, OwnLateStream, OwnLateWindow

LATE = str(ShutdownPhase.DELAY_LATE)
OPENING_DIGITS = 5  # `t` and `connection_age` are each rounded to the microsecond

ConnectionKey = tuple[str, int, float]  # stream, local port, opening


@dataclass(slots=True)
class Connection:
    """The samples of one connection the daemon opened, and the servers that answered on it."""

    opened: float
    samples: list[Sample] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)


def connections(samples: Iterable[Sample]) -> dict[ConnectionKey, Connection]:
    """Every connection whose opening the samples tell, once each (by Audit-ID)."""
    out: dict[ConnectionKey, Connection] = {}
    seen: set[str] = set()
    for sample in samples:
        if sample.connection_age is None or sample.local_port is None or sample.stopped:
            continue
        if sample.audit_id in seen:
            continue
        seen.add(sample.audit_id)
        opened = sample.t - sample.connection_age
        key = (sample.stream, sample.local_port, round(opened, OPENING_DIGITS))
        conn = out.setdefault(key, Connection(opened))
        conn.samples.append(sample)
        if sample.shutdown is not None:
            conn.hosts.add(sample.shutdown.host)
    return out


@dataclass(slots=True)
class Tally:
    """One stream's late connections in one window, and the requests sent on them."""

    connections: int = 0
    requests: int = 0
    maybe_connections: int = 0
    maybe_requests: int = 0

    def add(self, requests: int, *, certain: bool) -> None:
        if certain:
            self.connections += 1
            self.requests += requests
        else:
            self.maybe_connections += 1
            self.maybe_requests += requests

    def entry(self, stream: str) -> OwnLateStream:
        return {
            "stream": stream,
            "connections": self.connections,
            "requests": self.requests,
            "maybe_connections": self.maybe_connections,
            "maybe_requests": self.maybe_requests,
        }


def window_entry(
    window: Window, conns: Mapping[ConnectionKey, Connection], exact_delay: float | None
) -> OwnLateWindow:
    """The daemon's connections opened in one window's last 20 % that reached its server."""
    shutdown = shutdown_of(window, exact_delay)
    tallies: dict[str, Tally] = defaultdict(Tally)
    for (stream, _port, _opened), conn in conns.items():
        if window.host not in conn.hosts:
            continue
        phases = shutdown.place(conn.opened, conn.opened).split("|")
        if LATE in phases:
            requests = sum(s.t <= window.end_t for s in conn.samples)
            tallies[stream].add(requests, certain=phases == [LATE])
    total = Tally()
    for tally in tallies.values():
        total.connections += tally.connections
        total.requests += tally.requests
        total.maybe_connections += tally.maybe_connections
        total.maybe_requests += tally.maybe_requests
    entry: OwnLateWindow = {
        "host": window.host,
        "node": window.node,
        "t0": window.t0,
        "connections": total.connections,
        "requests": total.requests,
        "maybe_connections": total.maybe_connections,
        "maybe_requests": total.maybe_requests,
        "streams": [tallies[name].entry(name) for name in sorted(tallies)],
        "text": "",
    }
    entry["text"] = window_text(entry)
    return entry


def window_text(entry: OwnLateWindow) -> str:
    who = entry["node"] or entry["host"]
    said = (
        f"{who} (T0 {entry['t0']:.2f} s): the prober opened "
        f"{_many(entry['connections'], 'connection')} to it in the delay's last 20 % and sent "
        f"{_many(entry['requests'], 'request')} on them"
    )
    if entry["maybe_connections"]:
        said += (
            f"; {_many(entry['maybe_connections'], 'connection')} more, "
            f"{_many(entry['maybe_requests'], 'request')}, opened too near the 80 % mark or "
            "the delay's end to tell"
        )
    return said


def own_late_section(
    samples: Sequence[Sample], windows: Sequence[Window], exact_delay: float | None
) -> OwnLateSection | None:
    """None for a run with no shutdown window: no connection could be late."""
    if not windows:
        return None
    conns = connections(samples)
    entries = [window_entry(w, conns, exact_delay) for w in windows]
    return {
        "windows": entries,
        "connections": sum(e["connections"] for e in entries),
        "requests": sum(e["requests"] for e in entries),
    }


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"
