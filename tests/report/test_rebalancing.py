"""Rebalancing after each restart, from the daemon's summary records (`results.rebalancing`)."""

from __future__ import annotations

import pytest

from prober.core.instances import Instance
from prober.core.models import ClosedBy, StreamCounters, Summary, Window
from prober.report.documents.rebalance_table import rebalance_html, rebalance_lines
from prober.report.results.rebalancing import (
    Period,
    Restart,
    held_from,
    periods,
    rebalancing_section,
    restart_entry,
    tallies,
)

HOSTS = ["a", "b", "c"]
FLOOR = 0.5 / 3


def period(start: float, **answers: int) -> Period:
    return Period(start, start + 10, answers)


@pytest.mark.parametrize(
    ("case", "spans", "host", "held"),
    [
        ("held from the first period", [period(0, a=2, b=2, c=2), period(10, a=2, b=2, c=2)],
         "c", 0),
        ("came up in the second", [period(0, a=3, b=3), period(10, a=2, b=2, c=2)], "c", 1),
        ("dipped again: from after the dip",
         [period(0, a=2, b=2, c=2), period(10, a=5, b=5), period(20, a=2, b=2, c=2)], "c", 2),
        ("never", [period(0, a=3, b=3), period(10, a=3, b=3)], "c", None),
        ("a period without requests says nothing",
         [period(0, a=3, b=3), period(10, a=2, b=2, c=2), period(20)], "c", 1),
        ("too few requests to judge (under 2N)",
         [period(0, a=3, b=3), period(10, a=2, b=2, c=2), period(20, a=5)], "c", 1),
        ("2N requests judge", [period(0, a=3, b=3), period(10, a=2, b=2, c=2),
                               period(20, a=6)], "c", None),
        ("just under half a fair share", [period(0, a=5, b=4, c=1, d=2)], "c", None),
        ("one in six is half of a third", [period(0, a=3, b=2, c=1)], "c", 0),
        ("no period", [], "c", None),
    ],
)  # fmt: skip
def test_held_from(case, spans, host, held):
    assert held_from(spans, host, FLOOR) == held, case


def test_periods_are_differences_of_cumulative_counts():
    summaries = [summary(0, {}), summary(10, {"a": 4, "b": 2}), summary(20, {"a": 5, "b": 8})]
    assert periods(tallies(summaries)) == [
        Period(0, 10, {"a": 4, "b": 2}),
        Period(10, 20, {"a": 1, "b": 6}),
    ]


def test_a_restart_is_timed_from_t1_with_its_bound():
    restart = Restart("m-1 #2", "b", 12.0, 11.0, 13.0)
    spans = [period(0, a=9, c=9), period(10, a=5, c=5), period(20, a=2, b=2, c=2)]
    entry = restart_entry(restart, spans, HOSTS, (40.0, "the run's end"))
    assert [p["start"] for p in entry["periods"]] == [10, 20]  # ends after T1, by the end
    held = {h["host"]: h for h in entry["held"]}
    # b held it in the period 20..30: it crossed after the period before began (10 s)
    assert held["b"] == {"host": "b", "seconds": 18.0, "seconds_lo": 0.0, "seconds_hi": 19.0}
    assert held["a"]["seconds"] == 8.0
    assert "b after 18.0 s [0.0, 19.0]" in entry["text"]


def test_a_restart_that_never_rebalanced_says_until_when():
    restart = Restart("m-1 #2", "b", 5.0, None, None)
    spans = [period(0, a=9, c=9), period(10, a=5, c=5)]
    entry = restart_entry(restart, spans, HOSTS, (20.0, "the shutdown of c"))
    held = {h["host"]: h["seconds"] for h in entry["held"]}
    assert held == {"a": 5.0, "b": None, "c": 5.0}
    assert "b never before the shutdown of c" in entry["text"]


def summary(t: float, answers: dict[str, int], pool: int = 6) -> Summary:
    stream = "kube-api-http2-internal-lb-reused-connections"
    counters = StreamCounters(stream, 0, 0, 0, 0.0, kept_answers=answers, kept_connections=pool)
    return Summary(ts="2026-11-30T00:00:00.000000Z", t=t, streams=(counters,))


def instance(host: str, t1: float) -> Instance:
    return Instance(host, f"node-{host}", 2, None, t1 - 1, t1, t1 - 0.5, t1 + 0.5,
                    None, None, (), 0, True)  # fmt: skip


def window(host: str, t0: float) -> Window:
    return Window(host, None, 10.0, t0, t0, t0, t0, ClosedBy.RECOVERED, t0 + 12, ())


RUN = [
    summary(0, {"a": 10, "b": 10, "c": 10}),
    summary(10, {"a": 15, "b": 10, "c": 15}),  # b restarting
    summary(20, {"a": 25, "b": 10, "c": 25}),  # b back at 15, holds nothing yet
    summary(30, {"a": 30, "b": 15, "c": 30}),
    summary(40, {"a": 35, "b": 20, "c": 35}),
]


def test_the_section_of_a_run():
    section = rebalancing_section(RUN, [instance("b", 15.0)], [window("b", 5.0)])
    assert section is not None
    assert section["covers"]
    assert section["pool"] == 6
    assert section["apiservers"] == ["a", "c", "node-b"]  # named by its node
    [entry] = section["restarts"]
    assert [p["requests"] for p in entry["periods"]] == [20, 15, 15]
    assert {h["host"]: h["seconds"] for h in entry["held"]} == {"a": 5.0, "c": 5.0, "node-b": 15.0}
    lines = "\n".join(rebalance_lines(section))
    assert "node-b #2 ready (T1) at 15.00 s [14.50, 15.50]; until the run's end" in lines
    assert "+15.0" in lines
    assert "33 %" in lines
    assert "node-b #2" in rebalance_html(section)


def test_a_pool_smaller_than_the_apiservers_gives_no_shares():
    run = [summary(s.t, dict(s.streams[0].kept_answers), pool=2) for s in RUN]
    section = rebalancing_section(run, [instance("b", 15.0)], [])
    assert section is not None
    assert not section["covers"]
    assert section["restarts"] == []
    assert section["text"] == "pool of 2 kept HTTP/2 connections cannot cover 3 apiservers"
    assert rebalance_lines(section)[-1].endswith("cannot cover 3 apiservers")


def test_a_run_without_kept_http2_counts_has_no_section():
    assert rebalancing_section([summary(0, {}, pool=0)], [], []) is None


def test_apiservers_are_named_by_their_nodes_where_known():
    section = rebalancing_section(RUN, [instance("b", 15.0)], [], {"a": "master-0"})
    assert section is not None
    assert section["apiservers"] == ["c", "master-0", "node-b"]
    [entry] = section["restarts"]
    assert entry["periods"][-1]["shares"] == {"c": 0.333333, "master-0": 0.333333,
                                              "node-b": 0.333333}  # fmt: skip


def test_a_pool_of_up_to_twice_the_apiservers_says_how_coarse_its_shares_are():
    run = [summary(s.t, dict(s.streams[0].kept_answers), pool=5) for s in RUN]
    section = rebalancing_section(run, [instance("b", 15.0)], [])
    assert section is not None
    assert section["covers"]
    assert (
        "(one connection is 1/5 of the requests: a share moves by that at once)"
        in (section["text"])
    )
    six = rebalancing_section(RUN, [instance("b", 15.0)], [])  # 2N: one is half a fair share
    assert six is not None
    assert "(one connection is 1/6 of the requests" in six["text"]
    run = [summary(s.t, dict(s.streams[0].kept_answers), pool=7) for s in RUN]
    seven = rebalancing_section(run, [instance("b", 15.0)], [])
    assert seven is not None
    assert "one connection" not in seven["text"]
