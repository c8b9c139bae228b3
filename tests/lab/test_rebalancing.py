"""The rebalancing play (`make test-matrix`): a rollout of one apiserver on gcp's kernel path,
then the daemon kept sampling (`--hold`), with `--goaway-chance` 0 and 0.02.

What is held, never a rate: the daemon's live counts of the kept HTTP/2 answers by apiserver
(`core.rebalancing`, written in its summary records) equal, per apiserver, the requests of
those streams each apiserver audited; the pool is every LB's kept HTTP/2 workers; and with
no GOAWAY nothing moves a kept connection back onto the restarted apiserver (kubernetes
#48610), so it answers none of their requests after its T1.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from prober.core.models import LB
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.run import LabOptions, run_lab
from prober.report.documents.rebalance_table import rebalance_lines

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(300)]

WORKERS = 4  # 3 LBs x 4: a pool of 12 over 3 apiservers
HOLD = 25.0  # seconds after the restart: past two summary periods (the lab's 10 s)


@pytest.mark.parametrize("chance", [0.0, 0.02])
async def test_kept_http2_shares_after_a_restart(tmp_path: Path, chance: float) -> None:
    options = LabOptions(
        platform="gcp", time_scale=0.05, shutdowns=1, workers=WORKERS, goaway_chance=chance,
        hold=HOLD,
    )  # fmt: skip
    result = await run_lab(options, tmp_path / "lab", say=None)
    summary = result.analysis.summary
    section = summary.get("rebalancing")
    print("\n".join(rebalance_lines(section)))
    assert section is not None
    lbs = [p.lb for p in PLATFORMS["gcp"].lbs if p.lb is not LB.LOCALHOST]
    assert section["pool"] == WORKERS * len(lbs)
    assert section["covers"]
    assert sorted(section["apiservers"]) == ["master-0", "master-1", "master-2"]
    nodes = summary.get("apiservers", {})
    assert counted(result.out / "events.jsonl", nodes) == audited(result.out / "cluster")
    [restart] = section["restarts"]
    assert restart["host"] == "master-0"
    assert restart["periods"], "no summary period after the restart"
    if chance == 0:  # nothing closes a kept connection: none comes back to master-0
        assert all(p["shares"]["master-0"] == 0 for p in restart["periods"])
        assert {h["host"]: h["seconds"] for h in restart["held"]}["master-0"] is None


def counted(events: Path, nodes: dict[str, str]) -> Counter[str]:
    """The daemon's final summary record's kept HTTP/2 answers, by node."""
    final = [r for r in map(json.loads, events.read_text().splitlines()) if r["kind"] == "summary"]
    answers = Counter[str]()
    for stream in final[-1]["streams"]:
        for host, n in stream.get("kept_answers", {}).items():
            answers[nodes.get(host, host)] += n
    return answers


def audited(cluster: Path) -> Counter[str]:
    """The requests of the kept HTTP/2 streams through an LB that each apiserver audited."""
    answers = Counter[str]()
    for log in sorted(cluster.glob("master-*/audit*.log")):
        for event in map(json.loads, log.read_text().splitlines()):
            agent = event.get("userAgent") or ""
            stream = agent.partition(" ")[2]
            if event["stage"] != "ResponseComplete" or not agent.startswith("prober/"):
                continue
            if "-http2-" in stream and stream.endswith("-reused-connections"):
                answers[log.parent.name] += "-localhost-" not in stream
    return +answers
