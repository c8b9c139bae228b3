"""The delayed-lb scenario (`lab.scenarios.delayed`): a rollout of one apiserver behind an
LB whose data path a relay slows while the server drains. The LB's streams, on kept and new
connections, are slow but up; no other stream is. A lab run of about two minutes at the
default time scale (the delay is an answer time, not scaled): `make test-matrix`."""

from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.models import LB, StreamId
from prober.lab.run import LabOptions, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(600)]


async def test_the_delayed_lb_alone_is_slow_but_up(tmp_path: Path) -> None:
    options = LabOptions(platform="gcp", scenario="delayed-lb", shutdowns=1)
    result = await run_lab(options, tmp_path / "lab", say=None)
    assert result.problems == ()
    section = result.analysis.summary["latency"]
    slow = {e["stream"] for e in section["streams"] if e["slow_but_up"]}
    external = {
        e["stream"] for e in section["streams"] if StreamId.parse(e["stream"]).lb is LB.EXTERNAL
    }
    assert slow == external
    assert len(external) == 4  # http1 and http2, new and reused connections
    assert sum(f.startswith("slow but up: ") for f in result.findings) == 4
