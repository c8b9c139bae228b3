"""The handler chain without sockets: paths, authentication, the shutdown header, the
shutdown filters in both modes, audit annotations and metrics, under a manual clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from prober.core.header import apiserver_id, find_header, parse_shutdown_header
from prober.core.truthlog import LateConnection, of_kind
from prober.fakeapiserver.app import Application, ConnInfo, Response
from prober.fakeapiserver.audit import AuditLog
from prober.fakeapiserver.events import RequestStarted
from prober.fakeapiserver.lifecycle import Lifecycle, Timing
from prober.fakeapiserver.options import ApiServerOptions
from prober.fakeapiserver.truth import TruthLog
from tests.fakeapiserver.test_lifecycle import RecordingDrainer
from tests.support.apiservers import TOKEN
from tests.support.clock import FakeClock

AUTH = [("authorization", f"Bearer {TOKEN}")]
ASK = [("x-openshift-if-disruption", "true")]


@dataclass
class Harness:
    app: Application
    clock: FakeClock
    lifecycle: Lifecycle
    audit_path: Path
    truth: TruthLog
    _task: asyncio.Task[None] | None = None

    def request(
        self,
        target: str,
        headers: list[tuple[str, str]] | None = None,
        method: str = "GET",
        conn: ConnInfo | None = None,
    ) -> Response:
        conn = conn or self.conn()
        event = RequestStarted(1, method, target, headers or [], "api.lab:6443", True)
        exchange = self.app.start(conn, event)
        return exchange.early or self.app.finish(exchange)

    def conn(self, protocol: str = "h1", peer: str = "127.0.0.1") -> ConnInfo:
        mono = self.clock.monotonic()
        return ConnInfo(7, peer, 5555, True, mono, self.lifecycle.is_late(mono), protocol)

    def audit_events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]

    async def stop_accepting(self) -> None:
        """Run the lifecycle into its NotAcceptingNewRequest phase and hold it there."""
        drainer = RecordingDrainer(self.clock)
        drainer.idle.clear()  # a request stays in flight
        self._task = asyncio.create_task(self.lifecycle.run(drainer))
        self.lifecycle.initiate("api")
        await self.clock.advance(self.lifecycle.timing.delay)
        assert self.lifecycle.not_accepting


MakeHarness = Callable[..., Harness]


@pytest.fixture
def make_harness(base_options: ApiServerOptions, tmp_path: Path) -> Iterator[MakeHarness]:
    made: list[Harness] = []

    def make(**changes: Any) -> Harness:
        options = replace(base_options, **changes)
        clock = FakeClock(start=500.0)
        truth = TruthLog(None, clock, options.hostname, options.apiserver_id, keep=True)
        timing = Timing(options.shutdown_delay, options.send_retry_after)
        lifecycle = Lifecycle(timing, clock, lambda *_: None)
        audit_path = tmp_path / f"audit{len(made)}.log"
        audit = AuditLog(audit_path, wall=clock.wall)
        app = Application(options, lifecycle, clock, truth, audit=audit)
        made.append(Harness(app, clock, lifecycle, audit_path, truth))
        return made[-1]

    yield make
    for harness in made:
        if harness.app.audit is not None:
            harness.app.audit.close()
        if harness._task is not None:
            harness._task.cancel()


@pytest.fixture
def harness(make_harness: MakeHarness) -> Harness:
    return make_harness()


def header(response: Response, name: str) -> str | None:
    return find_header(response.headers, name)


def test_every_response_names_the_backend_and_connection(harness: Harness) -> None:
    response = harness.request("/readyz")
    assert (response.status, response.body) == (200, b"ok")
    assert header(response, "x-backend") == "master-0"
    assert header(response, "x-connection-id") == "7"
    assert header(response, "Audit-Id")
    assert header(response, "X-OpenShift-Disruption") is None, "only when asked for"


@pytest.mark.parametrize(
    ("target", "headers", "status", "body_start"),
    [
        ("/readyz", [], 200, b"ok"),
        ("/livez", [], 200, b"ok"),
        ("/healthz", [], 200, b"ok"),
        ("/readyz?verbose", [], 200, b"[+]ping ok\n"),
        ("/readyz/shutdown", [], 200, b"ok"),
        ("/readyz/nope", [], 404, b'{"kind":"Status"'),
        ("/version", [], 200, b'{"major":"1","minor":"29"'),
        ("/api/v1/namespaces/default", AUTH, 200, b'{"kind":"Namespace"'),
        ("/api/v1/namespaces", AUTH, 200, b'{"kind":"NamespaceList"'),
        ("/api/v1/namespaces/kube-system", AUTH, 404, b'{"kind":"Status"'),
        ("/metrics", AUTH, 200, b"# HELP apiserver_request_total"),
        ("/apis/nothing", AUTH, 404, b'{"kind":"Status","apiVersion":"v1","metadata":{}'),
        ("/api/v1/namespaces/default", [], 401, b'{"kind":"Status"'),
        ("/metrics", [], 401, b'{"kind":"Status"'),
        ("/readyz", [("authorization", "Bearer wrong")], 401, b'{"kind":"Status"'),
        ("/api/v1/namespaces/default", [("authorization", "Bearer wrong")], 401, b"{"),
    ],
)
def test_paths_and_authentication(
    harness: Harness, target: str, headers: list, status: int, body_start: bytes
) -> None:
    response = harness.request(target, headers)
    assert response.status == status
    assert response.body.startswith(body_start)
    if status == 401:
        assert json.loads(response.body)["reason"] == "Unauthorized"


def test_without_a_token_file_everyone_is_served(make_harness: MakeHarness) -> None:
    harness = make_harness(tokens=None)
    assert harness.request("/api/v1/namespaces/default").status == 200


async def test_the_shutdown_header_before_and_during_shutdown(harness: Harness) -> None:
    value = header(harness.request("/readyz", ASK), "X-OpenShift-Disruption")
    host = apiserver_id("master-0")
    assert value == f"shutdown=false shutdown-delay-duration=10s elapsed=0s host={host}"
    harness.lifecycle.initiate("api")
    await harness.clock.advance(6.6)
    response = harness.request("/api/v1/namespaces/default", ASK + AUTH)
    value = header(response, "X-OpenShift-Disruption")
    assert value == f"shutdown=true shutdown-delay-duration=10s elapsed=7s host={host}"
    assert parse_shutdown_header(value).elapsed == 7.0
    assert ("X-Openshift-Disruption", value) in response.headers, "Go's canonical name on h1"


def test_readyz_fails_at_once_with_the_upstream_body_while_others_are_served(
    harness: Harness,
) -> None:
    harness.lifecycle.initiate("api")
    readyz = harness.request("/readyz")
    assert readyz.status == 500
    lines = readyz.body.decode().splitlines()
    assert lines[-2:] == ["[-]shutdown failed: reason withheld", "readyz check failed"]
    assert all(line.startswith("[+]") for line in lines[:-2])
    assert harness.request("/readyz/shutdown").body == b"internal server error: reason withheld\n"
    assert harness.request("/livez").status == 200
    assert harness.request("/healthz").status == 200
    assert harness.request("/api/v1/namespaces/default", AUTH).status == 200


async def test_retry_after_mode_answers_429_with_connection_close(harness: Harness) -> None:
    await harness.stop_accepting()
    response = harness.request("/api/v1/namespaces/default", AUTH)
    assert response.status == 429
    assert header(response, "Retry-After") == "5"
    assert response.body == b"The apiserver is shutting down, please try again later.\n"
    assert response.close_reason == "retry-after"
    watch = harness.request("/api/v1/namespaces?watch=true", AUTH)
    assert watch.status == 429, "WithRetryAfter does not exempt long-running requests"
    for path in ("/readyz", "/livez", "/healthz", "/metrics"):
        assert harness.request(path, AUTH).status in (200, 500), path
    own = harness.request("/api/v1/namespaces/default", [("user-agent", "kube-apiserver/v1.29")])
    assert own.status == 401, "its own requests pass the filter (and then need a token)"
    assert all(e["responseStatus"]["code"] != 429 for e in harness.audit_events())


async def test_no_retry_after_mode_answers_503_retry_after_1(make_harness: MakeHarness) -> None:
    harness = make_harness(send_retry_after=False)
    await harness.stop_accepting()
    response = harness.request("/api/v1/namespaces/default", AUTH)
    assert response.status == 503
    assert header(response, "Retry-After") == "1"
    assert json.loads(response.body)["message"] == "apiserver is shutting down"
    assert response.close_reason == "keep-alive-disabled"
    assert harness.request("/api/v1/namespaces?watch=true", AUTH).status == 200, "long-running"


async def test_shutdown_annotation_on_requests_after_shutdown_started(harness: Harness) -> None:
    harness.request("/readyz")
    harness.lifecycle.initiate("api")
    await harness.clock.advance(8.5)
    harness.request("/api/v1/namespaces/default", AUTH)
    before, after = harness.audit_events()
    assert "apiserver.k8s.io/shutdown" not in before.get("annotations", {})
    assert after["annotations"]["apiserver.k8s.io/shutdown"] == (
        "elapsed=8.5s threshold=85% late=true self=false loopback=true"
    )


def test_the_shutdown_annotation_can_be_turned_off(make_harness: MakeHarness) -> None:
    harness = make_harness(shutdown_annotation=False)
    harness.lifecycle.initiate("api")
    harness.request("/api/v1/namespaces/default", AUTH)
    assert "apiserver.k8s.io/shutdown" not in harness.audit_events()[0]["annotations"]


async def test_late_connections_are_annotated_counted_and_reported(harness: Harness) -> None:
    early = harness.conn()
    harness.lifecycle.initiate("api")
    await harness.clock.advance(8.01)
    late = harness.conn(peer="10.0.0.9")
    assert late.late
    assert not early.late
    harness.request("/api/v1/namespaces/default", AUTH, conn=early)
    harness.request("/api/v1/namespaces/default", AUTH, conn=late)
    harness.request("/readyz", conn=late)
    events = harness.audit_events()
    assert "openshift.io/during-graceful" not in events[0]["annotations"]
    assert events[1]["annotations"]["openshift.io/during-graceful"] == (
        "loopback=false,api.lab:6443,readyz=false"
    )
    metrics = harness.request("/metrics", AUTH, conn=early).body.decode()
    assert "\napiserver_request_late_graceful_termination_total 2\n" in metrics
    late_records = of_kind(harness.truth.records or [], LateConnection)
    assert len(late_records) == 1, "one LateConnections record per connection"


def test_audit_events_have_the_audit_k8s_io_v1_fields(harness: Harness) -> None:
    harness.request(
        "/api/v1/namespaces/default",
        [
            *AUTH,
            ("audit-id", "abc-123"),
            ("user-agent", "prober/1"),
            ("x-forwarded-for", "10.1.2.3"),
        ],
    )
    harness.request("/api/v1/namespaces/default")
    ok, denied = harness.audit_events()
    assert ok == {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "abc-123",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/default",
        "verb": "get",
        "user": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "sourceIPs": ["10.1.2.3", "127.0.0.1"],
        "userAgent": "prober/1",
        "objectRef": {"resource": "namespaces", "name": "default", "apiVersion": "v1"},
        "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": "2023-11-14T22:21:40.000000Z",
        "stageTimestamp": "2023-11-14T22:21:40.000000Z",
        "annotations": {
            "authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": "",
        },
    }
    assert denied["stage"] == "ResponseStarted"
    assert denied["user"] == {}
    assert denied["responseStatus"]["code"] == 401


@pytest.mark.parametrize(
    ("target", "verb", "object_ref"),
    [
        ("/api/v1/namespaces", "list", {"resource": "namespaces", "apiVersion": "v1"}),
        (
            "/api/v1/namespaces?watch=1",
            "watch",
            {"resource": "namespaces", "apiVersion": "v1"},
        ),
        ("/healthz", "get", None),
        (
            "/api/v1/namespaces/default/pods/p",
            "get",
            {"resource": "pods", "namespace": "default", "name": "p", "apiVersion": "v1"},
        ),
    ],
)
def test_audit_verbs_and_object_refs(harness: Harness, target, verb, object_ref) -> None:
    harness.request(target, AUTH)
    event = harness.audit_events()[0]
    assert event["verb"] == verb
    assert event.get("objectRef") == object_ref


def test_goaway_chance_only_on_http2(make_harness: MakeHarness) -> None:
    harness = make_harness(goaway_chance=0.02)
    h1 = [harness.request("/readyz", conn=harness.conn("h1")).close_reason for _ in range(300)]
    h2 = [harness.request("/readyz", conn=harness.conn("h2")).close_reason for _ in range(300)]
    assert set(h1) == {None}
    assert "goaway-chance" in h2
    assert h2.count("goaway-chance") < 30


def test_admin_endpoint_starts_shutdown(harness: Harness) -> None:
    started: list[str] = []
    harness.app._on_admin_shutdown = lambda: started.append("admin") or True
    assert harness.request("/_lab/shutdown", method="POST").status == 401
    response = harness.request("/_lab/shutdown", AUTH, method="POST")
    assert (response.status, json.loads(response.body)) == (
        202,
        {"shutdown": True, "started": True},
    )
    assert started == ["admin"]
    assert harness.audit_events() == [], "the lab's own endpoints are not audited"
