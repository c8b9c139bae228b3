"""The overlays rendered once for every test module of tests/deploy; the test TLS server and
its certificates, for the real daemon whose pod log test_ci.py judges."""

from __future__ import annotations

import pytest

from tests.deploy.manifests import DEPLOY, OVERLAYS, Obj, render
from tests.support.fixtures import certs, tls_server, token_file

__all__ = ["certs", "rendered", "tls_server", "token_file"]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[Obj]]:
    return {name: render(DEPLOY / "overlays" / name) for name in OVERLAYS}
