"""Shared pytest fixtures: test-time TLS material and the misbehaving TLS server."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.certs import Certs, make_certs
from tests.support.tls_server import TLSServer


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def fault_contexts(certs: Certs) -> dict[str, ssl.SSLContext]:
    return {"expired_tls": certs.expired, "wrong_name_tls": certs.wrong_name}


@pytest.fixture
async def tls_server(certs: Certs) -> AsyncIterator[TLSServer]:
    server = await TLSServer(
        certs.server, certs.untrusted, fault_contexts=fault_contexts(certs)
    ).start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("first-secret-token-7f3a\n")
    return path
