"""`prober lab --apiserver upstream`: upstream's kube-apiserver v1.37.2 rolled behind each kind of
LB, the daemon held against upstream's own signals, client-go's informers beside it, and
`prober audit` reading upstream's real audit logs. Three lab runs of about two minutes each:
`make test-matrix` runs them (`make test` holds the smoke test, `test_kube_apiserver.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB
from prober.lab.infra.sessions import ADDRESS, LOG, NAT
from prober.lab.run import LabOptions, LabResult, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(600)]

SCALE = 0.2  # the shutdown delay stays well above upstream's fixed timers (docs/usage.md)


@pytest.mark.parametrize("platform", ["aws", "gcp", "metal"])
async def test_upstream_is_measured_within_its_bounds(tmp_path: Path, platform: str) -> None:
    options = LabOptions(platform=platform, time_scale=SCALE, apiserver="upstream")
    result = await run_lab(options, tmp_path / "lab", say=None)
    assert result.problems == ()
    # Every T0 the daemon estimated lies within its bound of upstream's own ShutdownInitiated.
    assert len(result.results) == 3
    for shutdown in result.results:
        assert shutdown.window is not None
        assert shutdown.t0_error is not None
    assert result.watches is not None
    assert {r.paired_by for r in result.watches.rows} <= {ADDRESS, LOG, NAT}
    informers_beside(result)
    audited(result, tmp_path / "audit")


def informers_beside(result: LabResult) -> None:
    """Each LB and protocol has the daemon's stream and both of client-go's informers, and
    every informer established its watches and saw the heartbeat."""
    by = {(s.lb, str(s.protocol), s.who): s.result for s in result.informers}
    for lb in {*(p.lb for p in result.platform.lbs), LB.LOCALHOST}:
        for protocol in ("http1", "http2"):
            for who in ("informer watch-list", "informer list"):
                found = by[(lb, protocol, who)]
                assert found.established >= 1
                assert found.lags, (lb, protocol, who)


def audited(result: LabResult, out: Path) -> None:
    """upstream's audit logs, summarised by `prober audit`: the prober's late requests per
    LB, by user agent."""
    code = main(["audit", "summarize", str(result.out / "cluster"), "--events",
                 str(result.out / "events.jsonl"), "--out", str(out)])  # fmt: skip
    assert code == 0
    summary = json.loads((out / "audit-summary.json").read_text())
    assert summary["bad_lines"] == 0
    assert summary["late"], "no late request in upstream's audit logs"
    assert {e["lb"] for e in summary["prober"]["late"]} >= {"localhost"}
