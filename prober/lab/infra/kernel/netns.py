"""Network namespaces the lab makes, holds and drops: nothing of them outlives the lab.

A namespace here has no name (none under /run/netns, nothing `ip netns` lists): it is made by
`unshare(CLONE_NEWNET)` in a short-lived thread and held by one open file descriptor of the
lab's process. Processes enter it with `nsenter --net=/proc/<lab>/fd/<fd>`. The kernel drops
a namespace, its links, addresses, routes, nftables tables and conntrack entries, once the
last holder is gone: the lab closing the descriptor, or the lab dying (its descriptors close)
and its children dying with it (their parent-death signal, `lab.infra.processes`). So a SIGKILLed
lab leaves nothing behind either, which a named namespace would.

Python 3.11 has no `os.unshare` or `os.setns`: libc's are called through ctypes.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from prober.lab.infra.processes import ProcessError

CLONE_NEWNET = 0x40000000  # linux/sched.h
COMMAND_TIMEOUT = 20.0
T = TypeVar("T")


class NamespaceError(ProcessError):
    """A namespace could not be made or set up."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _in_thread(work: Callable[[], T]) -> T:
    """Run `work` in a new thread: what it does to its own namespace stays in that thread."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed back to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="prober-lab-netns")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return box[0]


def _check(result: int, what: str) -> None:
    if result != 0:
        raise NamespaceError(f"{what}: {os.strerror(ctypes.get_errno())}")


class Namespace:
    """One network namespace, held open by a descriptor of this process."""

    def __init__(self, name: str) -> None:
        self.name = name  # for messages and process names only; the kernel never sees it

        def make() -> int:
            _check(_libc().unshare(CLONE_NEWNET), f"netns {name}: unshare(CLONE_NEWNET)")
            return os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)

        self._fd: int | None = _in_thread(make)

    @property
    def path(self) -> str:
        """A path naming the namespace for `nsenter --net=` and `ip ... netns`."""
        if self._fd is None:
            raise NamespaceError(f"netns {self.name}: already closed")
        return f"/proc/{os.getpid()}/fd/{self._fd}"

    def enter(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace; nsenter execs it, so the pid stays the program's."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    async def run(self, *argv: str, stdin: str | None = None) -> str:
        """One command inside the namespace; its stdout, or NamespaceError with its stderr."""
        proc = await asyncio.create_subprocess_exec(
            *self.enter(argv),
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        data = None if stdin is None else stdin.encode()
        async with asyncio.timeout(COMMAND_TIMEOUT):
            out, err = await proc.communicate(data)
        if proc.returncode != 0:
            detail = err.decode(errors="replace").strip().splitlines()
            raise NamespaceError(
                f"netns {self.name}: {' '.join(argv)}: exit {proc.returncode}: "
                + (detail[-1] if detail else "no message")
            )
        return out.decode(errors="replace")

    async def sysctl(self, key: str, value: str) -> None:
        await self.run("sysctl", "-q", "-w", f"{key}={value}")

    def call(self, work: Callable[[], T]) -> T:
        """`work` in a thread inside the namespace: a socket it makes stays in it."""
        fd = self._fd
        if fd is None:
            raise NamespaceError(f"netns {self.name}: already closed")

        def inside() -> T:
            _check(_libc().setns(fd, CLONE_NEWNET), f"netns {self.name}: setns")
            return work()

        return _in_thread(inside)

    def socket(self, family: int = socket.AF_INET) -> socket.socket:
        """A TCP socket of this namespace, usable from any thread."""
        return self.call(lambda: socket.socket(family, socket.SOCK_STREAM))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def can_make_namespaces() -> str | None:
    """None if this process can make a network namespace; otherwise why not, in one line."""
    try:
        Namespace("probe").close()
    except (NamespaceError, OSError) as exc:
        return str(exc)
    return None
