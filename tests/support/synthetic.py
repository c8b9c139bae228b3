"""Synthetic probing runs with a known truth: when the host went not-ready (T0), and when
each stream's load balancer stopped sending it requests (the switch time S)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from prober.core.durations import SECOND, round_ns, seconds_to_ns
from prober.core.models import LB, Connection, Protocol, Sample, StreamId
from tests.factories import sample

HOST, OTHER_HOST = "apiserver-aaaa", "apiserver-bbbb"


@dataclass(frozen=True)
class StreamPlan:
    stream: StreamId
    gap: float  # seconds between requests of this stream
    phase: float  # first request at this offset
    switch_after: float  # S - T0: how long after T0 the LB still routes to HOST


class Run:
    """A plain class, not a dataclass, so that Hypothesis prints a failing run by its plan."""

    def __init__(
        self,
        t0: float,
        end: float,
        max_dur: float,
        plans: tuple[StreamPlan, ...],
        samples: tuple[Sample, ...],
    ) -> None:
        self.t0, self.end, self.max_dur, self.plans = t0, end, max_dur, plans
        self.samples = samples  # in completion order, as a daemon feeds them

    def __repr__(self) -> str:
        return f"Run(t0={self.t0!r}, max_dur={self.max_dur!r}, plans={self.plans!r})"


def go_rounded(seconds: float) -> float:
    return round_ns(seconds_to_ns(seconds), SECOND) / SECOND


def make_run(
    rng: random.Random, t0: float, plans: list[StreamPlan], max_dur: float, delay: float = 70.0
) -> Run:
    end = t0 + max(p.switch_after for p in plans) + 5.0
    samples: list[Sample] = []
    for plan in plans:
        t = plan.phase
        while t < end:
            dur = rng.uniform(0.0005, max_dur)
            served_at = t + rng.uniform(0.0, dur)  # when the server read its clock
            if t < t0 + plan.switch_after:
                shutting_down = served_at >= t0
                elapsed = go_rounded(served_at - t0) if shutting_down else 0.0
                samples.append(
                    sample(
                        t,
                        stream=plan.stream,
                        dur=dur,
                        host=HOST,
                        late=shutting_down,
                        elapsed=elapsed,
                        delay=delay,
                    )
                )
            else:
                samples.append(sample(t, stream=plan.stream, dur=dur, host=OTHER_HOST))
            t += plan.gap
    samples.sort(key=lambda s: s.end)
    return Run(t0, end, max_dur, tuple(plans), tuple(samples))


def stream_ids(n: int) -> list[StreamId]:
    combos = [(p, lb, c) for lb in LB for p in Protocol for c in Connection]
    return [StreamId("kube-api", p, lb, c) for p, lb, c in combos[:n]]
