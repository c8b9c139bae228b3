"""Short labs for every platform: real HAProxy, real fake apiservers, the real daemon.

Each run takes one apiserver (master-0, the one localhost reaches) through a graceful
shutdown at 1/20 of the platform's real durations, and holds what the daemon measured against
the truth from the apiserver's own record and HAProxy's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prober.core.models import LB, Connection
from prober.lab.compare import Row, Tolerance
from prober.lab.platforms import PLATFORMS
from prober.lab.run import LabError, LabOptions, LabResult, run_lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCALE = 0.05
TOLERANCE = Tolerance(new=0.5, reused=0.5)


async def lab(tmp_path: Path, platform: str, scenario: str = "rollout") -> LabResult:
    options = LabOptions(
        platform=platform,
        scenario=scenario,
        time_scale=SCALE,
        shutdowns=1,
        tolerance=TOLERANCE,
    )
    return await run_lab(options, tmp_path / "lab", say=None)


def rows(result: LabResult) -> list[Row]:
    (shutdown,) = result.results
    assert shutdown.window is not None, "the daemon saw no shutdown window"
    return list(shutdown.rows)


def show(result: LabResult) -> None:
    for row in rows(result):
        print(
            f"{row.lb:16} {row.protocol} {row.connection:6} measured {row.measured} "
            f"truth {row.truth:.3f} late {row.late} failed {row.failures}"
        )


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
async def test_a_graceful_shutdown_is_measured_within_tolerance(
    tmp_path: Path, platform: str
) -> None:
    result = await lab(tmp_path, platform)
    show(result)
    assert result.problems == ()
    (shutdown,) = result.results
    assert shutdown.t0_error is not None
    assert abs(shutdown.t0_error) < 0.1  # T0 from the samples, against the server's record
    delay = result.platform.shutdown_delay
    by_key = {(r.lb, r.protocol, r.connection): r for r in rows(result)}
    for lb in (LB.EXTERNAL, LB.INTERNAL):
        for protocol in ("http1", "http2"):
            new = by_key[(lb, protocol, Connection.NEW)]
            # Health-checked LBs take the server out long before its delay ends.
            assert new.truth < delay / 2
            reused = by_key[(lb, protocol, Connection.REUSED)]
            if reused.measured is None:
                continue  # this stream's connection was on another server
            if result.platform.lb(lb).reset_on_down:
                assert reused.measured < delay / 2, "the LB should have reset the connection"
            else:
                assert reused.measured > 0.8 * delay, "the LB should have kept the connection"
    # Localhost reaches the server until it stops listening, whatever the LBs do.
    localhost = by_key[(LB.LOCALHOST, "http1", Connection.NEW)]
    assert localhost.measured is not None
    assert localhost.measured > 0.8 * delay


async def test_slow_lb_lets_requests_fail(tmp_path: Path) -> None:
    result = await lab(tmp_path, "gcp", "slow-lb")
    show(result)
    assert result.problems == ()
    slow = [r for r in rows(result) if r.lb is LB.EXTERNAL]
    assert sum(r.failures for r in slow) > 0
    assert all(r.failures_expected for r in slow if r.connection is Connection.NEW)
    fine = [r for r in rows(result) if r.lb is LB.INTERNAL and r.connection is Connection.NEW]
    assert sum(r.failures for r in fine) == 0


async def test_a_crash_disrupts_requests_until_the_lbs_notice(tmp_path: Path) -> None:
    result = await lab(tmp_path, "azure", "crash")
    assert result.results == ()  # no graceful shutdown, no window
    assert result.problems == ()
    lbs = {interval.lb for interval in result.analysis.replay.intervals}
    assert LB.LOCALHOST in lbs  # localhost has nowhere else to go
    assert lbs & {LB.EXTERNAL, LB.INTERNAL}


async def test_an_output_directory_is_never_reused(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "events.jsonl").write_text("")
    with pytest.raises(LabError, match="not empty"):
        await lab(tmp_path, "aws")
