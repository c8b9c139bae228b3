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

from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB, Connection
from prober.lab.infra.options import TOLERANCE
from prober.lab.run import LabOptions, run_lab
from prober.report.verdicts.verdicts import Status
from tests.lab.test_lab import unexplained_budget_failures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_gcp_hairpin_results_are_same_node_and_not_the_internal_lbs(
    tmp_path: Path,
) -> None:
    options = LabOptions(
        platform="gcp", time_scale=0.05, shutdowns=1, tolerance=TOLERANCE, prober_on="master-0"
    )
    result = await run_lab(options, tmp_path / "lab", say=None)
    node = result.node
    assert node is not None
    for problem in result.problems:
        print("CHECK", problem)
    # Both daemons against the truth: the main one's LBs, the master's LB and same-node
    # paths, and every sample of the master's labelled as the truth says.
    assert result.problems == ()
    log = node.analysis.log
    master_0 = next(s for s in log.samples if s.lb is LB.LOCALHOST and s.shutdown).shutdown
    assert master_0 is not None
    hairpinned = [s for s in log.samples if s.lb is LB.INTERNAL and not s.stopped]
    assert hairpinned
    assert all(s.same_node for s in hairpinned)
    assert {s.shutdown.host for s in hairpinned if s.shutdown} == {master_0.host}
    assert any(s.failed and s.shutdown is None for s in hairpinned)  # lost while it was down
    assert not any(s.same_node for s in log.samples if s.lb is LB.LOCALHOST)
    summary = node.analysis.summary
    assert summary["apiservers"][master_0.host] == "master-0"  # from the identity Leases
    assert summary["same_node"]["node"] == "master-0"
    assert summary["same_node"]["hairpins"] == ["internal-lb"]
    # Held to their own truth, as localhost is: master-0 answered until it stopped listening.
    same = [row for r in node.same_node for row in r.rows if row.lb is LB.INTERNAL]
    assert len(same) == 4
    delay = result.platform.shutdown_delay
    assert all(row.measured is not None and row.truth > delay / 2 for row in same)
    # Out of the internal LB's verdicts: no reaction, no disruption, every test skipped.
    for worst in summary["worst"]:
        if worst["lb"] == "internal-lb":
            assert (worst["reaction"], worst["disruption_seconds"]) == (None, 0)
    internal = [v for v in node.analysis.verdicts if v.key and v.key[0] is LB.INTERNAL]
    assert internal
    assert {v.status for v in internal} == {Status.SKIPPED}
    assert all("(a hairpin)" in v.message for v in internal)
    # Charged to the LB, as a prober that knows no node would, they fail its budget.
    charged = {(v.key[2], "budget" in v.name): v.status for v in node.charged if v.key}
    assert charged[(Connection.NEW, True)] is Status.FAILED
    # The main daemon, on no master: nothing same-node, its LBs judged as ever, and the
    # apiservers named by their nodes.
    main = result.analysis
    assert not any(s.same_node for s in main.log.samples)
    assert main.summary["same_node"]["streams"] == []
    assert {w.node for w in main.replay.windows} == {"master-0"}
    assert unexplained_budget_failures(result) == []


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
