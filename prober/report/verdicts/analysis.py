"""What `prober analyze` makes of one run, each stage's part kept for the documents: the log
(replay), the replay, the summary and the watch streams (results), the verdicts, the line on
a restart's edges and the warnings (verdicts). Data only: read by every stage after it."""

from __future__ import annotations

from dataclasses import dataclass

from prober.report.replay.replay import Replay
from prober.report.replay.runs import RunLog
from prober.report.results.watches import WatchStreams
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.verdicts import Status, Verdict


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    log: RunLog
    replay: Replay
    summary: SummaryDocument
    verdicts: list[Verdict]
    warnings: list[str]
    watches: WatchStreams  # each LB's watch streams' results, for report.html's lanes
    edges: str  # which edge of a restart broke, in one line (`early_verdicts.edges_line`)

    @property
    def failed(self) -> bool:
        return any(v.status is Status.FAILED for v in self.verdicts)
