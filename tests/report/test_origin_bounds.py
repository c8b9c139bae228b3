"""origin's shutdown message says the reaction in whole seconds, as origin does, and its bound
in whole seconds too, rounded outward: the reaction as printed lies inside the bound as
printed, and the bound still holds the truth."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prober.lab.judges.inbounds.outputs import check_outputs
from prober.report.ci.origin import write_origin_files
from tests.report.planted import planted_summary

WORDS = re.compile(r"took new\((?P<took>[^)]*)\) .* new-bound=(?P<bound>\[[^\]]*\])")


@pytest.mark.parametrize(
    ("reaction", "took", "bound"),
    [
        ((6.42, 6.418, 6.478), "6s", "[6s, 7s]"),  # was new(6s) new-bound=[6.418s, 6.478s]
        ((3.87, 3.855, 3.966), "4s", "[3s, 4s]"),
        ((0.4, 0.383, 0.632), "0s", "[0s, 1s]"),
        ((5.0, 4.9, 5.0), "5s", "[4s, 5s]"),
        ((1.5, 1.48, None), "2s", "[1s, ?]"),  # unbounded above
        ((-0.1, -0.3, 0.2), "0s", "[-1s, 1s]"),  # sent just before T0: origin says 0 s
    ],
)
def test_the_shutdown_message_rounds_its_bound_outward_to_whole_seconds(
    tmp_path: Path, reaction: tuple[float, float, float | None], took: str, bound: str
) -> None:
    write_origin_files(planted_summary(reaction=reaction, end_t=6.15), tmp_path)
    [timeline] = tmp_path.glob("e2e-timelines_*.json")
    items = json.loads(timeline.read_text())["items"]
    [human] = [i["message"]["humanMessage"] for i in items if i["source"] == "APIServerShutdown"]
    words = WORDS.search(human)
    assert words is not None, human
    assert (words["took"], words["bound"]) == (took, bound)
    assert check_outputs(tmp_path).problems() == []
