"""What a lab run is asked to do: the options of `prober lab`, read by the run and by each
part of it that a flag shapes (the daemons' configuration, `--prober-on`)."""

from __future__ import annotations

from dataclasses import dataclass

from prober.core.models import LB
from prober.lab.compare import TOLERANCE
from prober.lab.kubelet import DEFAULT_MAX_SIZE
from prober.lab.platforms import SLOW_INTERVAL


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
    evict: bool = False  # kill the daemon inside the first window and start another
    log_max_size: int = DEFAULT_MAX_SIZE  # upgrade: the kubelet's containerLogMaxSize
    control: bool = False  # a second daemon with today's sampling beside (`lab.policies`)
    lb: str | None = None  # "kernel" or "haproxy"; None: kernel where the platform's LB is L4
    watch_grace: float | None = None  # seconds before scaling; None: the platform's (0 s)
    slow_lb: LB = LB.EXTERNAL  # slow-lb: which LB is slow
    slow_interval: float = SLOW_INTERVAL  # slow-lb: its check's interval, x the delay
    prober_on: str | None = None  # a second daemon on this master (`lab.onnode`)
    early_for: float | None = None  # early-ready: seconds before scaling; None: EARLY_FOR
    early_answer: str | None = None  # early-ready: 500, 403 or hang; None: 500
    apiserver: str = "fake"  # or "upstream": upstream's own kube-apiserver (`lab.backends`)
