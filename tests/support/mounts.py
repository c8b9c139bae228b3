"""A small tmpfs of our own, for a disk that fills up: mounted for one test, always unmounted.
Needs root (the test machines run as root); tests skip with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                   check=True)  # fmt: skip
    try:
        yield path
    finally:
        # Lazy: a daemon killed by a failing test may still hold a file open for a moment.
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path, name: str = "filler") -> Path:
    """Take every free byte of the file system under `directory`; returns the filler file."""
    filler = directory / name
    with open(filler, "wb", buffering=0) as stream:
        chunk = b"\0" * 65536
        with contextlib.suppress(OSError):
            while True:
                written = stream.write(chunk)
                if not written:
                    break
        with contextlib.suppress(OSError):  # the last few bytes a smaller write still fits in
            while stream.write(b"\0" * 64):
                pass
    return filler
