"""Upstream's own kube-apiserver (`make upstream`), once, against `../shared/reference.md`:
the opt-in shutdown header, SIGTERM's `/readyz` failing at once while `/healthz` stays ok,
429 with Retry-After once the delay is over while a request is still in flight, the
graceful exit, its lifecycle lines in upstream's order and the audit annotations
`prober audit` reads. Every wait is on one of its lifecycle lines or an answer."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from prober.cli import main
from prober.core.header import REQUEST_HEADER, RESPONSE_HEADER, apiserver_id, parse_shutdown_header
from prober.lab.infra.certs import LabCA
from prober.lab.infra.etcd import LabEtcd
from prober.lab.infra.haproxy import free_port
from prober.lab.infra.processes import ProcessGroup
from prober.lab.infra.upstream import (
    GoLine,
    Instance,
    audit_policy,
    binaries,
    go_line,
    kube_apiserver_argv,
    lease_env,
    token_file,
)
from tests.support.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOKEN = "upstream-smoke-token"
DELAY = 3.0  # --shutdown-delay-duration
SKEW = 0.01  # seconds two goroutines' lines of one instant may lie apart
ORDER = ["ready", "shutdown_initiated", "pre_shutdown_hooks_stopped", "after_shutdown_delay",
         "not_accepting_new_requests", "in_flight_drained", "http_server_stopped_listening",
         "exit"]  # fmt: skip


class Lines:
    """The main's JSON lines as they come, by event name, and a wait for the next one."""

    def __init__(self) -> None:
        self.seen: list[GoLine] = []
        self._changed = asyncio.Event()

    def __call__(self, text: str) -> None:
        line = go_line(text)
        if line is None:
            return
        self.seen.append(line)
        self._changed.set()

    def names(self) -> list[str]:
        return [line.event for line in self.seen]

    async def wait(self, event: str, timeout: float = 60) -> GoLine:
        async with asyncio.timeout(timeout):
            while True:
                for line in self.seen:
                    if line.event == event:
                        return line
                self._changed.clear()
                await self._changed.wait()


async def test_upstream_shuts_down_as_the_reference_says(tmp_path: Path) -> None:
    bins = binaries()
    ca = LabCA(tmp_path / "pki")
    cert = ca.issue("apiserver", ["127.0.0.1", "localhost"])
    port = free_port()
    lines = Lines()
    async with ProcessGroup(tmp_path / "logs") as group:
        etcd = LabEtcd(tmp_path / "etcd", binary=bins.etcd)
        await etcd.start(group)
        instance = Instance(
            etcd=f"http://{etcd.endpoint}", bind="127.0.0.1", advertise="198.18.0.1",
            port=port, cert=cert.cert, key=cert.key,
            tokens=token_file(tmp_path / "tokens.csv", [(TOKEN, "prober")]),
            audit_policy=audit_policy(tmp_path / "audit-policy.yaml"),
            audit_log=tmp_path / "audit" / "audit.log", shutdown_delay=DELAY,
        )  # fmt: skip
        server = await group.start(
            "kube-apiserver", kube_apiserver_argv(bins.kube_apiserver, instance),
            env=lease_env(1.0), on_line=lines,
        )  # fmt: skip
        await lines.wait("ready")
        base = f"https://127.0.0.1:{port}"
        auth = {"Authorization": f"Bearer {TOKEN}", "User-Agent": "smoke/1 new"}
        tls = ssl.create_default_context(cafile=ca.ca_cert)
        async with httpx.AsyncClient(base_url=base, verify=tls) as client:
            plain = await client.get("/api/v1/namespaces/default", headers=auth)
            assert plain.status_code == 200
            assert RESPONSE_HEADER not in plain.headers  # only when asked
            before = await shutdown_state(client, auth)
            assert (before.shutdown, before.delay, before.elapsed) == (False, DELAY, 0.0)
            assert before.host == apiserver_id(socket.gethostname())
            assert (await client.get("/readyz")).status_code == 200  # anonymous, as an LB's

            held = asyncio.Event()
            slow = asyncio.create_task(slow_create(base, tls, auth, held))
            await until(lambda: in_flight(client, auth), "the create in flight at the server")
            server.send_signal(signal.SIGTERM)
            await lines.wait("shutdown_initiated")
            readyz = await client.get("/readyz", params={"verbose": "1"})
            assert readyz.status_code == 500
            assert "shutdown" in readyz.text
            assert (await client.get("/healthz")).status_code == 200
            during = await shutdown_state(client, auth)
            assert during.shutdown
            await lines.wait("late_connections_begin")
            async with httpx.AsyncClient(base_url=base, verify=tls) as fresh:  # a late connection
                late = await fresh.get("/api/v1/namespaces/default", headers=auth)
            assert late.status_code == 200
            await lines.wait("not_accepting_new_requests")
            async with httpx.AsyncClient(base_url=base, verify=tls) as fresh:
                refused = await fresh.get("/api/v1/namespaces/default",
                                          headers={**auth, REQUEST_HEADER: "true"})  # fmt: skip
            assert refused.status_code == 429
            assert refused.headers["Retry-After"] == "5"
            assert refused.headers["Connection"] == "close"
            assert parse_shutdown_header(refused.headers[RESPONSE_HEADER]).shutdown
            held.set()  # the request in flight ends; the server drains and stops
            await slow
        assert await server.wait(60) == 0
    # Upstream's order; signals that fire together are printed by goroutines of their own,
    # so two of them may come out a few microseconds apart either way.
    walls = {line.event: line.wall for line in reversed(lines.seen)}
    assert set(ORDER) <= set(walls), lines.names()
    for earlier, later in itertools.pairwise(ORDER):
        assert walls[earlier] <= walls[later] + SKEW, (earlier, later, walls)
    assert walls["after_shutdown_delay"] - walls["shutdown_initiated"] >= DELAY - SKEW
    summarized = audit_summary(tmp_path)
    assert {entry["user_agent"] for entry in summarized["late"]} >= {"smoke/1 new"}


async def shutdown_state(client: httpx.AsyncClient, auth: dict[str, str]) -> object:
    answer = await client.get("/api/v1/namespaces/default", headers={**auth, REQUEST_HEADER: "x"})
    return parse_shutdown_header(answer.headers[RESPONSE_HEADER])


async def in_flight(client: httpx.AsyncClient, auth: dict[str, str]) -> bool:
    """Whether the server counts a mutating request in flight (its own metric)."""
    metrics = (await client.get("/metrics", headers=auth)).text
    for line in metrics.splitlines():
        if line.startswith("apiserver_current_inflight_requests") and "mutating" in line:
            return float(line.split()[-1]) >= 1
    return False


async def slow_create(
    base: str, tls: ssl.SSLContext, auth: dict[str, str], held: asyncio.Event
) -> None:
    """A create whose body waits for `held`: a request in flight, which upstream waits for
    after its delay, answering every new one 429 meanwhile."""
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "slow"}}).encode()  # fmt: skip

    async def parts() -> AsyncIterator[bytes]:
        yield body[:10]
        await held.wait()
        yield body[10:]

    async with httpx.AsyncClient(base_url=base, verify=tls, timeout=60) as client:
        answer = await client.post(
            "/api/v1/namespaces/default/configmaps", content=parts(),
            headers={**auth, "Content-Type": "application/json",
                     "Content-Length": str(len(body))},
        )  # fmt: skip
    assert answer.status_code == 201, answer.text


def audit_summary(folder: Path) -> dict[str, list[dict[str, object]]]:
    code = main(["audit", "summarize", str(folder / "audit"), "--out", str(folder / "summary")])
    assert code == 0
    summary: dict[str, list[dict[str, object]]] = json.loads(
        (folder / "summary" / "audit-summary.json").read_text()
    )
    return summary
