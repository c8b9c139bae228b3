from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.models import Sample
from tests.report.daemonlog import LiveOutput, run_record, write_daemon_log
from tests.report.rollout import NODES, rollout, streams


@pytest.fixture(scope="session")
def rollout_samples() -> list[Sample]:
    return rollout().samples()


@pytest.fixture
def rollout_log(tmp_path: Path, rollout_samples: list[Sample]) -> tuple[Path, LiveOutput]:
    """The standard rollout as the daemon logs it, rotated into a few gzipped segments,
    with its completeness counted (`core.coverage`: every stream's gap is 0.25 s)."""
    path = tmp_path / "events.jsonl"
    live = write_daemon_log(
        path,
        run_record(streams()),
        rollout_samples,
        nodes=NODES,
        rotate_bytes=60_000,
        schedule=0.25,
    )
    return path, live
