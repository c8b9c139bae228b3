"""Start the real `prober run` as a subprocess and follow its JSON log lines on stdout.

This is how a test (or the lab) knows where the daemon listens and when it is ready: the
first line is `{"event": "listening", "port": N, ...}`; `{"event": "ready"}` follows once
every stream has produced a sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

Line = dict[str, Any]


class DaemonProcess:
    def __init__(self, process: asyncio.subprocess.Process, log_file: Path | None = None) -> None:
        self.process = process
        self.lines: list[Line] = []
        self.raw: list[bytes] = []
        self._changed = asyncio.Condition()
        source = self._follow(log_file) if log_file else self._stream()
        self._reader = asyncio.create_task(self._read(source))

    @classmethod
    async def start(
        cls,
        *args: str,
        env: dict[str, str] | None = None,
        wrap: Sequence[str] = (),
        log_file: Path | None = None,
    ) -> DaemonProcess:
        """`wrap` runs the daemon under another command (`unshare ...`, `setpriv ...`) that
        ends by executing it, so the process is still the daemon's. `log_file`: the wrapper
        sends the daemon's stdout there, and its lines are followed in that file."""
        process = await asyncio.create_subprocess_exec(
            *wrap,
            sys.executable,
            "-m",
            "prober",
            "run",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        return cls(process, log_file)

    async def _stream(self) -> AsyncIterator[bytes]:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            yield raw

    async def _follow(self, path: Path) -> AsyncIterator[bytes]:
        """The file's lines as they are written, until the process has exited."""
        offset, partial = 0, b""
        while True:
            data = _read_from(path, offset)
            offset += len(data)
            *whole, partial = (partial + data).split(b"\n")
            for line in whole:
                yield line + b"\n"
            if not data:
                if self.process.returncode is not None:
                    return
                await asyncio.sleep(0.02)  # a file has no readiness event

    async def _read(self, source: AsyncIterator[bytes]) -> None:
        async for raw in source:
            self.raw.append(raw)
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(raw))
            async with self._changed:
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, match: Callable[[Line], bool] | str, timeout: float = 20) -> Line:
        """The first log line matching (an event name or a predicate); waits for it."""
        test = (lambda line: line.get("event") == match) if isinstance(match, str) else match
        async with asyncio.timeout(timeout), self._changed:
            while True:
                for line in self.lines:
                    if test(line):
                        return line
                if self._reader.done():
                    raise AssertionError(f"daemon exited without {match!r}: {await self.stderr()}")
                await self._changed.wait()

    async def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def wait(self, timeout: float = 20) -> int:
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            await self._reader
        return code

    async def stderr(self) -> str:
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode(errors="replace")

    async def close(self) -> None:
        """Whatever happened, leave no process behind."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as stream:
            stream.seek(offset)
            return stream.read()
    except FileNotFoundError:
        return b""
