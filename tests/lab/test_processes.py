"""A Ctrl-C that lands in the same instant as the line a lab step waits for still stops it."""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
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


LAB = """
import asyncio, sys
from pathlib import Path
from prober.lab.processes import ProcessGroup

async def main():
    async with ProcessGroup(Path(sys.argv[1])) as group:
        child = await group.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
        await asyncio.sleep(60)

asyncio.run(main())
"""


def test_a_killed_lab_takes_its_processes_with_it(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up in the lab: the kernel's parent-death signal ends its
    children all the same (an apiserver left over would hold its port)."""
    with subprocess.Popen(
        [sys.executable, "-c", LAB, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as lab:
        assert lab.stdout is not None
        child = int(lab.stdout.readline())
        exited = os.pidfd_open(child)  # readable once the process has ended, child or not
        try:
            lab.kill()
            lab.wait()
            readable, _, _ = select.select([exited], [], [], 30)
        finally:
            os.close(exited)
    assert readable == [exited]
