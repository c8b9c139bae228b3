"""The no-marker scenario: a real lab on aws's kernel path whose apiservers never send a
watch-list's `k8s.io/initial-events-end` bookmark. Every watch stream's sync stalls until its
watch ends (its timeout, or the rollout's cut); each stall the daemon measured is found in its
server's truth, whose own length lies inside the daemon's bound. A matrix run: `make
test-matrix`; the rules are held in `make test` by tests/core and tests/lab/test_watch_list.py."""

from __future__ import annotations

import asyncio

import pytest

from prober.core.truthlog import InitialEventsEnd, of_kind
from prober.lab.infra.truth import read_truth
from prober.lab.run import LabOptions, LabResult, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def no_marker(tmp_path_factory: pytest.TempPathFactory) -> LabResult:
    options = LabOptions(platform="aws", scenario="no-marker", time_scale=0.05, shutdowns=1)
    return asyncio.run(run_lab(options, tmp_path_factory.mktemp("no-marker") / "lab", say=None))


def test_every_stall_matches_its_servers_watch_within_its_bound(no_marker: LabResult) -> None:
    assert no_marker.problems == ()
    (said,) = [f for f in no_marker.findings if f.startswith("watch-list stalls:")]
    assert "each inside its bound" in said


def test_every_watch_stream_stalled_and_none_synced(no_marker: LabResult) -> None:
    streams = no_marker.analysis.summary["watches"]["streams"]
    assert streams
    for entry in streams:
        syncs = entry["syncs"]
        assert syncs["watch_list"] == 0, entry["stream"]
        assert syncs["stalled"] >= 1, entry["stream"]
        assert all(not s["synced"] for s in syncs["stalls"])


def test_the_servers_withheld_every_marker(no_marker: LabResult) -> None:
    truths = sorted((no_marker.out / "cluster").glob("master-*/truth.jsonl"))
    served = [r for path in truths for r in of_kind(read_truth(path), InitialEventsEnd)]
    assert served
    assert all(r.withheld for r in served)
