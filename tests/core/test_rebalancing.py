"""The kept HTTP/2 answers by apiserver, counted live for the summaries (`core.rebalancing`)."""

from __future__ import annotations

import dataclasses

import pytest

from prober.core.models import LB, Connection, ErrorClass, Protocol, Replacement, StreamId
from prober.core.rebalancing import MAX_HOSTS, OTHER_HOSTS, KeptAnswers
from tests.factories import sample

KEPT = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.REUSED)
FRESH = StreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, Connection.NEW)
HTTP1 = StreamId("kube-api", Protocol.HTTP1, LB.INTERNAL, Connection.REUSED)
DIRECT = StreamId("kube-api", Protocol.HTTP2, LB.LOCALHOST, Connection.REUSED)


def kept(t: float, host: str | None, port: int, **changes: object):
    return dataclasses.replace(sample(t, stream=KEPT, host=host), local_port=port, **changes)


@pytest.mark.parametrize(
    ("case", "samples", "answers", "connections"),
    [
        ("answers by host", [kept(0, "a", 1), kept(1, "b", 2), kept(2, "a", 1)],
         {"a": 2, "b": 1}, 2),
        ("a late answer is its server's too", [kept(0, "a", 1), kept(1, "a", 1)],
         {"a": 2}, 1),
        ("no header: a connection, no answer", [kept(0, None, 1)], {}, 1),
        ("a replaced connection leaves the pool",
         [kept(0, "a", 1), kept(1, "b", 2, replaced=Replacement.CLOSED, replaced_port=1)],
         {"a": 1, "b": 1}, 1),
        ("a fresh stream is not counted", [dataclasses.replace(sample(0, stream=FRESH,
         host="a"), local_port=1)], {}, 0),
        ("an HTTP/1.1 kept stream is not counted", [dataclasses.replace(sample(0, stream=HTTP1,
         host="a"), local_port=1)], {}, 0),
        ("localhost has no LB to balance", [dataclasses.replace(sample(0, stream=DIRECT,
         host="a"), local_port=1)], {}, 0),
        ("a same-node answer is not the LB's", [kept(0, "a", 1, same_node=True)], {}, 0),
        ("a stopped request sampled nothing",
         [kept(0, None, 1, error=ErrorClass.STOPPED, status=None)], {}, 0),
    ],
)  # fmt: skip
def test_kept_answers(case, samples, answers, connections):
    tracker = KeptAnswers()
    for each in samples:
        tracker.feed(each)
    stream = samples[0].stream
    assert tracker.answers(stream) == answers, case
    assert tracker.connections(stream) == connections, case


def test_hosts_past_the_limit_are_counted_together():
    tracker = KeptAnswers()
    for index in range(MAX_HOSTS + 3):
        tracker.feed(kept(index, f"host-{index:03d}", 1))
    answers = tracker.answers(KEPT.name)
    assert len(answers) == MAX_HOSTS + 1
    assert answers[OTHER_HOSTS] == 3
    assert sum(answers.values()) == MAX_HOSTS + 3
