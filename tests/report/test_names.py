"""Test names CI can keep: the same set for every run of a platform, whatever its time scale
and LB settings, with no figure in any name (Sippy keys its history on the name)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from prober.core.budgets import PLATFORMS
from prober.report.analyze import analyze_runs
from prober.report.verdicts.watch_verdicts import WatchAllowed

FIXTURE = Path(__file__).parents[1] / "golden" / "fixture" / "events.jsonl.gz"
# The only figures a name may hold: the protocols' and upstream's fixed "20 %" rule.
ALLOWED_FIGURES = re.compile(r"http[12]|20 %")


def names(tmp: Path, scale: float, limits: WatchAllowed) -> set[str]:
    events = tmp / "events.jsonl.gz"
    shutil.copy(FIXTURE, events)
    settings = PLATFORMS["aws"].scaled(scale)
    [analysis], _ = analyze_runs(
        [events], platform="aws", lb_settings=settings, watch_allowed=limits
    )
    return {v.name for v in analysis.verdicts}


def test_a_platforms_test_names_are_the_same_in_every_run(tmp_path: Path) -> None:
    small = names(tmp_path, 0.05, WatchAllowed())
    large = names(tmp_path, 0.2, WatchAllowed(reestablish=9.0, blind=40.0))
    assert small == large
    assert len(small) > 50
    for name in small:
        assert not re.search(r"\d", ALLOWED_FIGURES.sub("", name)), name
