"""`prober lab --apiserver upstream`: upstream's kube-apiserver v1.37.2 rolled behind each kind of
LB, the daemon held against upstream's own signals, client-go's informers beside it, and
`prober audit` reading upstream's real audit logs. Three lab runs of about two minutes each:
`make test-matrix` runs them (`make test` holds the smoke test, `test_kube_apiserver.py`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB
from prober.lab.infra.sessions import ADDRESS, LOG, NAT
from prober.lab.run import LabOptions, LabResult, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(600)]

SCALE = 0.2  # the shutdown delay stays well above upstream's fixed timers (docs/usage.md)


@pytest.fixture(scope="module", params=["aws", "gcp", "metal"])
def upstream(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    options = LabOptions(platform=request.param, time_scale=SCALE, apiserver="upstream")
    folder = tmp_path_factory.mktemp(request.param)
    return asyncio.run(run_lab(options, folder / "lab", say=None))


def test_every_truth_lies_inside_its_bound(upstream: LabResult) -> None:
    assert upstream.problems == ()


def test_every_t0_is_estimated_against_upstreams_shutdown_initiated(upstream: LabResult) -> None:
    assert len(upstream.results) == 3
    for shutdown in upstream.results:
        assert shutdown.window is not None
        assert shutdown.t0_error is not None


def test_every_watch_is_paired_by_its_connection(upstream: LabResult) -> None:
    assert upstream.watches is not None
    assert {r.paired_by for r in upstream.watches.rows} <= {ADDRESS, LOG, NAT}


def test_the_daemon_syncs_by_watch_list_against_upstream(upstream: LabResult) -> None:
    """Upstream serves watch-list for real: every watch stream of the daemon synced by it,
    each sync timed, never by a LIST."""
    streams = upstream.analysis.summary["watches"]["streams"]
    assert streams
    for entry in streams:
        syncs = entry["syncs"]
        assert syncs["watch_list"] >= 1, entry["stream"]
        assert syncs["max"] is not None
        assert syncs["listed"] == 0, entry["stream"]


def test_client_gos_informers_watch_beside_the_daemon(upstream: LabResult) -> None:
    """Each LB and protocol has the daemon's stream and both of client-go's informers, and
    every informer established its watches and saw the heartbeat."""
    by = {(s.lb, str(s.protocol), s.who): s.result for s in upstream.informers}
    for lb in {*(p.lb for p in upstream.platform.lbs), LB.LOCALHOST}:
        for protocol in ("http1", "http2"):
            for who in ("informer watch-list", "informer list"):
                found = by[(lb, protocol, who)]
                assert found.established >= 1
                assert found.lags, (lb, protocol, who)


def test_prober_audit_finds_the_probers_late_requests_in_upstreams_audit_logs(
    upstream: LabResult, tmp_path: Path
) -> None:
    """Per LB, by user agent."""
    out = tmp_path / "audit"
    code = main(["audit", "summarize", str(upstream.out / "cluster"), "--events",
                 str(upstream.out / "events.jsonl"), "--out", str(out)])  # fmt: skip
    assert code == 0
    summary = json.loads((out / "audit-summary.json").read_text())
    assert summary["bad_lines"] == 0
    assert summary["late"], "no late request in upstream's audit logs"
    assert {e["lb"] for e in summary["prober"]["late"]} >= {"localhost"}
