"""A prober on a master (`prober lab --prober-on master-0`): GCP's hairpin, reproduced and
judged.

A second daemon runs in the master's own network namespace, as a DaemonSet pod on the
control plane would, knowing its node (`node`, the downward API's spec.nodeName in a cluster)
and learning the apiservers' nodes from their identity Leases. The master takes each hairpin
LB's VIP as its own (`core.budgets`: GCP's internal LB, whose VIP the guest agent and
OpenShift's gcp-routes make local on every master): its requests to it reach its own
apiserver whatever the LB's health, refused while that apiserver is down. It probes that LB,
the service network (programmed on the master too, as kube-proxy is on every node) and
localhost; not the external LB, which on the lab's kernel path cannot send a master's flow
back to the master itself (the kernel drops a packet with its own source address, as a
pass-through LB without hairpin support does), and whose losses that would be are no part of
this.

The judge holds the daemon to the same truth as the main one, path by path:

- its LB path, per LB as seen from the node: a hairpin LB was never reached (no row of it);
  the other LBs never showed it their routing to its own apiserver (no row of that host);
- its same-node path (`same_node` windows): through a hairpin LB the apiserver answers until
  it stops listening, as localhost's does; through another LB, as that LB routes;
- every sample labelled as the truth says: answered by the node's own apiserver through an
  LB, or lost through a hairpin LB, is same-node; nothing else is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.core.budgets import PLATFORMS, with_settings
from prober.core.models import LB, LBSettings, Sample
from prober.lab.infra.cluster import LabCluster
from prober.lab.infra.truth import LbTruth, lab_truth
from prober.lab.judges.compare import ShutdownResult, compare, problems, wall_offset
from prober.lab.judges.podlogs import write_reports
from prober.lab.scenarios.onnode import NodeRun, hairpins
from prober.report.analyze import analyze_runs
from prober.report.schema.types import SummaryDocument
from prober.report.verdicts.analysis import RunAnalysis
from prober.report.verdicts.budget_verdicts import judge_budgets
from prober.report.verdicts.verdicts import Verdict


@dataclass(frozen=True, slots=True)
class NodeResult:
    """What the daemon on a master measured, held against the truth."""

    hostname: str
    hairpins: tuple[LB, ...]
    analysis: RunAnalysis
    results: tuple[ShutdownResult, ...]  # its LB path
    same_node: tuple[ShutdownResult, ...]  # its same-node path: its own apiserver
    problems: tuple[str, ...]
    written: tuple[Path, ...]
    labelled: int  # same-node samples in its log
    findings: tuple[str, ...]  # what a reader must know though nothing failed
    # The hairpin LBs' budget tests as they would have gone had the same-node windows been
    # the LB's: what charging them to the LB would have said.
    charged: tuple[Verdict, ...]


def judge_node(run: NodeRun, cluster: LabCluster, *, tolerance: float) -> NodeResult:
    platform = cluster.platform
    lb_hairpins = hairpins(platform)
    (analysis, *_), stats = analyze_runs([run.event_log], platform=platform.name)
    written = write_reports(analysis, stats, run.out)
    log = analysis.log
    offset = wall_offset(log)
    shutdowns, lbs = lab_truth(cluster.apiservers, cluster.lbs)
    during = [s for s in shutdowns if offset <= s.t0 < offset + analysis.replay.end_t]
    hostname, host = run.server.hostname, run.server.ident
    seen, same = truths_from(hostname, lbs, lb_hairpins, [s.hostname for s in during])
    lb_windows = [w for w in log.windows if not w.same_node]
    own_windows = [w for w in log.windows if w.same_node]
    # Another master's shutdown is seen from here through the service network alone, which
    # takes it out after the proxies' sync delay: a window only if a request met it late.
    shown = {w.host for w in lb_windows}
    unseen = [s for s in during if s.hostname != hostname and s.apiserver not in shown]
    results = compare([s for s in during if s not in unseen], lb_windows, seen, offset)
    mine = compare([s for s in during if s.hostname == hostname], own_windows, same, offset)
    found = problems(results, tolerance, expect_failures=False)
    found += problems(mine, tolerance, expect_failures=False)
    found += label_problems(log.samples, host, lb_hairpins)
    return NodeResult(
        hostname=hostname,
        hairpins=lb_hairpins,
        analysis=analysis,
        results=tuple(results),
        same_node=tuple(mine),
        problems=tuple(f"prober on {hostname}: {p}" for p in found),
        written=tuple(written),
        labelled=sum(s.same_node for s in log.samples),
        findings=tuple(
            f"prober on {hostname}: {s.hostname}'s shutdown: no request met it late (from "
            "here only the service network reaches it, which takes it out after its sync delay)"
            for s in unseen
        ),
        charged=tuple(charged(analysis.summary, lb_hairpins, log.run.lb_settings)),
    )


def truths_from(
    hostname: str, lbs: Mapping[LB, LbTruth], lb_hairpins: Sequence[LB], masters: Sequence[str]
) -> tuple[dict[LB, LbTruth], dict[LB, LbTruth]]:
    """The LBs' truths as a prober on `hostname` meets them: on its LB path (no hairpin LB;
    no other LB's routing to its own apiserver, which is all same-node), and on its
    same-node path (a hairpin LB is the node itself: it reaches its apiserver alone, until
    that stops listening; another LB routes as it does for everyone)."""
    itself = frozenset({hostname})
    others = frozenset(m for m in masters if m != hostname)
    seen: dict[LB, LbTruth] = {LB.LOCALHOST: LbTruth(LB.LOCALHOST, (), False, reaches=itself)}
    same: dict[LB, LbTruth] = {}
    for lb, truth in lbs.items():
        if lb is LB.LOCALHOST:
            continue
        if lb in lb_hairpins:
            same[lb] = LbTruth(lb, (), reset_on_down=False, reaches=itself)
            continue
        seen[lb] = dataclasses.replace(truth, reaches=others)
        same[lb] = truth
    return seen, same


def label_problems(samples: Sequence[Sample], host: str, lb_hairpins: Sequence[LB]) -> list[str]:
    """Samples the daemon labelled otherwise than the truth: same-node is exactly an answer
    of the node's own apiserver (`host`) through an LB, or a loss through a hairpin LB."""
    wrong: dict[str, int] = {}
    for s in samples:
        if s.stopped:
            continue
        answered_here = s.shutdown is not None and s.shutdown.host == host
        lost_here = s.shutdown is None and s.failed and s.lb in lb_hairpins
        truth = s.lb is not LB.LOCALHOST and (answered_here or lost_here)
        if s.same_node != truth:
            what = f"{s.stream} labelled same-node={s.same_node}"
            wrong[what] = wrong.get(what, 0) + 1
    return [f"{what} against the truth: {n} samples" for what, n in sorted(wrong.items())]


def charged(
    summary: SummaryDocument, lb_hairpins: Sequence[LB], settings: LBSettings | None
) -> list[Verdict]:
    """The hairpin LBs' budget tests had the same-node windows been theirs, as a prober that
    knows no node would judge them."""
    section = summary.get("same_node")
    profile = PLATFORMS.get(summary["platform"])
    if section is None or profile is None or not section["windows"]:
        return []
    as_lb: SummaryDocument = {
        **summary,
        "windows": section["windows"],
        "streams": [{**s, "same_node": 0} for s in summary["streams"]],
    }
    verdicts = judge_budgets(as_lb, with_settings(profile, settings))
    return [v for v in verdicts if v.key is not None and v.key[0] in lb_hairpins]
