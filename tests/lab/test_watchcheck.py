"""The watch check's judgements, table-driven: measured watches beside truth watches on one
clock (offset 1000 s), each case the problems and findings it must give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from prober.lab.gracetruth import server_shutdowns
from prober.lab.truth import TruthError, read_shutdowns
from prober.lab.watchcheck import (
    Context,
    MeasuredWatch,
    TruthWatch,
    check_watches,
    pair,
    read_truth_watches,
)

OFFSET = 1000.0
S = "kube-api-http2-external-lb-watch"


def measured(sent: float, end: float | None, how: str = "timeout", *, doomed: bool = False,
             stream: str = S, server: str = "a") -> MeasuredWatch:  # fmt: skip
    return MeasuredWatch(stream, "http2", server, sent, sent + 0.01, doomed, end, how)


def truth(start: float, end: float | None, how: str = "timeout", phase: str = "before",
          server: str = "a") -> TruthWatch:  # fmt: skip
    return TruthWatch(server, "http2", OFFSET + start, phase,
                      None if end is None else OFFSET + end, how)  # fmt: skip


def judge(ms, ts, blind=None, end_t: float = 100.0):
    ctx = Context(OFFSET, 0.1, end_t, blind or {}, 1.0)
    return check_watches(ms, ts, ctx)


@pytest.mark.parametrize(
    ("ms", "ts", "blind", "problems", "findings"),
    [
        pytest.param([measured(1.0, 20.0), measured(20.05, None)],
                     [truth(1.005, 20.0), truth(20.055, None)], None, [], [], id="healthy"),
        pytest.param([measured(1.0, None)], [truth(3.0, None)], None,
                     ["no http2 watch began there"], [], id="no-landing"),
        pytest.param([measured(1.0, None)], [truth(1.0, None, server="b")], None,
                     ["no http2 watch began there"], [], id="landed-elsewhere"),
        pytest.param([measured(1.0, None, doomed=True)], [truth(1.005, None)], None,
                     ["was called doomed; the server was in phase before"], [], id="false-doom"),
        pytest.param([measured(1.0, None)], [truth(1.005, None, phase="delay_late")], None,
                     ["was not called doomed; the server was in phase delay_late"], [],
                     id="missed-doom"),
        pytest.param([measured(1.0, 20.6)], [truth(1.005, 20.0)], None,
                     ["ended (timeout) at 20.600 s as measured; the server ended it (timeout)"],
                     [], id="clean-end-late"),
        pytest.param([measured(1.0, 19.5, "closed")], [truth(1.005, 20.0, "cut")], None,
                     ["ended (closed) at 19.500 s as measured"], [], id="end-before-the-server"),
        pytest.param([measured(1.0, 22.0, "reset")], [truth(1.005, 20.0, "cut")], None, [],
                     ["learnt of it (reset) 2.000 s later"], id="cut-held-by-the-lb"),
        pytest.param([measured(1.0, 19.6, "reset")], [truth(1.005, 20.0, "reset")], None, [],
                     [], id="a-reset-both-got"),
        pytest.param([measured(1.0, 20.3)], [truth(1.005, 20.0)], None, [], [],
                     id="a-busy-client-notices-late"),
        pytest.param([measured(1.0, 65.0, "ping")], [truth(1.005, 20.0, "reset")], None, [],
                     ["by its own ping 45.000 s later"], id="found-by-ping"),
        pytest.param([measured(1.0, None)], [truth(1.005, 20.0, "reset")],
                     {S: [(22.0, 100.0)]}, [], ["never learnt of it (measured blind)"],
                     id="hung-and-blind"),
        pytest.param([measured(1.0, None)], [truth(1.005, 20.0, "reset")], {S: [(40.0, 100.0)]},
                     ["held it on and was never measured blind"], [], id="hung-blind-too-late"),
        pytest.param([measured(1.0, 99.95, "stopped")], [truth(1.005, 99.96, "client-gone")],
                     None, [], [], id="the-daemon's-stop"),
        pytest.param([measured(1.0, 20.0), measured(23.0, None)],
                     [truth(1.005, 20.0), truth(21.0, None)], None,
                     ["no http2 watch began there", ], [], id="a-start-the-truth-puts-elsewhere"),
        pytest.param([measured(1.0, 20.0), measured(20.05, None)],
                     [truth(1.005, 20.0), truth(20.055, None), truth(1.006, 20.0)], None, [], [],
                     id="another-client's-watch-is-left-alone"),
    ],
)  # fmt: skip
def test_each_watch_is_judged(ms, ts, blind, problems, findings) -> None:
    check = judge(ms, ts, blind)
    assert len(check.problems) == len(problems), check.problems
    for text, said in zip(problems, check.problems, strict=True):
        assert text in said
    assert len(check.findings) == len(findings), check.findings
    for text, said in zip(findings, check.findings, strict=True):
        assert text in said


def test_a_re_establish_is_held_to_the_servers_end_and_next_start() -> None:
    ms = [measured(1.0, 20.0, "closed"), measured(21.0, None)]
    ts = [truth(1.005, 20.0, "drained"), truth(21.005, None)]
    check = judge(ms, ts)
    assert check.problems == []
    assert check.rows[1].reestablish == pytest.approx(1.01)
    assert check.rows[1].truth_reestablish == pytest.approx(1.005)


def test_two_streams_landing_at_once_get_the_watches_whose_ends_match() -> None:
    other = "kube-api-http2-internal-lb-watch"
    ms = [measured(1.0, None, stream=S), measured(1.0, 10.3, "closed", stream=other)]
    ts = [truth(1.005, 2.0, "reset"), truth(1.006, 10.0, "cut")]
    pairs = pair(ms, ts, OFFSET, 0.1)
    assert [(m.stream, t.how if t else None) for m, t in pairs] == [(S, "reset"), (other, "cut")]


def test_the_truth_file_gives_each_lease_watch_on_the_probers_names(tmp_path: Path) -> None:
    lines = [
        {"event": "watch_started", "apiserver": "a", "wall": 5.0, "conn": 1, "stream": 1,
         "protocol": "h1", "path": "/apis/coordination.k8s.io/v1/leases?watch=true",
         "phase": "before"},
        {"event": "watch_started", "apiserver": "a", "wall": 6.0, "conn": 2, "stream": 3,
         "protocol": "h2", "path": "/api/v1/configmaps?watch=true", "phase": "before"},
        {"event": "watch_ended", "apiserver": "a", "wall": 9.0, "conn": 1, "stream": 1,
         "how": "cut", "events": 4},
        {"event": "watch_started", "apiserver": "a", "wall": 10.0, "conn": 3, "stream": 1,
         "protocol": "h2", "path": "/apis/coordination.k8s.io/v1/leases?watch=true",
         "phase": "delay_early"},
    ]  # fmt: skip
    path = tmp_path / "truth.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert read_truth_watches(path, "/leases") == [
        TruthWatch("a", "http1", 5.0, "before", 9.0, "cut", 4),
        TruthWatch("a", "http2", 10.0, "delay_early"),
    ]


def test_held_watches_give_way_to_the_one_whose_end_says_which_is_its_own() -> None:
    # aws at 0.05: two h1 watches through the NLB held on (reset at the server, unknown to the
    # client), one on localhost closed as its server stopped. Any other pairing makes the
    # localhost watch seem to learn of a reset 7 s late.
    held = [measured(1.0, None, stream="int"), measured(1.0, 99.9, "stopped", stream="ext")]
    local = measured(1.0, 10.3, "closed", stream="local")
    ts = [truth(1.005, 2.4, "reset"), truth(1.006, 10.0, "cut"), truth(1.007, 3.3, "reset")]
    pairs = {m.stream: t for m, t in pair([*held, local], ts, OFFSET, 0.1)}
    assert pairs["local"] is not None
    assert pairs["local"].how == "cut"
    assert {pairs["int"].how, pairs["ext"].how} == {"reset"}


def test_a_held_watch_is_never_one_its_server_ended_in_words() -> None:
    # gcp at 0.05: a watch held until the stop landed 0.06 s after another one on its
    # server ended with a 410; that end would have reached the client at once.
    held = measured(8.15, 16.5, "stopped")
    ts = [truth(8.09, 8.097, "gone"), truth(8.155, 16.52, "client-gone")]
    [(_, t)] = pair([held], ts, OFFSET, 0.1)
    assert t is not None
    assert t.how == "client-gone"


def test_a_group_too_large_to_search_is_paired_nearest_ends_first() -> None:
    # Ten streams of one protocol landing at once on one server: past SEARCHED, greedily.
    ms = [measured(1.0, 10.0 + i, "closed", stream=f"s{i}") for i in range(10)]
    ts = [truth(1.005, 10.0 + i, "cut") for i in reversed(range(10))]
    pairs = pair(ms, ts, OFFSET, 0.1)
    assert [(m.stream, t.end - OFFSET if t and t.end else None) for m, t in pairs] == [
        (f"s{i}", pytest.approx(10.0 + i)) for i in range(10)
    ]


def test_a_re_establish_after_an_end_noticed_late_allows_for_that_notice() -> None:
    # The client noticed the drain 0.35 s late (a busy loop, inside NOTICE): its re-establish
    # measures that much shorter than the server's end to next start, and is no problem.
    ms = [measured(1.0, 20.35, "closed"), measured(20.4, None)]
    ts = [truth(1.005, 20.0, "drained"), truth(20.405, None)]
    check = judge(ms, ts)
    assert check.problems == []
    assert check.rows[1].reestablish == pytest.approx(0.06)
    assert check.rows[1].truth_reestablish == pytest.approx(0.405)


@pytest.mark.parametrize(
    ("line", "why"),
    [("not json", "Expecting value"), ('{"wall": 1.0}', "'event'"),
     ('{"event": "listening", "wall": "soon"}', "could not convert"),
     ('{"event": "watch_started", "wall": 1.0, "conn": 1}', "'stream'")],
)  # fmt: skip
def test_every_truth_reader_names_the_file_and_line_of_a_bad_record(
    tmp_path: Path, line: str, why: str
) -> None:
    path = tmp_path / "truth.jsonl"
    path.write_text('{"event": "listening", "wall": 0.5}\n' + line + "\n")
    readers = [read_truth_watches, read_shutdowns, server_shutdowns_of]
    if "watch_started" in line:
        readers = [read_truth_watches]  # a watch record's fields are the watch reader's
    for read in readers:
        with pytest.raises(
            TruthError, match=rf"^{re.escape(str(path))}:2: not a .* record: .*{why}"
        ):
            read(path)


def server_shutdowns_of(path: Path) -> object:
    return server_shutdowns([path])
