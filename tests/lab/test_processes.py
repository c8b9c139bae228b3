"""A Ctrl-C that lands in the same instant as the line a lab step waits for still stops it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from prober.lab.processes import ManagedProcess


async def test_a_cancel_in_the_instant_the_line_arrives_is_not_lost(tmp_path: Path) -> None:
    process = ManagedProcess("echo", ["true"], tmp_path)
    waiting = asyncio.create_task(process.wait_for_line(lambda line: line == "ready", 10))
    await asyncio.sleep(0)  # the task now waits for its line
    process._dispatch("ready")  # the line arrives ...
    waiting.cancel()  # ... and SIGINT cancels the lab's task in the same loop pass
    with pytest.raises(asyncio.CancelledError):
        await waiting  # asyncio.wait_for on 3.11 returned "ready" here
