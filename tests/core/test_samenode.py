"""Same-node samples: which samples measured the prober's own node, and how the trackers keep
them apart from the LB's (`core.samenode`, `core.trackers`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prober.core.budgets import hairpins
from prober.core.compaction import Compactors
from prober.core.models import (
    LB,
    CheckSettings,
    ErrorClass,
    Interval,
    LBSettings,
    Sample,
    StreamId,
    Window,
)
from prober.core.samenode import Placement
from prober.core.trackers import Trackers
from tests.factories import fail, ok, sample
from tests.support.hairpin import ELB_NEW, ILB_NEW, LOCAL, NODES, ON_MASTER, STREAMS, hairpin_run


def stopped(t: float, stream: StreamId) -> Sample:
    return sample(t, stream=stream, error=ErrorClass.STOPPED)


SAME_NODE = [
    ("answered by its own node through an LB", ON_MASTER, ok(1, stream=ELB_NEW, host="H0"), True),
    ("late, by its own node", ON_MASTER, sample(1, stream=ELB_NEW, host="H0", late=True), True),
    ("answered by another node", ON_MASTER, ok(1, stream=ILB_NEW, host="H1"), False),
    ("answered by a host no Lease names", ON_MASTER, ok(1, stream=ILB_NEW, host="H9"), False),
    ("localhost is the node's path by name", ON_MASTER, ok(1, stream=LOCAL, host="H0"), False),
    ("unanswered through the LB that hairpins", ON_MASTER, fail(1, stream=ILB_NEW), True),
    ("a timeout through it too", ON_MASTER,
     fail(1, ErrorClass.TIMEOUT, stream=ILB_NEW), True),
    ("unanswered through an LB that does not", ON_MASTER, fail(1, stream=ELB_NEW), False),
    ("served without a header: no failure", ON_MASTER,
     sample(1, stream=ILB_NEW, error=ErrorClass.HEADER_MISSING), False),
    ("cut by the stop", ON_MASTER, stopped(1, ILB_NEW), False),
    ("a worker: the hairpin is a master's", Placement("worker-0", NODES, frozenset({LB.INTERNAL})),
     fail(1, stream=ILB_NEW), False),
    ("no node known", Placement(None, NODES, frozenset({LB.INTERNAL})),
     ok(1, stream=ILB_NEW, host="H0"), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("placement", "given", "same"), [c[1:] for c in SAME_NODE], ids=[c[0] for c in SAME_NODE]
)
def test_which_samples_are_same_node(placement: Placement, given: Sample, same: bool) -> None:
    assert placement.same_node(given) is same
    labelled = placement.label(given)
    assert labelled.same_node is same
    assert (labelled is given) is not same  # an unlabelled sample is passed on as it came


def test_the_tables_say_which_lbs_hairpin() -> None:
    assert hairpins("gcp", None) == {LB.INTERNAL}
    assert hairpins("aws", None) == frozenset()
    off = LBSettings(lbs={LB.INTERNAL: CheckSettings(hairpin=False)})
    assert hairpins("gcp", off) == frozenset()
    both = LBSettings(lbs={LB.EXTERNAL: CheckSettings(hairpin=True)})
    assert hairpins("gcp", both) == {LB.INTERNAL, LB.EXTERNAL}
    assert hairpins("openstack", both) == {LB.EXTERNAL}  # no row: the settings alone


def run(samples: list[Sample]) -> list[object]:
    trackers = Trackers(STREAMS, node_of=NODES.get, on_own_node=ON_MASTER.on_own_node)
    out: list[object] = []
    for s in samples:
        out += trackers.feed(s)
    out += trackers.close(40.0, "end")
    return out


def test_same_node_samples_set_nothing_of_the_lbs_windows_or_disruption() -> None:
    out = run([ON_MASTER.label(s) for s in hairpin_run()])
    windows = [w for w in out if isinstance(w, Window)]
    (lb_window,) = [w for w in windows if not w.same_node]
    (mine,) = [w for w in windows if w.same_node]
    assert lb_window.host == mine.host == "H0"
    assert mine.node == "master-0"
    by_stream = {ws.stream_id: ws for ws in lb_window.streams}
    # The internal LB never reached the LB: nothing of it in the LB's window.
    ilb = by_stream[ILB_NEW]
    assert (ilb.late, ilb.reaction, ilb.failures) == (0, None, 0)
    # The external LB's answers from H0 are master-0's own: its late ones are in the same-node
    # window, and its answers from H1 are no misses of H0 either (from master-0, every
    # request the LB sent to H0 is same-node): nothing here bounds its reaction.
    elb = by_stream[ELB_NEW]
    assert (elb.late, elb.reaction, elb.reaction_hi, elb.bound_by) == (0, None, None, None)
    assert by_stream[LOCAL].reaction == pytest.approx(9.9, abs=0.6)  # localhost: as ever
    assert {ws.stream_id for ws in mine.streams} == {ILB_NEW, ELB_NEW}  # never localhost
    same = {ws.stream_id: ws for ws in mine.streams}
    assert same[ILB_NEW].reaction == pytest.approx(9.9, abs=0.6)  # until H0 stopped listening
    assert same[ILB_NEW].failures == 20  # refused while H0 was down
    assert same[ELB_NEW].reaction == pytest.approx(2.4, abs=0.6)  # H0's answers through it
    intervals = [i for i in out if isinstance(i, Interval)]
    assert {(i.stream_id, i.same_node) for i in intervals} == {(ILB_NEW, True), (LOCAL, False)}


def test_a_prober_without_same_node_samples_is_paced_by_its_lb_path_alone() -> None:
    trackers = Trackers(STREAMS, node_of=NODES.get)
    for s in [ok(1, stream=ELB_NEW, host="H0"), sample(2, stream=ELB_NEW, host="H0", late=True)]:
        trackers.feed(s)
    lb = trackers.lb.shutdown
    name = ELB_NEW.name
    assert trackers.calm(name) == (lb.settled(name), lb.rests(name))
    assert trackers.calm(name)[0] is False  # late, and nothing bounds it yet
    assert trackers.calm(ILB_NEW.name) == (lb.settled(ILB_NEW.name), lb.rests(ILB_NEW.name))


def test_a_stream_rests_only_where_every_unsettled_path_lets_it() -> None:
    trackers = Trackers(STREAMS, node_of=NODES.get)
    # Same-node: H0 late through the internal LB, which only ever showed H0: it rests until
    # the delay it announced is nearly over.
    for s in [ok(1, stream=ILB_NEW, host="H0"), sample(2, stream=ILB_NEW, host="H0", late=True,
                                                          delay=30)]:  # fmt: skip
        trackers.feed(ON_MASTER.label(s))
    name = ILB_NEW.name
    settled, rests = trackers.calm(name)
    assert not settled
    assert rests == trackers.same_node.shutdown.rests(name)
    assert rests is not None
    assert rests[1] == pytest.approx(1 + 30, abs=1.1)


@st.composite
def labelled_requests(draw: st.DrawFn) -> Sample:
    t = draw(st.floats(0, 60, allow_nan=False))
    stream = draw(st.sampled_from(STREAMS))
    kw = {"stream": stream, "dur": draw(st.floats(0.001, 2)), "delay": 10.0}
    kind = draw(st.sampled_from(["ok", "ready", "late", "fail"]))
    host = draw(st.sampled_from(["H0", "H1"]))
    if kind == "ok":
        made = ok(t, **kw)
    elif kind == "ready":
        made = sample(t, host=host, **kw)
    elif kind == "late":
        made = sample(t, host=host, late=True, elapsed=draw(st.integers(0, 12)), **kw)
    else:
        made = fail(t, draw(st.sampled_from(list(ErrorClass))), **kw)
    return ON_MASTER.label(made)


def replay(samples: list[Sample], compactors: Compactors | None = None):
    trackers = Trackers(STREAMS, node_of=NODES.get, on_own_node=ON_MASTER.on_own_node)
    outputs, kept = [], []
    for s in samples:
        events = trackers.feed(s)
        outputs += events
        if compactors is not None:
            kept += compactors.select(s, events, trackers)
    outputs += trackers.close(100.0, "end")
    return outputs, kept


@settings(max_examples=200, deadline=None)
@given(st.lists(labelled_requests(), max_size=100))
def test_replaying_the_kept_samples_of_both_paths_gives_the_same_records(requests) -> None:
    samples = sorted(requests, key=lambda s: s.end)  # completion order
    live, kept = replay(samples, Compactors())
    assert replay(kept)[0] == live
    assert len({s.audit_id for s in kept}) == len(kept)  # nothing written twice


def test_a_witness_of_one_path_is_never_written_for_the_other() -> None:
    # Found by the property above, when one compactor served both paths: the LB path's newest
    # success was written again as the same-node interval's witness.
    samples = [ok(0, stream=ILB_NEW, dur=1.0) for _ in range(8)]
    samples += [sample(0, stream=ILB_NEW, dur=1.0, host="H0", late=True, delay=10)]
    samples += [fail(0, ErrorClass.TIMEOUT, stream=ILB_NEW, dur=1.0)]
    samples = [ON_MASTER.label(s) for s in samples]
    live, kept = replay(samples, Compactors())
    assert replay(kept)[0] == live
    assert len({s.audit_id for s in kept}) == len(kept)
    assert all(s.same_node for s in kept)  # the LB path's plain successes moved nothing
