"""Fake apiservers for tests: certificates made at test time, a token file, started servers;
the fixtures of the lab's and the fake apiserver's tests (their conftests take them from here)."""

from __future__ import annotations

import json
import random
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from prober.fakeapiserver import ApiServer, ApiServerOptions, BoundPorts
from prober.fakeapiserver.options import load_tokens
from prober.lab.infra.certs import LabCA, ServerCertificate
from prober.lab.infra.etcd import LabEtcd
from prober.lab.infra.processes import ProcessGroup
from tests.support.clock import FakeClock

TOKEN = "lab-token-0123456789"


@dataclass(frozen=True)
class LabCerts:
    ca: Path
    server: ServerCertificate

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> LabCerts:
    ca = LabCA(tmp_path_factory.mktemp("certs"))
    return LabCerts(ca.ca_cert, ca.issue("apiserver", ["localhost", "127.0.0.1", "::1"]))


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def base_options(certs: LabCerts, tmp_path: Path, token_file: Path) -> ApiServerOptions:
    return ApiServerOptions(
        cert=certs.server.cert,
        key=certs.server.key,
        port=0,
        plain_port=0,
        hostname="master-0",
        shutdown_delay=10.0,
        tokens=load_tokens(token_file),
        audit_log=tmp_path / "audit" / "audit.log",
        truth=tmp_path / "truth.jsonl",
        goaway_linger=0.05,
    )


@pytest.fixture
async def etcd(tmp_path: Path) -> AsyncIterator[LabEtcd]:
    """A real etcd (Debian's etcd-server) on loopback, its data in the test's tmp dir."""
    (tmp_path / "etcd-logs").mkdir(exist_ok=True)
    async with ProcessGroup(tmp_path / "etcd-logs") as group:
        store = LabEtcd(tmp_path / "etcd")
        await store.start(group)
        yield store


@dataclass
class Running:
    server: ApiServer
    ports: BoundPorts
    clock: FakeClock | None

    @property
    def url(self) -> str:
        return f"https://localhost:{self.ports.port}"

    @property
    def plain_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.plain_port}"


StartServer = Callable[..., Awaitable[Running]]


@asynccontextmanager
async def running_client(
    running: Running,
    certs: LabCerts,
    headers: dict[str, str],
    *,
    http2: bool = False,
    timeout: float = 5.0,
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTPS client of a running fake apiserver, over HTTP/2 or HTTP/1.1 only."""
    async with httpx.AsyncClient(
        base_url=running.url,
        verify=certs.client_context(),
        http2=http2,
        http1=not http2,
        headers=headers,
        timeout=timeout,
    ) as made:
        yield made


@pytest.fixture
async def start_server(base_options: ApiServerOptions) -> AsyncIterator[StartServer]:
    """Start in-process servers: `await start_server(manual_clock=True, shutdown_delay=2.0)`."""
    started: list[ApiServer] = []

    async def start(
        manual_clock: bool = False, rng: random.Random | None = None, **changes: Any
    ) -> Running:
        clock = FakeClock() if manual_clock else None
        options = replace(base_options, **changes)
        server = ApiServer(options, clock=clock, rng=rng, keep_truth=True)
        ports = await server.start()
        started.append(server)
        return Running(server, ports, clock)

    yield start
    for server in started:
        await server.kill()


AUDIT_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
AUDIT_STAGES = {"RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"}


def read_audit(path: Path) -> list[dict[str, Any]]:
    """Every audit line, each checked against the audit.k8s.io/v1 Event fields we emit."""
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        assert event["kind"] == "Event"
        assert event["apiVersion"] == "audit.k8s.io/v1"
        assert event["level"] == "Metadata"
        assert event["stage"] in AUDIT_STAGES
        assert isinstance(event["auditID"], str)
        assert event["auditID"]
        assert event["requestURI"].startswith("/")
        assert event["verb"] in {"get", "list", "watch", "post", "create"}
        assert isinstance(event["user"], dict)
        assert event["sourceIPs"]
        assert isinstance(event["responseStatus"]["code"], int)
        assert event["responseStatus"]["metadata"] == {}
        for key in ("requestReceivedTimestamp", "stageTimestamp"):
            assert AUDIT_TIMESTAMP.fullmatch(event[key]), event[key]
        assert event["stageTimestamp"] >= event["requestReceivedTimestamp"]
        assert set(event) <= AUDIT_FIELDS, set(event) - AUDIT_FIELDS
    return events


AUDIT_FIELDS = {
    "kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user",
    "sourceIPs", "userAgent", "objectRef", "responseStatus", "requestReceivedTimestamp",
    "stageTimestamp", "annotations",
}  # fmt: skip
