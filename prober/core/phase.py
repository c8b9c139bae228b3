"""Where a server is in its graceful shutdown at a moment: one type for every use.

kube-apiserver's graceful shutdown, as the shutdown header and its audit annotations tell it:
`/readyz` goes false at T0, the server keeps serving for `shutdown-delay-duration` so that the
LBs notice, and it calls a connection accepted after LATE_FRACTION of the delay late (its
`openshift.io/during-graceful` audit annotation; cluster-kube-apiserver-operator sizes the
delay from such arrivals). Past the delay it stops serving.

    BEFORE       t < T0                      ready: serving as usual
    DELAY_EARLY  T0 <= t <= T0 + 0.8 delay   not ready, serving; LBs are expected to switch
    DELAY_LATE   T0 + 0.8 delay < t < T0 + delay   serving, and a new arrival is late
    AFTER        t >= T0 + delay             the delay is over: the server stops serving

`phase_at` is the one place the 80 % rule and the edges are written; the edges are those of
the fake apiserver (`fakeapiserver/lifecycle.py`: late is strictly past 80 %).
"""

from __future__ import annotations

from enum import StrEnum

# OpenShift: connections accepted after this fraction of the shutdown delay are "late".
LATE_FRACTION = 0.8


class ShutdownPhase(StrEnum):
    BEFORE = "before"  # before T0
    DELAY_EARLY = "delay_early"  # the delay's first 80 %
    DELAY_LATE = "delay_late"  # its last 20 %
    AFTER = "after"  # past the delay


def phase_at(t: float, t0: float, delay: float) -> ShutdownPhase:
    """The phase at `t` of a shutdown that began at `t0` with `delay` seconds of delay (all on
    one clock). A zero delay has no serving phase: from T0 on it is AFTER."""
    if delay < 0:
        raise ValueError(f"a shutdown delay cannot be negative: {delay!r}")
    elapsed = t - t0
    if elapsed < 0:
        return ShutdownPhase.BEFORE
    if elapsed >= delay:
        return ShutdownPhase.AFTER
    if elapsed > LATE_FRACTION * delay:
        return ShutdownPhase.DELAY_LATE
    return ShutdownPhase.DELAY_EARLY
