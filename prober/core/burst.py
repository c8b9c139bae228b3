"""Witness bursts: ask an LB at once for the fresh connections that bound its reaction.

Through an LB that balances each new connection over k servers, a reaction is bounded above
only by m fresh connections answered elsewhere after the last late one (`core.reaction`:
m = 23 for k = 3). At the window rate they come one sampling gap apart, so the bound's upper
side lands m gaps after the LB stopped: half a second and more. The prober knows more than
the sampling does: once a window is open it knows which server is going away, and when the
LB's fresh connections begin to miss it. Then it asks: a burst of the missing fresh
connections, sent at once, `parallel` at a time, brings the witnesses in a few round trips.

When to ask (fed sample by sample, pure: the daemon sends what it is told, and the benchmark
simulates the same planner):

* an LB is asked once `trigger` fresh connections through it were answered elsewhere after
  the last late one of a stream whose reaction is still unbounded (`ShutdownTracker.wanted`):
  with k = 3 a run of 3 misses happens by chance 8 times in 27 while the LB still routes
  there;
* one burst per LB at a time, of the misses that would bound the reaction and confirm the
  bound (`ShutdownTracker.wanted`), stopped as soon as one of its requests meets the server
  (the LB still routes there: the rest would only be misses to throw away);
* a burst that met the server spaces the LB's next one out: `spacing` doubled for each
  such burst in this window, up to `max_spacing`;
* an LB that only ever showed one server (localhost) is never asked: its reaction ends with
  the server's delay, not with a choice of the LB.

The sender hands out its `parallel` slots to the bounding requests of every burst before the
confirming ones (then the oldest burst first): when the LBs switch together, each gets its
bound as soon as the slots allow, and confirmation waits.

Every request of a burst is a sample of one of the LB's new-connection streams, marked with
the burst's number (`Sample.burst`); the trackers count it like any other, so the bound's
rules, and the chance `MISS_CHANCE` of a reaction past it, stay as they are.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from prober.core.models import LB, Sample
from prober.core.shutdown import ShutdownTracker

# Chosen with bench/core_precision.py's simulated CI run, the prober's CPU per handshake
# modelled (the closing note of issue 24 has the table).
TRIGGER = 3  # fresh connections answered elsewhere after the last late one
SPACING = 0.03  # seconds after a burst that met the server, doubled each time
MAX_SPACING = 0.06
MOST = 64  # requests in one burst, whatever the servers seen call for
PARALLEL = 8  # burst requests in flight at once, over every LB (`burst_parallel`)


@dataclass(frozen=True, slots=True)
class Burst:
    """`count` fresh connections through one LB, to learn whether it still routes to `host`."""

    number: int
    target: str
    lb: LB
    host: str
    count: int
    bounding: int = 0  # the first of them bound the reaction, the rest confirm the bound


@dataclass(slots=True)
class _Flight:
    burst: Burst
    sent: int | None = None  # known once the sender stopped
    fed: int = 0
    met: bool = False  # one of its requests reached the host


class BurstPlanner:
    def __init__(
        self,
        *,
        trigger: int = TRIGGER,
        spacing: float = SPACING,
        max_spacing: float = MAX_SPACING,
        most: int = MOST,
    ) -> None:
        self._trigger = trigger
        self._spacing = spacing
        self._max_spacing = max_spacing
        self._most = most
        self._numbers = itertools.count(1)
        self._flights: dict[int, _Flight] = {}
        self._flying: dict[tuple[str, LB], int] = {}  # LB -> its burst in flight
        self._not_before: dict[tuple[str, LB], float] = {}
        self._met: dict[tuple[str, LB, str], int] = {}  # bursts that met the host, per LB

    def feed(self, sample: Sample, shutdown: ShutdownTracker) -> Burst | None:
        """A burst to send now, after this sample was fed to `shutdown`; or None."""
        if sample.burst is not None:
            self._fed(sample)  # a burst is done once each of its requests is in, cut or not
        if sample.stopped:
            return None  # the daemon stops: it showed nothing of the LB to burst for
        key = (sample.target, sample.lb)
        if key in self._flying or sample.end < self._not_before.get(key, -math.inf):
            return None
        wanted = shutdown.wanted(*key)
        if wanted is None or wanted.have < self._trigger:
            return None
        count = min(wanted.missing, self._most)
        burst = Burst(next(self._numbers), *key, wanted.host, count, min(wanted.bounding, count))
        self._flights[burst.number] = _Flight(burst)
        self._flying[key] = burst.number
        return burst

    def going(self, number: int) -> bool:
        """Whether the sender should send another request of this burst."""
        flight = self._flights.get(number)
        return flight is not None and not flight.met

    def stopped(self, number: int, sent: int, now: float) -> None:
        """The sender sent `sent` requests of this burst and will send no more."""
        flight = self._flights.get(number)
        if flight is None:
            return
        flight.sent = sent
        self._finish_if_done(flight, now)

    def _fed(self, sample: Sample) -> None:
        assert sample.burst is not None
        flight = self._flights.get(sample.burst)
        if flight is None:
            return
        flight.fed += 1
        if sample.late and sample.shutdown is not None:
            flight.met = flight.met or sample.shutdown.host == flight.burst.host
        self._finish_if_done(flight, sample.end)

    def _finish_if_done(self, flight: _Flight, now: float) -> None:
        if flight.sent is None or flight.fed < flight.sent:
            return
        burst = flight.burst
        key = (burst.target, burst.lb)
        del self._flights[burst.number]
        self._flying.pop(key, None)
        spacing = 0.0
        if flight.met:
            met = self._met.get((*key, burst.host), 0) + 1
            self._met[(*key, burst.host)] = met
            spacing = min(self._spacing * 2 ** (met - 1), self._max_spacing)
            if len(self._met) > 64:  # hosts are the servers' to name: keep the newest
                del self._met[next(iter(self._met))]
        self._not_before[key] = now + spacing
