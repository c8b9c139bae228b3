"""Watches the server counts: the real ones on connections, the synthetic informer load, and
what the truth log says of each.

A kube-apiserver in a cluster holds thousands of informers' watches; its shutdown drains them
at max(count / grace, 200) per second. A lab has a handful of real clients, and a handful of
watches drains in milliseconds whatever the grace period, so each server also holds
`--synthetic-watches` stand-ins: counted, ordered and ended like real watches, with no
connection behind them. Real watches are drained among them at random positions.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from prober.core.truthlog import SyntheticWatchesEnded, WatchEnded, WatchStarted
from prober.fakeapiserver.connection import Watch
from prober.fakeapiserver.lifecycle import Lifecycle
from prober.fakeapiserver.truth import TruthLog


class WatchOwner(Protocol):
    def watch_finished(self, watch: Watch | SyntheticWatch) -> None: ...


class SyntheticWatch:
    """An informer's watch held without a client."""

    def __init__(self, owner: WatchOwner) -> None:
        self._owner = owner
        self.how = ""

    def end(self, how: str = "drained") -> None:
        if not self.how:
            self.how = how
            self._owner.watch_finished(self)


class WatchTruth:
    """Each real watch's start and end in the truth log; the synthetic ones summed up."""

    def __init__(self, truth: TruthLog, lifecycle: Lifecycle) -> None:
        self.truth, self.lifecycle = truth, lifecycle
        self.drained = 0  # watches the drain has ended so far, real and synthetic
        self._synthetic: Counter[str] = Counter()
        self._synthetic_span: list[float] = []

    def started(self, watch: Watch) -> None:
        exchange = watch.exchange
        started = WatchStarted(
            conn=exchange.conn.id,
            stream=exchange.stream_id,
            peer=f"{exchange.conn.peer_ip}:{exchange.conn.peer_port}",
            protocol=exchange.conn.protocol,
            path=exchange.target,
            phase=self.lifecycle.phase(watch.started_mono),
        )
        self.truth.write(started, mono=watch.started_mono)

    def ended(self, watch: Watch | SyntheticWatch) -> None:
        mono = self.lifecycle.clock.monotonic()
        rank = None
        if watch.how == "drained":
            self.drained += 1
            rank = self.drained
        if isinstance(watch, SyntheticWatch):
            self._synthetic[watch.how] += 1
            self._synthetic_span = [self._synthetic_span[0] if self._synthetic_span else mono, mono]
            return
        exchange = watch.exchange
        ended = WatchEnded(
            conn=exchange.conn.id,
            stream=exchange.stream_id,
            how=watch.how,
            phase=self.lifecycle.phase(mono),
            events=watch.events,
            seconds=round(mono - watch.started_mono, 6),
            drain_rank=rank,
        )
        self.truth.write(ended, mono=mono)

    def close(self) -> None:
        if self._synthetic:
            first, last = self._synthetic_span
            self.truth.write(
                SyntheticWatchesEnded(ended=dict(self._synthetic), first=first, last=last)
            )
