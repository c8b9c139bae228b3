"""One line at a time: what is an audit event, what is late, what is bad."""

from __future__ import annotations

import json

import pytest

from prober.audit.event import (
    DURING_GRACEFUL,
    SHUTDOWN,
    TOO_LONG,
    LateRequest,
    Problems,
    Scanner,
    ScanStats,
    SeenIds,
    parse_shutdown_annotation,
    user_agent_product,
)
from tests.support.auditlog import KUBELET, T0, event, graceful, line, shutdown


def scan(*lines: bytes | object) -> tuple[list[LateRequest], ScanStats, Problems]:
    problems = Problems()
    scanner = Scanner(SeenIds(), problems)
    stats = ScanStats()
    late = [scanner.scan(ln, "master-0", stats, lambda: "f:1") for ln in lines]  # type: ignore[arg-type]
    return [x for x in late if x is not None], stats, problems


@pytest.mark.parametrize(
    ("annotations", "late", "which"),
    [
        (graceful(), True, DURING_GRACEFUL),
        (graceful(loopback=True), True, DURING_GRACEFUL),
        # The value only describes the connection: presence is the verdict.
        ({DURING_GRACEFUL: "something else"}, True, DURING_GRACEFUL),
        (shutdown(late=True), True, SHUTDOWN),
        (shutdown(elapsed="5s", threshold=7, late=False), False, None),
        (shutdown(threshold=85, late=None), True, SHUTDOWN),
        (shutdown(threshold=80, late=None), False, None),
        (shutdown(threshold=81, late=None), True, SHUTDOWN),
        ({}, False, None),
    ],
)
def test_which_requests_are_late(annotations: dict[str, str], late: bool, which: str | None):
    found, stats, _ = scan(line(event(annotations=annotations)))
    assert stats.events == 1
    assert bool(found) is late
    if late:
        assert found[0].annotation == which


def test_a_late_request_carries_who_sent_it_and_when():
    body = event(
        12.5,
        verb="list",
        uri="/api/v1/pods?limit=500",
        resource="pods",
        user="system:serviceaccount:openshift-monitoring:prometheus-k8s",
        source_ips=["10.128.0.7", "10.0.0.2"],
        annotations=graceful(peer="10.0.0.2"),
    )
    (late,), _, _ = scan(line(body))
    assert late.audit_id == body["auditID"]
    assert late.user_agent == KUBELET
    assert late.source_ip == "10.128.0.7"  # the original client, first in sourceIPs
    assert late.user == "system:serviceaccount:openshift-monitoring:prometheus-k8s"
    assert late.verb == "list"
    assert late.resource == "pods"
    assert late.received == pytest.approx(T0 + 12.5)
    assert late.peer == "10.0.0.2"
    assert late.loopback is False


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"userAgent": None}, "user_agent", None),
        ({"sourceIPs": []}, "source_ip", None),
        ({"user": {}}, "user", None),
        ({"objectRef": None, "requestURI": "/readyz?verbose"}, "resource", "/readyz"),
        ({"objectRef": {"resource": "pods", "subresource": "log"}}, "resource", "pods/log"),
        ({"requestReceivedTimestamp": None}, "received", T0 + 0.004),  # stageTimestamp
        ({"requestReceivedTimestamp": "yesterday", "stageTimestamp": 3}, "received", None),
        ({"verb": 7}, "verb", None),
    ],
)
def test_missing_or_odd_fields_are_null_not_fatal(changes, field, expected):
    body = event(annotations=graceful())
    for key, value in changes.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    (late,), stats, _ = scan(line(body))
    value = getattr(late, field)
    assert value == (pytest.approx(expected) if isinstance(expected, float) else expected)
    assert stats.bad_lines == 0


@pytest.mark.parametrize(
    "api_version", ["audit.k8s.io/v1", "audit.k8s.io/v1beta1", "audit.k8s.io/v1alpha1"]
)
def test_other_audit_api_versions_are_read(api_version: str):
    body = event(3.0, api_version=api_version, annotations=shutdown())
    if api_version == "audit.k8s.io/v1alpha1":
        del body["requestReceivedTimestamp"]  # v1alpha1 had only `timestamp`
        body["timestamp"] = body["stageTimestamp"]
    (late,), stats, _ = scan(line(body))
    assert stats.api_versions == {api_version: 1}
    assert late.received is not None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json at all", "not_json"),
        (b"\xff\xfe\x00garbage\x9c\x80", "not_utf8"),
        (b"", "blank"),
        (b"   \r", "blank"),
        (b"[1, 2, 3]", "not_an_event"),
        (b'{"kind": "Event", "apiVersion": "v1", "reason": "ShutdownInitiated"}', "not_an_event"),
        (b'{"kind": "Event"}', "not_an_event"),
        (b"[" * 100_000, "not_json"),  # deeper than the parser recurses
        (b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"x"', "not_json"),
        (TOO_LONG, "too_long"),
    ],
)
def test_bad_lines_are_counted_by_reason_and_reported(raw, reason):
    found, stats, problems = scan(raw, line(event(annotations=graceful())))
    assert len(found) == 1  # the good line after it still counts
    assert stats.events == 1
    assert dict(stats.bad) == {reason: 1}
    assert problems.kept == [f"f:1: {reason.replace('_', ' ')}"]


def test_an_annotation_the_apiserver_cannot_write_is_counted_not_taken_as_late():
    body = event(annotations={SHUTDOWN: "elapsed=10s nonsense"})
    found, stats, problems = scan(line(body))
    assert found == []
    assert stats.invalid_annotations == 1
    assert "is not key=value" in problems.kept[0]


def test_stages_of_one_request_count_once():
    aid = "0b5a2f0e-1111-4222-8333-444455556666"
    started = event(1.0, stage="ResponseStarted", aid=aid, verb="watch", annotations=graceful())
    complete = event(1.0, stage="ResponseComplete", aid=aid, verb="watch", annotations=graceful())
    other = event(2.0, annotations=graceful())
    found, stats, _ = scan(line(started), line(complete), line(other))
    assert stats.events == 3
    assert [f.audit_id for f in found] == [aid, other["auditID"]]


def test_seen_ids_forget_the_oldest_past_capacity():
    seen = SeenIds(capacity=2)
    assert [seen.first_time(i) for i in "abca"] == [True, True, True, True]
    assert seen.ids() == ["c", "a"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("elapsed=1m5s threshold=93% late=true self=false loopback=true", (True, True)),
        ("elapsed=1s threshold=1% late=false self=false loopback=false", (False, False)),
        ("elapsed=1m threshold=90%", (True, None)),
    ],
)
def test_parse_shutdown_annotation(value, expected):
    assert parse_shutdown_annotation(value) == expected


@pytest.mark.parametrize(
    ("agent", "product"),
    [
        (KUBELET, "kubelet"),
        ("kube-apiserver/v1.29.0 (linux/amd64) kubernetes/abc", "kube-apiserver"),
        ("Go-http-client/2.0", "Go-http-client"),
        ("curl/8.5.0", "curl"),
        ("oc/4.16.0 (linux/amd64) kubernetes/abc/system:serviceaccount:x", "oc"),
        ("Mozilla 5.0", "Mozilla"),
        ("a{b}=c/1", "abc"),  # label-unsafe characters dropped
        ("", "unknown"),
        (None, "unknown"),
        ("/1.0", "unknown"),
    ],
)
def test_user_agent_product(agent, product):
    assert user_agent_product(agent) == product


def test_the_fixture_is_a_real_shaped_event():
    body = json.loads(line(event()))
    assert set(body) >= {
        "kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user",
        "sourceIPs", "userAgent", "objectRef", "responseStatus", "requestReceivedTimestamp",
        "stageTimestamp", "annotations",
    }  # fmt: skip
