"""GCP's hairpin, reproduced: a daemon on master-0, whose internal-LB requests master-0's own
apiserver answers whatever the LB's health, beside the main daemon, through master-0's
graceful shutdown (`lab.judges.onnode`, `core.samenode`).

The daemon on the master knows its node from its config (the downward API's spec.nodeName
in a cluster) and the apiservers' nodes from their identity Leases, read through the lab's
service network as a pod would. Its same-node results must be labelled as the truth says,
held to their own truth (the apiserver answers until it stops listening), and kept out of
the internal LB's verdicts; the main daemon, on no master, measures as it always did.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection
from prober.lab.infra.options import TOLERANCE
from prober.lab.judges.onnode import NodeResult
from prober.lab.run import LabOptions, LabResult, run_lab
from prober.report.verdicts.verdicts import Status
from tests.lab.test_lab import unexplained_budget_failures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def hairpin(tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    """gcp, master-0 shut down, a daemon on master-0 beside the main one."""
    options = LabOptions(
        platform="gcp", time_scale=0.05, shutdowns=1, tolerance=TOLERANCE, prober_on="master-0"
    )
    result = asyncio.run(run_lab(options, tmp_path_factory.mktemp("hairpin") / "lab", say=None))
    for problem in result.problems:
        print("CHECK", problem)
    return result


def node_of(result: LabResult) -> NodeResult:
    assert result.node is not None
    return result.node


def test_both_daemons_hold_every_path_to_the_truth(hairpin: LabResult) -> None:
    """The main one's LBs, the master's LB and same-node paths, and every sample of the
    master's labelled as the truth says."""
    assert hairpin.problems == ()


def test_the_masters_internal_lb_requests_are_same_node_and_reach_its_own_apiserver(
    hairpin: LabResult,
) -> None:
    log = node_of(hairpin).analysis.log
    master_0 = next(s for s in log.samples if s.lb is LB.LOCALHOST and s.shutdown).shutdown
    assert master_0 is not None
    hairpinned = [s for s in log.samples if s.lb is LB.INTERNAL and not s.stopped]
    assert hairpinned
    assert all(s.same_node for s in hairpinned)
    assert {s.shutdown.host for s in hairpinned if s.shutdown} == {master_0.host}
    assert any(s.failed and s.shutdown is None for s in hairpinned)  # lost while it was down


def test_localhost_is_never_same_node(hairpin: LabResult) -> None:
    log = node_of(hairpin).analysis.log
    assert not any(s.same_node for s in log.samples if s.lb is LB.LOCALHOST)


def test_the_master_knows_its_node_and_the_apiservers_from_the_identity_leases(
    hairpin: LabResult,
) -> None:
    summary = node_of(hairpin).analysis.summary
    master_0 = next(s for s in node_of(hairpin).analysis.log.samples if s.shutdown)
    assert master_0.shutdown is not None
    assert summary["apiservers"][master_0.shutdown.host] == "master-0"
    assert summary["same_node"]["node"] == "master-0"
    assert summary["same_node"]["hairpins"] == ["internal-lb"]


def test_same_node_answers_last_until_the_apiserver_stops_listening(hairpin: LabResult) -> None:
    """Held to their own truth, as localhost is."""
    same = [row for r in node_of(hairpin).same_node for row in r.rows if row.lb is LB.INTERNAL]
    assert len(same) == 4
    delay = hairpin.platform.shutdown_delay
    assert all(row.measured is not None and row.truth > delay / 2 for row in same)


def test_same_node_results_stay_out_of_the_internal_lbs_verdicts(hairpin: LabResult) -> None:
    """No reaction, no disruption, every test skipped, saying why."""
    node = node_of(hairpin)
    for worst in node.analysis.summary["worst"]:
        if worst["lb"] == "internal-lb":
            assert (worst["reaction"], worst["disruption_seconds"]) == (None, 0)
    internal = [v for v in node.analysis.verdicts if v.key and v.key[0] is LB.INTERNAL]
    assert internal
    judged = [f"{v.name}: {v.status}" for v in internal if v.status is not Status.SKIPPED]
    assert judged == []
    assert all("(a hairpin)" in v.message for v in internal)


def test_charged_to_the_lb_they_would_fail_its_budget(hairpin: LabResult) -> None:
    """As a prober that knows no node would charge them."""
    charged = {(v.key[2], "budget" in v.name): v.status for v in node_of(hairpin).charged if v.key}
    assert charged[(Connection.NEW, True)] is Status.FAILED


def test_the_main_daemon_on_no_master_measures_as_ever(hairpin: LabResult) -> None:
    """Nothing same-node, its LBs judged as ever, the apiservers named by their nodes."""
    main_run = hairpin.analysis
    assert not any(s.same_node for s in main_run.log.samples)
    assert main_run.summary["same_node"]["streams"] == []
    assert {w.node for w in main_run.replay.windows} == {"master-0"}
    assert unexplained_budget_failures(hairpin) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--platform", "aws"], "--prober-on: no LB of this platform hairpins to a master's own "
         "apiserver (core.budgets; gcp's internal LB does)"),
        (["--platform", "gcp", "--lb", "haproxy"],
         "--prober-on: a prober runs on a master only on the kernel path"),
        (["--platform", "gcp", "--scenario", "evict"],
         "--prober-on: an option of --scenario rollout or crash or slow-lb or node-loss or "
         "early-ready, not of evict"),
    ],
    ids=["no hairpin", "haproxy", "evict"],
)  # fmt: skip
def test_a_prober_on_a_master_the_lab_cannot_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    code = main(["lab", *args, "--prober-on", "master-0", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"prober lab: {message}")
    assert err.count("\n") == 1
    assert not out.exists()  # refused before anything was started


def test_a_master_the_lab_has_not_is_named(tmp_path: Path, capsys) -> None:
    code = main(["lab", "--platform", "gcp", "--prober-on", "master-3", "--out", str(tmp_path)])
    assert code == 2
    assert "--prober-on: 'master-3' is not one of master-0, master-1, master-2" in (
        capsys.readouterr().err
    )
