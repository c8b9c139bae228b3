"""The daemon's structured log captured as JSON lines (the `log_output` fixture, shared by
tests/conftest.py), and one event of it read back."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from prober.common.logs import configure_logging


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging("json", "info", out)
    yield out
    structlog.reset_defaults()


def log_line(output: io.StringIO, event: str) -> dict[str, Any]:
    """The one line of `event` (two or none fail the unpacking)."""
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    (found,) = [line for line in lines if line.get("event") == event]
    return found
