"""A prober on master-0 through master-0's own apiserver's shutdown, where the internal LB
hairpins (GCP): the samples the core and report tests of same-node results share."""

from __future__ import annotations

from prober.core.models import LB, Connection, Protocol, Sample, StreamId
from prober.core.samenode import Placement
from tests.factories import fail, sample

ILB_NEW = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.NEW)
ELB_NEW = StreamId("kube-api", Protocol.HTTP2, LB.EXTERNAL, Connection.NEW)
LOCAL = StreamId("kube-api", Protocol.HTTP2, LB.LOCALHOST, Connection.NEW)
STREAMS = (ILB_NEW, ELB_NEW, LOCAL)
NODES = {"H0": "master-0", "H1": "master-1", "H2": "master-2"}
ON_MASTER = Placement("master-0", NODES, frozenset({LB.INTERNAL}))
DELAY, T0, STOPPED, BACK = 10.0, 10.0, 20.0, 22.0
ELB_SWITCH = 12.5  # the external LB drops H0 this long after the run's start


def hairpin_run(end: float = 30.0) -> list[Sample]:
    """Every 0.1 s, one request per stream, unlabelled: H0's shutdown starts at T0 = 10 s
    with a 10 s delay; it stops listening at 20 s and is back at 22 s. The internal LB
    hairpins (H0 answers it always, refuses while down); the external LB alternates H0 and
    H1 until it drops H0 at 12.5 s; localhost is H0."""
    samples = []
    for i in range(round(end * 10)):
        t = i * 0.1
        elapsed = round(max(0.0, t - T0))
        late = T0 <= t < STOPPED
        down = STOPPED <= t < BACK
        for stream in (ILB_NEW, LOCAL):
            if down:
                samples.append(fail(t, stream=stream))
            else:
                samples.append(
                    sample(t, stream=stream, host="H0", late=late, elapsed=elapsed, delay=DELAY)
                )
        host = "H1" if t >= ELB_SWITCH or i % 2 else "H0"
        samples.append(
            sample(t, stream=ELB_NEW, host=host, late=late and host == "H0", elapsed=elapsed,
                   delay=DELAY)
        )  # fmt: skip
    return samples
