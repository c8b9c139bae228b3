"""What a lab run found (`LabResult`), and what each of its scenario's checks reads to judge
it (`Judging`): the run's parts as the measuring phase left them, and the truth."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.core.models import LB, StreamCounters
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.cpu_load import Load
from prober.lab.infra.instances import InstanceTruth
from prober.lab.infra.options import TOLERANCE, LabOptions
from prober.lab.infra.platforms import Platform
from prober.lab.infra.truth import LbTruth, ShutdownTruth
from prober.lab.judges.answered import AnsweredCheck
from prober.lab.judges.compare import ShutdownResult, wall_offset
from prober.lab.judges.informers import Side
from prober.lab.judges.nodeloss import NodeLoss
from prober.lab.judges.onnode import NodeResult
from prober.lab.judges.restartcheck import RestartCheck
from prober.lab.judges.survival import ContainerFate
from prober.lab.judges.watchcheck import WatchCheck
from prober.lab.scenarios.informers import Informer
from prober.lab.scenarios.upgrade import Pod
from prober.report.verdicts.analysis import RunAnalysis


@dataclass(frozen=True, slots=True)
class LabResult:
    platform: Platform
    scenario: str
    out: Path
    analysis: RunAnalysis
    results: tuple[ShutdownResult, ...]
    problems: tuple[str, ...]
    written: tuple[Path, ...]
    findings: tuple[str, ...] = ()
    load: Load | None = None  # how busy the daemon and the machine were
    streams: tuple[StreamCounters, ...] = ()  # per stream at the end: the gaps achieved
    tolerance: float = TOLERANCE
    answered: AnsweredCheck | None = None  # failed samples the servers had answered
    fates: tuple[ContainerFate, ...] = ()  # upgrade: what each container kept, by the gather
    losses: tuple[NodeLoss, ...] = ()  # node-loss: what each stream saw while a node was gone
    watches: WatchCheck | None = None  # the watch streams against the truth
    node: NodeResult | None = None  # --prober-on: the daemon on a master, against the truth
    instances: tuple[InstanceTruth, ...] = ()  # every apiserver process (`lab.infra.instances`)
    lb_truth: tuple[LbTruth, ...] = ()  # each LB's state changes
    restarts: RestartCheck | None = None  # T1, add-back and early against the truth
    informers: tuple[Side, ...] = ()  # upstream's: the daemon's watches beside client-go's

    @property
    def offset(self) -> float:
        """The run's wall offset: a wall time in the truth minus it is the daemon's run time."""
        return wall_offset(self.analysis.log)

    def adding(
        self,
        problems: Iterable[str] = (),
        findings: Iterable[str] = (),
        written: Iterable[Path] = (),
    ) -> LabResult:
        """This result with a check's problems, findings and files after its own."""
        return dataclasses.replace(
            self,
            problems=(*self.problems, *problems),
            findings=(*self.findings, *findings),
            written=(*self.written, *written),
        )


@dataclass(frozen=True, slots=True)
class Judging:
    """A finished run's parts, as its checks read them."""

    options: LabOptions
    platform: Platform
    cluster: LabCluster
    out: Path
    load: Load
    pods: Sequence[Pod]  # the upgrade's prober pods
    informers: Sequence[Informer]  # upstream's: client-go's informers beside the daemon
    shutdowns: Sequence[ShutdownTruth]  # every shutdown the apiservers recorded, in T0 order
    lbs: Mapping[LB, LbTruth]

    @property
    def truths(self) -> list[Path]:
        return [server.truth_path for server in self.cluster.apiservers]
