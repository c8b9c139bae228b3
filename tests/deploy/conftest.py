"""The overlays rendered once for every test module of tests/deploy."""

from __future__ import annotations

import pytest

from tests.deploy.manifests import DEPLOY, OVERLAYS, Obj, render


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[Obj]]:
    return {name: render(DEPLOY / "overlays" / name) for name in OVERLAYS}
