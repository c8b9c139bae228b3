"""A Ctrl-C that lands in the same instant as the line a lab step waits for still stops it."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from prober.lab.infra.processes import ManagedProcess, ProcessError
from prober.lab.infra.waiters import Waiters


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
from prober.lab.infra.processes import ProcessGroup

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


async def test_a_signal_to_a_process_that_exited_leaves_its_exit_to_asyncio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Popen.send_signal polls first, and a poll reaps a child that has exited behind
    asyncio's child watcher, which then reports "Unknown child process" with code 255 (the
    README's `make demo` printed it as its daemon failed). A lab signal reaps nothing: the
    real exit code comes back, and a failure names it."""
    process = ManagedProcess("quitter", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    await process.start()
    assert process.pid is not None
    exited = os.pidfd_open(process.pid)
    try:  # blocking the loop: it has not heard of the exit when the signal goes out
        assert select.select([exited], [], [], 30)[0] == [exited]
    finally:
        os.close(exited)
    polled: list[subprocess.Popen[bytes]] = []
    poll = subprocess.Popen.poll

    def spied(popen: subprocess.Popen[bytes]) -> int | None:
        polled.append(popen)
        return poll(popen)

    with monkeypatch.context() as patch:
        patch.setattr(subprocess.Popen, "poll", spied)
        process.send_signal(signal.SIGTERM)
    assert polled == []
    with pytest.raises(ProcessError, match=r"quitter exited \(code 3\)"):
        await process.wait_for_line(lambda line: line == "never", 30)
    assert await process.wait(30) == 3


async def test_a_wait_begun_after_the_end_fails_at_once() -> None:
    """A lab step that waits on a process's line after it exited learns so at once, not
    after its whole timeout (an hour here: the test's own timeout would end it first)."""
    waiters: Waiters[str] = Waiters()
    waiters.fail(ProcessError("gone"))
    with pytest.raises(ProcessError, match="gone"):
        await waiters.wait(lambda line: True, 3600)
