"""`--prober-on`: a daemon on a master beside the main one, judged apart (`lab.judges.onnode`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from prober.lab.infra.processes import ManagedProcess
from prober.lab.judges.onnode import judge_node
from prober.lab.measure import Stage
from prober.lab.result import Judging, LabResult
from prober.lab.scenarios.onnode import NodeRun, start_node_prober


@dataclass(slots=True)
class NodeProber:
    """The daemon on `hostname`: what it measured, path by path, against the truth."""

    hostname: str
    run: NodeRun | None = None

    async def start(self, stage: Stage) -> ManagedProcess:
        self.run = await start_node_prober(
            stage.cluster, stage.options, stage.group, stage.out, self.hostname
        )
        return self.run.process

    def check(self, judging: Judging, result: LabResult) -> LabResult:
        if self.run is None:  # the run ended before the main daemon sampled
            return result
        node = judge_node(self.run, judging.cluster, tolerance=judging.options.tolerance)
        more = result.adding(node.problems, node.findings, node.written)
        return dataclasses.replace(more, node=node)
