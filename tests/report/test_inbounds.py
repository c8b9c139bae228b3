"""The check that every estimate an output shows lies within the bound it shows with it:
each reader finds an estimate planted outside its bound, names the file, the record and the
numbers, and finds nothing where there is nothing to find."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from prober.core.models import (
    LB,
    ClosedBy,
    ErrorClass,
    Interval,
    Protocol,
    Window,
    WindowStream,
)
from prober.lab.judges.inbounds.outputs import check_junit, check_outputs, check_summary
from prober.lab.judges.inbounds.page import check_html
from prober.lab.judges.inbounds.text import Checked, check_text, read_text
from prober.report.ci.origin import write_origin_files
from prober.report.documents.junit import junit_xml
from prober.report.documents.timeline import StreamMarks, View, lb_timeline, window_title
from prober.report.format.tables import bound, bounded
from prober.report.verdicts.identity import Case, CaseId
from prober.report.verdicts.verdicts import Status, Verdict, within
from tests.report.planted import STREAM, planted_summary


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # tables.bounded, as the tables and the budget tests' messages show a reaction
        (bounded(0.876, 0.87, 1.334), [(0.88, 0.87, 1.33)]),
        (bounded(6.135945, 6.148002, 6.159721), [(6.14, 6.15, 6.16)]),  # the interval
        (bounded(2.5, None, 3.0), [(2.5, None, 3.0)]),
        (bounded(None, 1.0, 2.0), []),
        # verdicts.within, after the value it bounds
        (f"requests 1.23 s after T0 ({within(1.1, 1.4)}; T0 6.14 s ± 0.01 s)",
         [(1.23, 1.1, 1.4)]),
        (f"1.23 s ({within(1.5, None)})", [(1.23, 1.5, None)]),
        (f"1.23 s ({within(None, 1.0)})", [(1.23, None, 1.0)]),
        (f"1.23 s ({within(None, None)})", []),
        # an interval's edges and length, as the availability test's details put them
        (f"from 50.15 s {bound(49.9, 50.17)} to 53.15 s {bound(52.9, 53.17)} (3.00 s, "
         f"{within(2.73, 3.27)}, 12 failed requests)",
         [(50.15, 49.9, 50.17), (53.15, 52.9, 53.17), (3.0, 2.73, 3.27)]),
        # budget_verdicts.explain's words
        ("aws external-lb http1 new: stopped routing 0.88 s after readyz false (bound "
         "[0.87, 1.33]); budget 1.5 s (interval 0.5 s, 2 unhealthy checks): within",
         [(0.88, 0.87, 1.33)]),
        # a value's own spread or a difference ends it: no bound after it is its
        ("T0 6.14 s ± 0.01 s [1.00, 2.00]", []),
        ("1.250 s  +0.016 s  [1.100, 1.400]", []),
        # a clause ends at ";": the bound after it is not the value's before it
        ("allowed 30 s; bound [1.00, 2.00]", []),
        # the lab's table: the bound in the column after the measured value, marked or not
        ("master-0  external-lb  http1  new  1.234 s  [1.100, 1.200] !  failure  1.150 s",
         [(1.234, 1.1, 1.2)]),
        ("master-0: T0 bound [12.345, 12.390] s (±22 ms)", []),
    ],
)  # fmt: skip
def test_values_are_read_with_the_bound_shown_after_them(
    text: str, found: list[tuple[float, float | None, float | None]]
) -> None:
    assert [(value, lo, hi) for _, value, lo, hi in read_text(text)] == found


def test_a_window_title_shows_t0_between_its_bounds() -> None:
    window = Window("h", None, 20.0, 10.0, 10.004, 9.9, 10.1, ClosedBy.END, 40.0, ())
    [(_, t0, lo, hi)] = read_text(window_title(1, window))
    assert (t0, lo, hi) == (10.0, 9.9, 10.1)


def test_text_names_the_line_and_what_it_shows() -> None:
    checked = check_text("report.txt", "ok 1.00 s [0.50, 1.50]\nbad 6.14 s [6.15, 6.16] here")
    assert checked.counts == {"report.txt": 2}
    assert checked.problems() == [
        'report.txt: line 2: "6.14 s [6.15, 6.16]": 6.14 outside its bound [6.15, 6.16]'
    ]


def test_the_summary_names_the_interval_whose_end_lies_outside_its_bound() -> None:
    checked = check_summary("summary.json", planted_summary())
    assert checked.problems() == [
        "summary.json: streams[0] (kube-api-http1-external-lb-new-connections).intervals[0] "
        "end_t: 6.135945 outside its bound [6.148002, 6.159721]"
    ]
    # t0, the window's reaction, both edges, the worst reaction, the explained line
    assert checked.counts == {"summary.json": 6}
    assert check_summary("summary.json", planted_summary(end_t=6.15)).problems() == []


def test_a_v1_summary_has_no_bound_and_nothing_outside_it() -> None:
    doc: dict[str, Any] = dict(planted_summary())
    for interval in doc["streams"][0]["intervals"]:
        for name in ("start_lo", "start_hi", "end_lo", "end_hi"):
            del interval[name]
    assert check_summary("summary.json", doc).problems() == []


def test_junit_messages_and_details_are_read_as_worded() -> None:
    key = (LB.EXTERNAL, Protocol.HTTP1, "new")
    fails, skips, passes = (
        CaseId.of(t, key) for t in (Case.ROUTING, Case.WITHIN_BUDGET, Case.DELAY_COVERS)
    )
    verdicts = [
        Verdict(fails, None, Status.FAILED, "requests 0.50 s [0.60, 0.70]",
                ("first 1.00 s [0.90, 1.10]", "second 2.00 s [2.10, 2.20]")),
        Verdict(skips, None, Status.SKIPPED, "0.50 s [0.40, 0.45] unbounded"),
        Verdict(passes, None, Status.PASSED, "0.50 s [0.40, 0.60]"),
    ]  # fmt: skip
    checked = check_junit("junit.xml", junit_xml(verdicts, {}).decode())
    assert checked.counts == {"junit.xml": 5}
    assert [o.record for o in checked.outside] == [
        f"testcase '{fails.name}' failure message line 1: \"0.50 s [0.60, 0.70]\"",
        f"testcase '{fails.name}' failure line 2: \"2.00 s [2.10, 2.20]\"",
        f"testcase '{skips.name}' skipped message line 1: \"0.50 s [0.40, 0.45]\"",
    ]


def test_every_file_origin_is_given_repeats_what_the_summary_holds(tmp_path: Path) -> None:
    write_origin_files(planted_summary(), tmp_path)
    checked = check_outputs(tmp_path)
    outside = sorted(f"{_named(o.file)}: {o.record}" for o in checked.outside)
    assert outside == [
        "backend-disruption: prober-kube-api-http1-external-lb-new-connections "
        "DisruptionMessages[0] end",
        "e2e-timelines: items[1] (Disruption) end",
        "prober-interval: rows[0] (kube-api-http1-external-lb-new-connections) end_t",
    ]
    # and each estimate it holds: T0 and the reactions too, in the timeline's words as well
    kinds = {_named(name): n for name, n in checked.counts.items()}
    assert kinds == {"backend-disruption": 2, "e2e-timelines": 6, "prober-interval": 2,
                     "prober-shutdown": 2}  # fmt: skip


def _named(file: str) -> str:
    """An origin file's kind: its name without the run's stamp."""
    return re.sub(r"[_-](prober_)?\d{8}-\d{6}.*", "", file)


def _timeline(interval: Interval, last_late: float, reaction: float) -> str:
    seen = WindowStream(STREAM, late=3, max_elapsed=1.0, last_late_t=last_late,
                        reaction=reaction, failures=0, reaction_lo=0.5,
                        reaction_hi=1.0)  # fmt: skip
    window = Window("h", None, 6.0, 1.0, 1.0, 0.95, 1.05, ClosedBy.END, 9.0, (seen,))
    marks = StreamMarks(STREAM, intervals=[interval])
    return lb_timeline("lb", [marks], [window], {"h": "#0072B2"}, View("v", "v", 0, 10, True))


def _interval(end_t: float) -> Interval:
    return Interval(STREAM, 5.0, end_t, "a", "b", ErrorClass.CONNECT_REFUSED, "refused", 3,
                    start_lo=4.9, start_hi=5.1, end_lo=6.1, end_hi=6.2)  # fmt: skip


def test_the_timeline_is_read_as_drawn() -> None:
    assert check_html("report.html", _timeline(_interval(6.15), 1.8, 0.8)).problems() == []
    found = check_html("report.html", _timeline(_interval(5.9), 2.5, 1.5)).outside
    # the bar ends before its end's band, the bracket past the reaction's band; and their
    # titles say so in words too
    drawn = sorted(o.record.rsplit(": ", 1)[1] for o in found if o.record.endswith(" at x"))
    assert drawn == ["its end at x", "the bracket's end at x"]
    assert sorted(o.estimate for o in found if not o.record.endswith(" at x")) == [1.5, 5.9]


def test_a_file_that_cannot_be_read_is_said(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{")
    (tmp_path / "junit.xml").write_text("<testsuites>")
    (tmp_path / "unrelated.json").write_text("{")
    problems = check_outputs(tmp_path).problems()
    assert [p.split(":")[0] for p in problems] == ["junit.xml", "summary.json"]


def test_a_check_adds_up() -> None:
    total = Checked()
    total.add(check_text("a", "1.00 s [2.00, 3.00]"))
    total.add(check_text("b", "1.00 s [0.00, 3.00]"))
    assert total.counts == {"a": 1, "b": 1}
    assert [o.file for o in total.outside] == ["a"]
