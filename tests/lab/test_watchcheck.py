"""The watch check's judgements, table-driven: measured watches beside truth watches on one
clock (offset 1000 s), each case the problems and findings it must give."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import pytest

from prober.core.header import apiserver_id
from prober.core.models import LB
from prober.core.phase import ShutdownPhase
from prober.core.truthlog import Listening, WatchEnded, WatchStarted
from prober.lab.infra.gracetruth import server_shutdowns
from prober.lab.infra.sessions import ADDRESS, LOG, NAT, TIME, Session
from prober.lab.infra.truth import TruthError, read_shutdowns
from prober.lab.judges.watchcheck import Context, Cut, check_watches, read_truth_watches
from prober.lab.judges.watchpairs import Joins, MeasuredWatch, TruthWatch, pair
from tests.support.truthfiles import at as stamped
from tests.support.truthfiles import truth_lines, write_truth

OFFSET = 1000.0
S = "kube-api-http2-external-lb-watch"


def measured(sent: float, end: float | None, how: str = "timeout", *, doomed: bool = False,
             stream: str = S, server: str = "a") -> MeasuredWatch:  # fmt: skip
    return MeasuredWatch(stream, "http2", server, sent, sent + 0.01, doomed, end, how)


def truth(start: float, end: float | None, how: str = "timeout", phase: str = "before",
          server: str = "a") -> TruthWatch:  # fmt: skip
    return TruthWatch(server, "http2", OFFSET + start, phase,
                      None if end is None else OFFSET + end, how)  # fmt: skip


# The heartbeat writer at 1 Hz: each write sent, and acknowledged 0.3 s later.
WRITES = [(i + 0.2, i + 0.5) for i in range(100)]


def judge(ms, ts, blind=None, end_t: float = 100.0, *, writes=WRITES, cuts=(), joins=None):
    ctx = Context(OFFSET, 0.1, end_t, blind or {}, 1.0, writes, joins or Joins(), cuts)
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
                     {S: [(21.5, 100.0)]}, [], ["never learnt of it (measured blind)"],
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
    pairs = [
        (p.measured.stream, p.truth.how if p.truth else None) for p in pair(ms, ts, OFFSET, 0.1)
    ]
    assert pairs == [(S, "reset"), (other, "cut")]


def test_the_truth_file_gives_each_lease_watch_on_the_probers_names(tmp_path: Path) -> None:
    leases, peer = "/apis/coordination.k8s.io/v1/leases?watch=true", "198.18.0.2:4000"
    before = ShutdownPhase.BEFORE
    started = partial(WatchStarted, peer=peer, protocol="h2", path=leases, phase=before)
    records = [
        (5.0, started(conn=1, stream=1, protocol="h1")),
        (6.0, started(conn=2, stream=3, path="/api/v1/configmaps?watch=true")),
        (9.0, WatchEnded(conn=1, stream=1, how="cut", phase=before, events=4, seconds=4.0)),
        (10.0, started(conn=3, stream=1, phase=ShutdownPhase.DELAY_EARLY)),
    ]
    path = write_truth(tmp_path / "truth.jsonl", [stamped(w, r, apiserver="a") for w, r in records])
    assert read_truth_watches(path, "/leases") == [
        TruthWatch("a", "http1", 5.0, "before", 9.0, "cut", 4, peer),
        TruthWatch("a", "http2", 10.0, "delay_early", peer=peer),
    ]


def test_held_watches_give_way_to_the_one_whose_end_says_which_is_its_own() -> None:
    # aws at 0.05: two h1 watches through the NLB held on (reset at the server, unknown to the
    # client), one on localhost closed as its server stopped. Any other pairing makes the
    # localhost watch seem to learn of a reset 7 s late.
    held = [measured(1.0, None, stream="int"), measured(1.0, 99.9, "stopped", stream="ext")]
    local = measured(1.0, 10.3, "closed", stream="local")
    ts = [truth(1.005, 2.4, "reset"), truth(1.006, 10.0, "cut"), truth(1.007, 3.3, "reset")]
    pairs = {p.measured.stream: p.truth for p in pair([*held, local], ts, OFFSET, 0.1)}
    assert pairs["local"] is not None
    assert pairs["local"].how == "cut"
    assert {pairs["int"].how, pairs["ext"].how} == {"reset"}


def test_a_held_watch_is_never_one_its_server_ended_in_words() -> None:
    # gcp at 0.05: a watch held until the stop landed 0.06 s after another one on its
    # server ended with a 410; that end would have reached the client at once.
    held = measured(8.15, 16.5, "stopped")
    ts = [truth(8.09, 8.097, "gone"), truth(8.155, 16.52, "client-gone")]
    [paired] = pair([held], ts, OFFSET, 0.1)
    t = paired.truth
    assert t is not None
    assert t.how == "client-gone"


def test_a_group_too_large_to_search_is_paired_nearest_ends_first() -> None:
    # Ten streams of one protocol landing at once on one server: past SEARCHED, greedily.
    ms = [measured(1.0, 10.0 + i, "closed", stream=f"s{i}") for i in range(10)]
    ts = [truth(1.005, 10.0 + i, "cut") for i in reversed(range(10))]
    pairs = pair(ms, ts, OFFSET, 0.1)
    ends = [(p.measured.stream, p.truth.end - OFFSET if p.truth and p.truth.end else None)
            for p in pairs]  # fmt: skip
    assert ends == [(f"s{i}", pytest.approx(10.0 + i)) for i in range(10)]


def test_a_re_establish_after_an_end_noticed_late_allows_for_that_notice() -> None:
    # The client noticed the drain 0.35 s late (a busy loop, inside NOTICE): its re-establish
    # measures that much shorter than the server's end to next start, and is no problem.
    ms = [measured(1.0, 20.35, "closed"), measured(20.4, None)]
    ts = [truth(1.005, 20.0, "drained"), truth(20.405, None)]
    check = judge(ms, ts)
    assert check.problems == []
    assert check.rows[1].reestablish == pytest.approx(0.06)
    assert check.rows[1].truth_reestablish == pytest.approx(0.405)


LISTENING = truth_lines([stamped(0.5, Listening(port=6443, holder="apiserver-x_1"))])


@pytest.mark.parametrize(
    ("line", "why"),
    [("not json", "not JSON: Expecting value"),
     ('{"event": "listening", "wall": 1.0}', "schema version None"),
     ('{"v": 1, "kind": "listening", "wall": "soon"}', "listening.wall: expected a number"),
     ('{"v": 1, "kind": "watch_started", "wall": 1.0, "conn": 1}',
      "watch_started: missing field 'stream'")],
)  # fmt: skip
def test_every_truth_reader_names_the_file_and_line_of_a_bad_record(
    tmp_path: Path, line: str, why: str
) -> None:
    path = tmp_path / "truth.jsonl"
    path.write_text(LISTENING + line + "\n")
    for read in (read_truth_watches, read_shutdowns, server_shutdowns_of):
        with pytest.raises(TruthError, match=rf"^{re.escape(str(path))}:2: {re.escape(why)}"):
            read(path)


def test_a_kind_the_reader_does_not_know_and_a_truncated_last_line_are_skipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "truth.jsonl"
    later = '{"v": 1, "kind": "written_by_a_newer_fake", "wall": 1.0}\n'
    path.write_text(LISTENING + later + '{"v": 1, "kind": "watch_st')
    assert read_shutdowns(path) == []
    assert read_truth_watches(path) == []


def server_shutdowns_of(path: Path) -> object:
    return server_shutdowns([path])


def at(m: MeasuredWatch, lb: LB, local: str) -> MeasuredWatch:
    m.lb, m.local = lb, local
    return m


def on(t: TruthWatch, peer: str) -> TruthWatch:
    return TruthWatch(t.apiserver, t.protocol, t.start, t.phase, t.end, t.how, t.events, peer)


def test_watches_landing_together_are_paired_by_their_connections_whatever_their_ends() -> None:
    # aws at 0.05: two h1 watches landed on one server 5 ms apart; the server timed the
    # external LB's out at 15.0 s and cut the service network's at 19.29 s, which its client
    # saw at 19.39 s. By time alone the ends decide, and they swapped the two.
    ext = at(measured(1.0, None, stream="ext"), LB.EXTERNAL, "198.18.0.2:44582")
    svc = at(measured(1.0, 19.39, "closed", stream="svc"), LB.SERVICE_NETWORK,
             "198.18.0.2:44590")  # fmt: skip
    ts = [on(truth(1.004, 19.29, "cut"), "198.18.0.2:44590"),
          on(truth(1.009, 15.0, "reset"), "198.18.0.2:44582")]  # fmt: skip
    pairs = {p.measured.stream: (p.truth, p.way) for p in pair([ext, svc], ts, OFFSET, 0.1)}
    assert pairs == {"ext": (ts[1], ADDRESS), "svc": (ts[0], ADDRESS)}


def test_behind_haproxy_the_join_is_its_session_log() -> None:
    """HAProxy connects to the server from an address of its own; its session line for the
    client's address names it. The newest session from that address before the head counts:
    a port is used again once its connection is gone."""
    m = at(measured(1.0, None), LB.INTERNAL, "127.0.0.1:40000")
    client = "127.0.0.1:40000"
    sessions = [Session(OFFSET - 50.0, client, "127.0.0.1:51000", "master-0"),
                Session(OFFSET + 1.002, client, "127.0.0.1:52000", "master-0")]  # fmt: skip
    server = apiserver_id("master-0")
    m.server = server
    ts = [on(truth(1.004, None, server=server), "127.0.0.1:51000"),
          on(truth(1.005, None, server=server), "127.0.0.1:52000")]  # fmt: skip
    haproxy = frozenset({LB.INTERNAL})
    [paired] = pair([m], ts, OFFSET, 0.1, Joins({LB.INTERNAL: sessions}, haproxy))
    assert (paired.truth, paired.way) == (ts[1], LOG)
    # A session to another server than the header named joins nothing: time decides.
    elsewhere = [Session(OFFSET + 1.002, "127.0.0.1:40000", "127.0.0.1:52000", "master-1")]
    [paired] = pair([m], ts[1:], OFFSET, 0.1, Joins({LB.INTERNAL: elsewhere}, haproxy))
    assert (paired.truth, paired.way) == (ts[1], TIME)
    assert paired.why == f"internal-lb logged no session from 127.0.0.1:40000 to {server}"


LOST = Cut(OFFSET + 10.0, "a", "master-0's node lost", until=OFFSET + 30.0)
RESET = Cut(OFFSET + 10.0, "a", "external-lb reset its flows to master-0", LB.EXTERNAL)


@pytest.mark.parametrize(
    ("watch", "cut", "heard", "problems", "findings"),
    [
        pytest.param((measured(1.0, 19.2, "reset"), truth(1.005, 26.0)), LOST, (WRITES, None),
                     [], ["the client learnt of it (reset) 9.200 s later"],
                     id="a-reset-before-the-servers-end-into-a-dead-path"),
        pytest.param((measured(1.0, 9.0, "closed"), truth(1.005, 26.0)), LOST, (WRITES, None),
                     ["before anything ended it"], [], id="an-end-before-the-cut"),
        pytest.param((measured(1.0, 9.0, "ping"), truth(1.005, 26.0)), LOST, (WRITES, None),
                     [], [], id="the-clients-own-check-may-end-it-any-time"),
        pytest.param((measured(1.0, None), truth(1.005, 17.1)), LOST,
                     (WRITES, {S: [(11.5, 100.0)]}), [],
                     ["never learnt of it (measured blind)"], id="held-and-blind"),
        pytest.param((measured(1.0, None), truth(1.005, 17.1)), LOST,
                     (WRITES, {S: [(31.5, 100.0)]}),
                     ["held it on and was never measured blind"], [], id="held-not-blind"),
        pytest.param((measured(1.0, None), truth(1.005, 17.1)), LOST,
                     (WRITES[:2] + WRITES[-1:], None), [],
                     ["no heartbeat write acknowledged after that left time"],
                     id="held-through-the-writers-outage"),
        pytest.param((measured(1.0, 10.2, "reset"), truth(1.005, 11.0, "reset")), RESET,
                     (WRITES, None), [], [], id="a-reset-flow"),
        pytest.param((measured(1.0, 12.0, "reset"), truth(1.005, 11.0, "reset")), RESET,
                     (WRITES, None), [], ["learnt of it (reset) 2.000 s later"],
                     id="a-reset-flow-learnt-of-as-the-client-next-sent"),
        pytest.param((measured(1.0, 40.0), truth(1.005, 40.0)), LOST, (WRITES, None), [], [],
                     id="the-node-back-before-the-servers-end-carried-it-on"),
        pytest.param((measured(1.0, None), truth(1.005, None)), LOST, (WRITES, None), [], [],
                     id="the-node-back-to-a-watch-its-server-still-serves"),
        pytest.param((measured(1.0, None), truth(1.005, 17.1)), LOST,
                     (WRITES, {S: [(11.5, 32.0), (18.5, 100.0)]}), [],
                     ["never learnt of it (measured blind)"],
                     id="held-what-the-server-sent-arrived-once-the-node-was-back"),
        pytest.param((measured(1.0, None), truth(1.005, 17.1)), RESET,
                     (WRITES, {S: [(11.5, 32.0), (18.5, 100.0)]}),
                     ["held it on and was never measured blind"], [],
                     id="held-a-reset-flow-delivers-nothing-after-the-reset"),
    ],
)  # fmt: skip
def test_an_end_is_judged_against_the_cut_that_made_it(
    watch, cut, heard, problems, findings
) -> None:
    """`watch`: measured and true; `heard`: the writes acknowledged, the blind spells."""
    (m, t), (writes, blind) = watch, heard
    m = at(m, LB.EXTERNAL, "198.18.0.2:1")
    check = judge([m], [on(t, "198.18.0.2:1")], blind, writes=writes, cuts=[cut])
    assert len(check.problems) == len(problems), check.problems
    for text, said in zip(problems, check.problems, strict=True):
        assert text in said
    assert len(check.findings) == len(findings), check.findings
    for text, said in zip(findings, check.findings, strict=True):
        assert text in said


def test_a_cut_on_another_lb_or_server_is_no_cut() -> None:
    m = at(measured(1.0, 12.0, "closed"), LB.INTERNAL, "198.18.0.2:1")
    t = on(truth(1.005, 11.9, "cut"), "198.18.0.2:1")
    assert not RESET.broke(m, t)
    assert not Cut(OFFSET + 10.0, "b", "master-1's node lost").broke(m, t)
    assert Cut(OFFSET + 10.0, "a", "master-0's apiserver killed").broke(m, t)


def test_a_port_the_router_moved_joins_through_its_transit_flow() -> None:
    """The service network's DNAT (client side) kept the port, the router moved it: two
    hops; localhost's flow, NATed nowhere, the router alone."""
    server = apiserver_id("master-0")
    svc = at(measured(1.0, None, server=server), LB.SERVICE_NETWORK, "198.18.0.2:40000")
    local = at(measured(1.0, None, stream="local", server=server), LB.LOCALHOST,
               "198.18.0.2:40001")  # fmt: skip
    client = [Session(OFFSET + 1.0, "198.18.0.2:40000", "198.18.0.2:40000", "master-0", NAT)]
    transit = [
        Session(OFFSET + 1.0, "198.18.0.2:40000", "198.18.0.2:41000", "master-0", NAT),
        Session(OFFSET + 1.0, "198.18.0.2:40001", "198.18.0.2:42000", "master-0", NAT),
    ]
    ts = [on(truth(1.004, None, server=server), "198.18.0.2:41000"),
          on(truth(1.005, None, server=server), "198.18.0.2:42000")]  # fmt: skip
    joins = Joins({LB.SERVICE_NETWORK: client}, frozenset(), [[], transit])  # the router's hop
    pairs = {
        p.measured.stream: (p.truth, p.way) for p in pair([svc, local], ts, OFFSET, 0.1, joins)
    }
    assert pairs == {S: (ts[0], NAT), "local": (ts[1], NAT)}


def test_a_flow_conntrack_stamped_after_the_head_still_joins() -> None:
    """conntrack stamps a flow when it prints it: on a busy machine after the watch's head
    arrived. Two watches from one port to two VIPs, DNATed to one server: the router kept
    the port of the first and moved the second's, whose flow it printed 0.4 s late. The moved
    one must not take the first's watch by its own address."""
    server = apiserver_id("master-0")
    ext = at(measured(1.0, None, server=server, stream="ext"), LB.EXTERNAL, "198.18.0.2:40000")
    int_ = at(measured(1.0, None, server=server, stream="int"), LB.INTERNAL, "198.18.0.2:40000")
    flows = {
        LB.EXTERNAL: [Session(OFFSET + 0.99, "198.18.0.2:40000", "198.18.0.2:40000",
                              "master-0", NAT)],
        LB.INTERNAL: [Session(OFFSET + 1.5, "198.18.0.2:40000", "198.18.0.2:41000",
                              "master-0", NAT)],
    }  # fmt: skip
    ts = [on(truth(1.004, None, server=server), "198.18.0.2:40000"),
          on(truth(1.005, None, server=server), "198.18.0.2:41000")]  # fmt: skip
    for order in ([int_, ext], [ext, int_]):
        pairs = {p.measured.stream: (p.truth, p.way) for p in pair(order, ts, OFFSET, 0.1,
                                                                   Joins(flows))}  # fmt: skip
        assert pairs == {"ext": (ts[0], NAT), "int": (ts[1], NAT)}


def _local(port: int) -> MeasuredWatch:
    server = apiserver_id("master-0")
    m = measured(1.0, None, stream="local", server=server)
    return at(m, LB.LOCALHOST, f"198.18.0.2:{port}")


def _flow(wall: float, sent: int, seen: int) -> Session:
    return Session(OFFSET + wall, f"198.18.0.2:{sent}", f"198.18.0.2:{seen}", "master-0", NAT)


def test_a_port_the_clients_own_nat_moved_joins_through_both_hops() -> None:
    """localhost's straight flow from a port the service network used before: the client's
    NAT moved it (40001 to 42000), the router carried it as it came. The router's older flow
    from 40001 is no join: each NAT is a hop in the order the flow met them."""
    client = [_flow(0.99, 40001, 42000)]
    router = [_flow(-10.0, 40001, 40001), _flow(0.99, 42000, 42000)]
    ts = [on(truth(1.005, None, server=apiserver_id("master-0")), "198.18.0.2:42000")]
    (paired,) = pair([_local(40001)], ts, OFFSET, 0.1, Joins({}, frozenset(), [client, router]))
    assert (paired.truth, paired.way) == (ts[0], NAT)


def test_a_port_the_router_moved_joins_though_the_client_logged_it_unmoved_later() -> None:
    """Both NATs log every straight flow. The client kept the port and stamped its record
    last; the router moved it: the router's hop decides, not the newest record of the two."""
    client = [_flow(0.995, 40001, 40001)]
    router = [_flow(0.99, 40001, 41000)]
    ts = [on(truth(1.005, None, server=apiserver_id("master-0")), "198.18.0.2:41000")]
    (paired,) = pair([_local(40001)], ts, OFFSET, 0.1, Joins({}, frozenset(), [client, router]))
    assert (paired.truth, paired.way) == (ts[0], NAT)
