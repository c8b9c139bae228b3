"""Child processes of the lab: started, watched line by line, and always stopped.

Every process the lab starts goes through `ProcessGroup`, whose exit (normal, error or Ctrl-C)
stops them all, newest first: SIGTERM, a bounded wait, then SIGKILL; a lab that is itself
killed takes them with it (the kernel's parent-death signal). Output is copied to a log
file per stream, and callers wait on the lines themselves (a "listening" line, an HAProxy state
change) instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from prober.common.errors import UserError
from prober.lab.infra.waiters import Waiters

LineHandler = Callable[[str], None]
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_AFTER_EOF = 2.0  # seconds a process that closed its stdout is given to exit, for its code


def announces(event: str) -> Callable[[str], bool]:
    """Whether a line is a child's JSON line of that `event` (`{"event": ..., ...}`): the
    fake apiserver's and the kernel checker's "ready", upstream's main's "identity_lease"."""

    def wanted(line: str) -> bool:
        try:
            return bool(json.loads(line).get("event") == event)
        except (ValueError, AttributeError):
            return False

    return wanted


def _die_with_the_lab() -> Callable[[], None] | None:
    """For the child between fork and exec: be SIGKILLed when the lab dies, even by SIGKILL
    (which runs no clean-up), so that no apiserver, HAProxy or daemon outlives it. Linux
    only; the libc function is looked up here, in the parent, so the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return arm


Tee = Callable[[str, bytes], None]  # ("stdout" or "stderr", the line): a container log, say


class ProcessError(UserError, RuntimeError):
    """A child process failed to start or did not say what we waited for."""


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        *,
        env: dict[str, str] | None = None,
        on_line: LineHandler | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
        tee: Tee | None = None,
    ) -> None:
        self.name = name
        self._tee = tee
        self.stop_signal = stop_signal
        self.argv = list(argv)
        self.stdout_path = log_dir / f"{name}.stdout.log"
        self.stderr_path = log_dir / f"{name}.stderr.log"
        self._env = env
        self._on_line = on_line
        self._proc: asyncio.subprocess.Process | None = None
        self._pidfd: int | None = None  # signals go through it: see `send_signal`
        self._pumps: list[asyncio.Task[None]] = []
        self._waiters: Waiters[str] = Waiters()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode

    async def start(self) -> None:
        env = {**os.environ, **(self._env or {})}
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # Ctrl-C in the terminal reaches the lab, not its children
                preexec_fn=_die_with_the_lab(),
            )
        except OSError as exc:
            raise ProcessError(f"{self.name}: cannot start {self.argv[0]}: {exc}") from None
        with contextlib.suppress(OSError):  # gone already: its exit is on its way to us
            self._pidfd = os.pidfd_open(self._proc.pid)
        assert self._proc.stdout is not None
        assert self._proc.stderr is not None
        self._pumps = [
            asyncio.create_task(
                self._pump(self._proc.stdout, self.stdout_path, "stdout"),
                name=f"{self.name}-stdout",
            ),
            asyncio.create_task(
                self._pump(self._proc.stderr, self.stderr_path, "stderr"),
                name=f"{self.name}-stderr",
            ),
        ]

    async def wait_for_line(self, predicate: Callable[[str], bool], timeout: float) -> str:
        """The next stdout line that satisfies `predicate`; fails if the process exits first."""
        try:
            return await self._waiters.wait(predicate, timeout)
        except TimeoutError:
            raise ProcessError(
                f"{self.name}: no expected output within {timeout:.0f} s (see {self.stdout_path})"
            ) from None

    def send_signal(self, sig: signal.Signals) -> None:
        """Through the process's pidfd, never `Popen.send_signal`: that polls first, and a
        poll reaps a child that has exited, behind asyncio's child watcher, which then
        reports it as an unknown child with exit code 255. A pidfd names this process
        whatever its state, and never another that reuses its pid."""
        if self._proc is None or self._proc.returncode is not None or self._pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self._pidfd, sig)

    async def wait(self, timeout: float | None = None) -> int:
        assert self._proc is not None
        async with asyncio.timeout(timeout):
            code = await self._proc.wait()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return code

    async def stop(self, grace: float = 5.0) -> int | None:
        """The stop signal (SIGTERM unless told), then SIGKILL after `grace` seconds."""
        if self._proc is None:
            return None
        if self._proc.returncode is None:
            self.send_signal(self.stop_signal)
            try:
                return await self.wait(grace)
            except TimeoutError:
                self.send_signal(signal.SIGKILL)
        return await self.wait(grace)

    async def _pump(self, stream: asyncio.StreamReader, path: Path, name: str) -> None:
        watched = name == "stdout"
        with path.open("ab") as sink:
            while line := await stream.readline():
                sink.write(line)
                sink.flush()
                if self._tee is not None:
                    self._tee(name, line)
                if watched:
                    self._dispatch(line.decode("utf-8", "replace").rstrip("\n"))
        if not watched:
            return
        assert self._proc is not None
        # Its stdout ends as it exits: the exit code follows at once, and names the failure.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EXIT_AFTER_EOF):
                await self._proc.wait()
        self._waiters.fail(
            ProcessError(f"{self.name} exited (code {self.returncode}); see {self.stderr_path}")
        )

    def _dispatch(self, text: str) -> None:
        if self._on_line is not None:
            self._on_line(text)
        self._waiters.offer(text)


class ProcessGroup:
    """Owns child processes; leaving the `async with` block stops every one of them."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._members: list[ManagedProcess] = []

    async def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        on_line: LineHandler | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
        tee: Tee | None = None,
    ) -> ManagedProcess:
        proc = ManagedProcess(
            name, argv, self.log_dir, env=env, on_line=on_line, stop_signal=stop_signal, tee=tee
        )
        self._members.append(proc)
        await proc.start()
        return proc

    async def stop_all(self) -> None:
        for proc in reversed(self._members):
            await proc.stop()
        self._members.clear()

    async def __aenter__(self) -> ProcessGroup:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Shield: a cancelled lab (Ctrl-C) must still reap its children.
        await asyncio.shield(self.stop_all())
