"""The logging set-up of every long-running command: no log format renders a secret that a
crashing task held in a local variable."""

from __future__ import annotations

import io

import pytest
import structlog

from prober.common.logs import FORMATS, configure_logging

SECRET = "s3cr3t-token-0123456789"


def _crash_with_a_token_in_hand() -> None:
    bearer = f"Bearer {SECRET}"  # as the probe's request builder holds it
    raise RuntimeError(f"boom after {len(bearer)} characters")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_task_crash_renders_no_local_variable(fmt: str) -> None:
    out = io.StringIO()
    configure_logging(fmt, "info", out)
    try:
        _crash_with_a_token_in_hand()
    except RuntimeError:
        structlog.get_logger("prober.supervisor").exception("task_failed", task="worker")
    text = out.getvalue()
    assert "task_failed" in text
    assert "boom after" in text  # the traceback is there
    assert SECRET not in text
