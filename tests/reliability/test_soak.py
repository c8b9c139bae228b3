"""The soak benchmark's 60-second version: `bench/soak.py` against the lab at 4x the default
sampling rate through rolling restarts. A minute is too short to judge flatness (it is
mostly warm-up; the 30-minute run judges it), so this holds the account (nothing lost) and
the bounds: memory, file descriptors, threads and tasks. (Half a minute was tried: beside two
CPU burners no rollout finished in it.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


# `make test` soaks 24 s (a rollout from 3 s on); the full minute is a matrix run.
@pytest.mark.parametrize(
    "minutes", [pytest.param(0.4, id="24s"), pytest.param(1.0, id="60s", marks=pytest.mark.matrix)]
)
def test_a_soak_loses_nothing_and_stays_bounded(tmp_path: Path, notes, minutes: float) -> None:
    run = subprocess.run(
        [sys.executable, str(SOAK), f"--minutes={minutes}", "--every=5", "--rollout-every=0.05",
         "--time-scale=0.02", f"--out={tmp_path}"],
        capture_output=True, text=True, timeout=140, check=False,
    )  # fmt: skip
    print(run.stdout, run.stderr)
    result = json.loads((tmp_path / "soak.json").read_text())
    account = result["account"]
    notes(
        f"soak_{minutes * 60:.0f}s: started={account['started']} recorded={account['recorded']} "
        f"lost={account['lost']} rollouts={result['rollouts']} "
        f"rate={result['rate']:.0f}/{result['nominal_rate']:.0f} per s "
        f"peak_rss={result['peak_rss_mb']:.1f}MB | {account['results']}"
    )
    assert account["problems"] == []
    assert account["lost"] == 0
    assert result["rollouts"] >= 1
    # The rate reached is a speed figure: the 30-minute benchmark holds it to 90 % of nominal;
    # here, on a CI machine shared with the lab it probes, it is only printed.
    assert account["results"].get("success", 0) > 0
    assert result["peak_rss_mb"] < 150
    for row in result["readings"]:
        assert row["fds"] < 300
        assert row["threads"] <= 4
        assert row["tasks"] < 500
