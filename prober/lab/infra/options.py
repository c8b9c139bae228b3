"""What a lab run is asked to do: the options of `prober lab`, read by the run and by each
part of it that a flag shapes (the daemons' configuration, `--prober-on`). A scenario's own
options (`lab.registry`) are None unless given; the scenario says what None stands for."""

from __future__ import annotations

from dataclasses import dataclass

from prober.common.errors import UserError
from prober.core.models import LB

TOLERANCE = 0.1
"""Seconds the truth may lie outside the daemon's bound: the three clocks (the daemon's, each
apiserver's record, HAProxy's log) and the LB's own processing, never the sampling, which the
bound already accounts for."""


class LabError(UserError, RuntimeError):
    """The lab cannot run as asked."""


@dataclass(frozen=True, slots=True)
class LabOptions:
    platform: str = "aws"
    scenario: str = "rollout"
    time_scale: float | None = None  # None: shrink the shutdown delay to about `run.TARGET_DELAY`
    servers: int = 3
    shutdowns: int | None = None  # how many of the servers the scenario takes down (all)
    interval: str = "100ms"
    quiet_interval: float | None = None  # seconds; None: the daemon's default, scaled; 0: off
    workers: int | None = None  # per stream; None: 2 (1 for each of the upgrade's daemons)
    goaway_chance: float = 0.0
    tolerance: float = TOLERANCE  # seconds the truth may lie outside the daemon's bound
    lb: str | None = None  # "kernel" or "haproxy"; None: kernel where the platform's LB is L4
    watch_grace: float | None = None  # seconds before scaling; None: the platform's (0 s)
    apiserver: str = "fake"  # or "upstream": upstream's own kube-apiserver (`lab.infra.backends`)
    # The scenarios' own (`lab.registry`):
    prober_on: str | None = None  # a second daemon on this master (`lab.judges.onnode`)
    slow_lb: LB | None = None  # slow-lb: which LB is slow (external)
    slow_interval: float | None = None  # slow-lb: its check's interval, x the delay
    delayed_lb: LB | None = None  # delayed-lb: which LB answers late (external)
    early_for: float | None = None  # early-ready: seconds before scaling; None: EARLY_FOR
    early_answer: str | None = None  # early-ready: 500, 403 or hang; None: 500
    log_max_size: int | None = None  # upgrade: the kubelet's containerLogMaxSize
    hold: float | None = None  # rollout: seconds (never scaled) sampled after it; None: 0
