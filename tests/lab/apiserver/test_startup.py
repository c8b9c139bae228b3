"""Readiness going true: the post-start hooks fail the health checks until they finish.
Real TLS sockets and httpx; a manual clock, so every phase is reached exactly, without
waiting for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from prober.core.header import RESPONSE_HEADER, ShutdownHeader, parse_shutdown_header
from prober.lab.etcd import LabEtcd
from tests.lab.conftest import TOKEN, LabCerts, Running, StartServer, read_audit

API = "/api/v1/namespaces/default"
HEADERS = {"X-Openshift-If-Disruption": "true", "Authorization": f"Bearer {TOKEN}"}
H2_HEADERS = [(k.lower(), v) for k, v in HEADERS.items()]
HOOK = "poststarthook/start-kube-apiserver-identity-lease-controller"


@asynccontextmanager
async def client(
    running: Running, certs: LabCerts, http2: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=running.url,
        verify=certs.client_context(),
        http2=http2,
        http1=not http2,
        headers=HEADERS,
    ) as made:
        yield made


def records(running: Running, event: str | None = None) -> list[dict[str, Any]]:
    kept = running.server.truth.records or []
    return [r for r in kept if event is None or r["event"] == event]


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

    listening, serving, ready = (records(running, e)[0] for e in ("listening", "serving", "ready"))
    assert [
        r["event"] for r in records(running) if r["event"] in ("listening", "ready", "serving")
    ] == [
        "listening",
        "serving",
        "ready",
    ]
    assert listening["holder"] == serving["holder"] == ready["holder"] == running.server.holder
    assert listening["holder"].startswith(host + "_")
    assert serving["mono"] == listening["mono"]
    assert ready["mono"] == listening["mono"] + 5.0


async def test_ready_waits_for_the_identity_lease_under_the_new_holder(
    start_server: StartServer, etcd: LabEtcd, certs: LabCerts
) -> None:
    running = await start_server(etcd_servers=etcd.endpoint)
    await running.server.startup.wait("ready")
    events = [r["event"] for r in records(running)]
    (lease, *_) = [r for r in records(running, "lease_written") if r["verb"] == "identity"]
    assert events.index("lease_written") < events.index("ready")
    (ready,) = records(running, "ready")
    assert lease["holder"] == ready["holder"] == running.server.holder
    async with client(running, certs) as http:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease['name']}"
        assert (await http.get(path)).json()["spec"]["holderIdentity"] == running.server.holder
