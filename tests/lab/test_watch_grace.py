"""`prober lab --compare-watch-grace`: the same rollout once per watch grace, through the CLI.

One shutdown on one platform at a fast time scale, twice. Nothing here asserts a figure the
machine's speed moves (how long a re-watch took, how many requests met the 429 phase): only
the table's shape, and what the apiservers' shutdown sequence makes true whatever the speed.
Without a grace no watch is ended cleanly: all are cut when the process exits, after its
listener closed. With one the drain ends them from NotAcceptingNewRequest on, while the
listener stays open (upstream's InFlightRequestsDrained waits for it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import LB
from prober.lab.infra.platforms import PLATFORMS

pytestmark = [pytest.mark.slow, pytest.mark.matrix, pytest.mark.timeout(240)]

PLATFORM, SCALE = "gcp", 0.05


def test_two_watch_graces_give_one_table_of_every_lb_and_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare"
    code = main(
        ["lab", "--platform", PLATFORM, "--compare-watch-grace", "0s,25s", "--time-scale",
         str(SCALE), "--shutdowns", "1", "--out", str(out)]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"time scale {SCALE:g}" in printed
    assert "watches per LB x protocol" in printed
    document = json.loads((out / "watch-grace.json").read_text())
    assert (document["platform"], document["time_scale"]) == (PLATFORM, SCALE)
    without, with_grace = document["runs"]
    assert [without["grace"], with_grace["grace"]] == [0.0, 25.0]
    assert with_grace["scaled"] == pytest.approx(25.0 * SCALE)

    lbs = {str(p.lb) for p in PLATFORMS[PLATFORM].lbs} | {str(LB.LOCALHOST)}
    for run in (without, with_grace):
        assert Path(run["out"]).is_dir()
        assert (Path(run["out"]) / "report.txt").is_file()
        keys = [(row["lb"], row["protocol"]) for row in run["rows"]]
        assert sorted(keys) == sorted((lb, p) for lb in lbs for p in ("http1", "http2"))
        for row in run["rows"]:
            counts = [row[k] for k in ("ends", "doomed", "reestablished")]
            counts += [row["refused_requests"], row["refused_watches"], *row["hows"].values()]
            assert all(isinstance(n, int) and n >= 0 for n in counts), row
            assert row["ends"] == sum(row["hows"].values())
            assert "stopped" not in row["hows"]
            assert row["blind"] >= 0
            p50, p99 = row["reestablish_p50"], row["reestablish_p99"]
            assert (p50 is None) == (p99 is None) == (row["reestablished"] == 0)
            assert p50 is None or 0 <= p50 <= p99
            assert row["lb"] in printed
        (shutdown,) = run["shutdowns"]  # master-0, the one localhost reaches
        assert shutdown["apiserver"] == "master-0"
        # No watch is ended by the shutdown before NotAcceptingNewRequest: the delay keeps them.
        assert shutdown["first"] >= 0
        assert shutdown["last"] >= shutdown["first"]

    (cut,) = without["shutdowns"]
    assert cut["drained"] == 0
    assert cut["cut"] > 0
    assert cut["first"] >= cut["stopped"]  # cut at exit, after the listener closed
    (drained,) = with_grace["shutdowns"]
    assert drained["drained"] > 0
    assert drained["stopped"] >= drained["first"]  # the listener waits for the drain
