"""A rolling restart of kube-apiservers behind load balancers, with every answer known.

Deterministic: each stream sends a request every `gap` seconds. While an apiserver is shutting
down, its LB keeps routing that stream to it for `switch_after` seconds after T0 (the instant
its /readyz went false), then routes elsewhere; past `delay` the server has stopped, so requests
the LB still sends it fail with `connect_refused`. The server reads its clock half-way through
each request, and rounds `elapsed` the way Go does. So for every stream and shutdown we know the
true reaction (last request routed to the host, minus T0), the failed requests and the
disruption interval they make.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from prober.core.models import Connection, ErrorClass, Replacement, Sample, StreamId
from tests.factories import sample
from tests.support.synthetic import go_rounded

DUR = 0.02  # every request takes 20 ms


@dataclass(frozen=True)
class Shutdown:
    host: str
    t0: float
    delay: float = 20.0
    restart_after: float = 5.0  # after delay: the new instance starts answering

    @property
    def stopped(self) -> float:
        return self.t0 + self.delay

    @property
    def back(self) -> float:
        return self.stopped + self.restart_after


@dataclass(frozen=True)
class StreamPlan:
    stream: StreamId
    switch_after: float  # seconds after T0 its LB still routes to the shutting-down host
    gap: float = 0.25
    phase: float = 0.0


@dataclass(frozen=True)
class Scenario:
    hosts: tuple[str, ...]
    shutdowns: tuple[Shutdown, ...]
    plans: tuple[StreamPlan, ...]
    end: float

    def samples(self) -> list[Sample]:
        """Every request's sample, in completion order as a daemon feeds them."""
        return list(self._samples)

    @cached_property
    def _samples(self) -> tuple[Sample, ...]:
        out: list[Sample] = []
        for index, plan in enumerate(self.plans):
            n = 0
            t = plan.phase
            kept: tuple[str, int] | None = None  # a reused stream's connection: host, port
            opened = 0.0  # when the kept connection was opened
            while t < self.end:
                request = self._request(plan, t, n)
                if plan.stream.connection is Connection.REUSED:
                    request, kept = _over_kept(request, self._route(plan, t, n), kept, index)
                    opened = t if request.reused is False else opened
                    request = replace(request, connection_age=round(t - opened, 6))
                elif request.error is not ErrorClass.CONNECT_REFUSED:
                    request = replace(request, connection_age=0.0)  # a connection per request
                out.append(request)
                n += 1
                t = plan.phase + n * plan.gap
        out.sort(key=lambda s: (s.end, s.stream))
        return tuple(out)

    def true_reaction(self, plan: StreamPlan, shutdown: Shutdown) -> float | None:
        """Last request the LB sent to the host while it was serving, minus T0: over the
        stream's kept connections, or over any fresh connection through the LB (one rotation
        serves them all, `core.reaction`)."""
        mine = plan.stream

        def same(s: Sample) -> bool:
            if mine.connection is Connection.REUSED:
                return s.stream == mine.name
            return s.stream_id.connection is mine.connection and (s.target, s.lb) == (
                mine.target, mine.lb,
            )  # fmt: skip

        late = [
            s.t
            for s in self._samples
            if same(s) and s.late and s.shutdown is not None and s.shutdown.host == shutdown.host
        ]
        return max(late) - shutdown.t0 if late else None

    def failures(self, plan: StreamPlan, shutdown: Shutdown) -> list[float]:
        start, end = shutdown.stopped, shutdown.t0 + plan.switch_after
        return [
            s.t
            for s in self._samples
            if s.stream == plan.stream.name and s.failed and start <= s.t < end
        ]

    def _request(self, plan: StreamPlan, t: float, n: int) -> Sample:
        host = self._route(plan, t, n)
        served = t + DUR / 2
        for sd in self.shutdowns:
            if sd.host != host or not sd.t0 <= served < sd.back:
                continue
            if served >= sd.stopped:
                return sample(t, stream=plan.stream, dur=DUR, error=ErrorClass.CONNECT_REFUSED)
            elapsed = go_rounded(served - sd.t0)
            return sample(
                t,
                stream=plan.stream,
                dur=DUR,
                host=host,
                late=True,
                elapsed=elapsed,
                delay=sd.delay,
            )
        return sample(t, stream=plan.stream, dur=DUR, host=host, delay=self.shutdowns[0].delay)

    def _route(self, plan: StreamPlan, t: float, n: int) -> str:
        for sd in self.shutdowns:
            if sd.t0 <= t < sd.t0 + plan.switch_after:
                return sd.host  # the LB has not noticed yet
        away = {sd.host for sd in self.shutdowns if sd.t0 <= t < sd.back}
        up = [h for h in self.hosts if h not in away]
        return up[n % len(up)]


def _over_kept(
    request: Sample, host: str, kept: tuple[str, int] | None, index: int
) -> tuple[Sample, tuple[str, int] | None]:
    """A reused stream's request over its kept connection to `host`; a new connection, which
    names the one it replaced, when the LB's route for it changed."""
    if kept is not None and kept[0] == host:
        return replace(request, reused=True, local_port=kept[1]), kept
    port = 40000 + 1000 * index + (0 if kept is None else kept[1] % 1000 + 1)
    why = Replacement.FIRST if kept is None else Replacement.CLOSED
    fresh = replace(
        request, reused=False, local_port=port, replaced=why,
        replaced_port=None if kept is None else kept[1],
    )  # fmt: skip
    return fresh, (host, port)
