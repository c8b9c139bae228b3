"""Readiness going true: the post-start hooks fail the health checks until they finish, and
in the early-ready mode (openshift/kubernetes #2730) /readyz says ok while every other
request gets a 500, a 403 or no answer at all. Real TLS sockets, httpx and a raw HTTP/2
client; a manual clock, so every phase is reached exactly, without waiting for it."""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import httpx
import pytest
from hyperframe.frame import RstStreamFrame

from prober.core.header import RESPONSE_HEADER, ShutdownHeader, parse_shutdown_header
from prober.core.truthlog import (
    EarlyAnswered,
    LeaseWritten,
    Listening,
    Ready,
    Serving,
    StartupInstant,
    TruthRecord,
    of_kind,
)
from prober.fakeapiserver.options import EarlyAnswer
from prober.lab.infra.etcd import LabEtcd
from tests.fakeapiserver.rawclient import RawH2
from tests.support.apiservers import (
    TOKEN,
    LabCerts,
    Running,
    StartServer,
    read_audit,
    running_client,
)
from tests.support.waiting import until

API = "/api/v1/namespaces/default"
HEADERS = {"X-Openshift-If-Disruption": "true", "Authorization": f"Bearer {TOKEN}"}
H2_HEADERS = [(k.lower(), v) for k, v in HEADERS.items()]
HOOK = "poststarthook/start-kube-apiserver-identity-lease-controller"
R = TypeVar("R", bound=TruthRecord)


def client(
    running: Running, certs: LabCerts, http2: bool = False
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return running_client(running, certs, HEADERS, http2=http2)


def records(running: Running, kind: type[R]) -> list[R]:
    return of_kind(running.server.truth.records or [], kind)


def early(running: Running, audit_id: str) -> EarlyAnswered | None:
    return next(
        (r for r in records(running, EarlyAnswered) if r.request.audit_id == audit_id), None
    )


def audited(running: Running) -> dict[str, dict[str, Any]]:
    audit_log = running.server.options.audit_log
    assert audit_log is not None
    return {e["auditID"]: e for e in read_audit(audit_log)}


async def test_health_checks_fail_until_the_post_start_hooks_finish(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server(manual_clock=True, post_start_hooks=5.0, livez_grace=2.0)
    clock = running.clock
    assert clock is not None
    async with client(running, certs) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 500
        assert f"[-]{HOOK} failed: reason withheld\n" in ready.text
        assert ready.text.endswith("[+]shutdown ok\nreadyz check failed\n")
        assert (await http.get(f"/readyz/{HOOK}")).status_code == 500
        assert (await http.get("/readyz/ping")).text == "ok"
        healthz = await http.get("/healthz")
        assert healthz.status_code == 500
        assert healthz.text.endswith(f"[-]{HOOK} failed: reason withheld\nhealthz check failed\n")
        assert (await http.get("/livez")).text == "ok"  # within --livez-grace-period
        # Everything else is served while the hooks run, as upstream serves it.
        served = await http.get(API)
        assert served.status_code == 200
        host = running.server.apiserver_id
        assert parse_shutdown_header(served.headers[RESPONSE_HEADER]) == ShutdownHeader(
            False, 10.0, 0.0, host
        )

        await clock.advance(2.0)
        livez = await http.get("/livez")
        assert livez.status_code == 500
        assert livez.text.endswith("livez check failed\n")

        await clock.advance(3.0)
        for path in ("/readyz", "/healthz", "/livez"):
            answer = await http.get(path)
            assert (answer.status_code, answer.text) == (200, "ok"), path

    (listening,) = records(running, Listening)
    (serving,), (ready,) = records(running, Serving), records(running, Ready)
    instants = [
        r.KIND for r in records(running, TruthRecord) if isinstance(r, Listening | StartupInstant)
    ]
    assert instants == ["listening", "serving", "ready"]
    assert listening.holder == serving.holder == ready.holder == running.server.holder
    assert listening.holder.startswith(host + "_")
    assert (listening.early_ready, listening.early_answer) == (0.0, "500")
    assert serving.mono == listening.mono
    assert ready.mono == listening.mono + 5.0


async def test_ready_waits_for_the_identity_lease_under_the_new_holder(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    await running.server.startup.wait("ready")
    events = [r.KIND for r in records(running, TruthRecord)]
    (lease, *_) = [r for r in records(running, LeaseWritten) if r.verb == "identity"]
    assert events.index("lease_written") < events.index("ready")
    (ready,) = records(running, Ready)
    assert lease.holder == ready.holder == running.server.holder
    async with client(running, certs) as http:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease.name}"
        assert (await http.get(path)).json()["spec"]["holderIdentity"] == running.server.holder


FORBIDDEN = (
    'namespaces "default" is forbidden: User "system:admin" cannot get resource "namespaces" '
    'in API group "" in the namespace "default"'
)


@pytest.mark.parametrize(
    "mode",
    [
        (EarlyAnswer.ERROR, 500, "InternalError", "Internal error occurred: "),
        (EarlyAnswer.FORBIDDEN, 403, "Forbidden", FORBIDDEN),
    ],
    ids=["500", "403"],
)
async def test_early_ready_says_ok_and_answers_what_it_cannot_serve(
    start_server: StartServer, certs: LabCerts, mode: tuple[EarlyAnswer, int, str, str]
) -> None:
    answer, status, reason, message = mode
    running = await start_server(
        manual_clock=True, post_start_hooks=1.0, early_ready=10.0, early_answer=answer
    )
    clock, host = running.clock, running.server.apiserver_id
    assert clock is not None
    async with client(running, certs) as h1, client(running, certs, http2=True) as h2:
        assert (await h1.get("/readyz")).status_code == 500  # the hooks run
        first = await h1.get(API, headers={"Audit-ID": "before-ready"})
        assert first.status_code == status

        await clock.advance(1.0)
        for path in ("/readyz", "/livez", "/healthz"):
            assert (await h2.get(path)).text == "ok", path
        for name, http in (("early-h1", h1), ("early-h2", h2)):
            response = await http.get(API, headers={"Audit-ID": name})
            assert response.status_code == status, name
            body = response.json()
            assert (body["kind"], body["reason"], body["code"]) == ("Status", reason, status)
            assert body["message"].startswith(message)
            # The filter that adds the header wraps the whole chain, authorization included.
            assert parse_shutdown_header(response.headers[RESPONSE_HEADER]) == ShutdownHeader(
                False, 10.0, 0.0, host
            )
        # Authentication works: a bad token is refused as ever.
        refused = await h1.get(API, headers={"Authorization": "Bearer nope", "Audit-ID": "bad"})
        assert refused.status_code == 401

        await clock.advance(10.0)
        assert (await h1.get(API, headers={"Audit-ID": "serving"})).status_code == 200

    (ready,), (serving,) = records(running, Ready), records(running, Serving)
    assert serving.mono == ready.mono + 10.0
    before, *after = (early(running, a) for a in ("before-ready", "early-h1", "early-h2"))
    assert before is not None
    assert not before.request.after_ready
    for record, protocol in zip(after, ("h1", "h2"), strict=True):
        assert record is not None
        assert record.request.after_ready
        assert record.request.protocol == protocol
        assert (record.answer, record.status, record.how) == (answer.value, status, "answered")
        assert record.request.path == API
        assert record.request.received <= record.wall
    assert early(running, "bad") is None
    assert early(running, "serving") is None
    logged = audited(running)
    for audit_id in ("before-ready", "early-h1", "early-h2"):
        entry = logged[audit_id]
        assert entry["responseStatus"]["code"] == status
        assert entry["responseStatus"]["reason"] == reason
        decision = "forbid" if status == 403 else "allow"
        assert entry["annotations"]["authorization.k8s.io/decision"] == decision
    assert logged["serving"]["responseStatus"]["code"] == 200


async def test_early_ready_hangs_until_the_client_gives_up_or_the_timeout(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server(
        manual_clock=True, early_ready=10.0, early_answer=EarlyAnswer.HANG, request_timeout=30.0
    )
    clock, server, early_answers = running.clock, running.server, running.server.app.early
    assert clock is not None
    assert early_answers is not None
    await server.startup.wait("ready")

    def held() -> int:
        return early_answers.holding

    raw = await RawH2.connect(running.ports.port, certs.ca)
    gives_up = await raw.request(API, [*H2_HEADERS, ("audit-id", "gives-up-h2")])
    times_out = await raw.request(API, [*H2_HEADERS, ("audit-id", "times-out")])
    async with client(running, certs) as h1:
        given_up = asyncio.create_task(h1.get(API, headers={"Audit-ID": "gives-up-h1"}))
        await until(lambda: held() == 3, "three requests held")
        # The clients give up: HTTP/2 resets the stream, HTTP/1.1 closes the connection.
        await raw.send(RstStreamFrame(gives_up, error_code=8))
        given_up.cancel()
        await until(lambda: held() == 1, "two requests given up")
        assert raw.streams[gives_up].status is None

        await clock.advance(10.0)  # serving now; what it holds stays held
        assert (await h1.get(API, headers={"Audit-ID": "served"})).status_code == 200
        assert raw.streams[times_out].status is None
        await clock.advance(20.0)  # the request timeout
        await raw.read_until(lambda c: c.streams[times_out].ended)
        stream = raw.streams[times_out]
        assert stream.status == 504
        assert json.loads(stream.body)["reason"] == "Timeout"
        assert stream.headers["x-openshift-disruption"].startswith("shutdown=false ")

    await raw.close()

    expected = {
        "gives-up-h2": (None, "client-gone"),
        "gives-up-h1": (None, "client-gone"),
        "times-out": (504, "timeout"),
    }
    for audit_id, (status, how) in expected.items():
        record = early(running, audit_id)
        assert record is not None, audit_id
        assert (record.answer, record.status, record.how) == ("hang", status, how)
        assert record.request.after_ready
    assert early(running, "served") is None
    logged = audited(running)
    assert logged["times-out"]["responseStatus"]["code"] == 504
    assert not {"gives-up-h2", "gives-up-h1"} & set(logged)  # never answered


async def test_a_hang_the_server_holds_when_it_stops_is_cut(
    start_server: StartServer, certs: LabCerts
) -> None:
    running = await start_server(manual_clock=True, early_ready=10.0, early_answer=EarlyAnswer.HANG)
    early_answers = running.server.app.early
    assert early_answers is not None
    async with client(running, certs) as http:
        request = asyncio.create_task(http.get(API, headers={"Audit-ID": "cut"}))
        await until(lambda: early_answers.holding, "a request held")
        await running.server.kill()
        with pytest.raises(httpx.TransportError):
            await request
    record = early(running, "cut")
    assert record is not None
    assert (record.status, record.how) == (None, "cut")
    assert "cut" not in audited(running)
