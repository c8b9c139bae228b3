"""The core never reads a clock: time arrives on the samples (import-linter bans the I/O
libraries and `time`; this catches `datetime.now()` and friends, which it cannot see)."""

from __future__ import annotations

import ast
from pathlib import Path

import prober.core

CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def test_core_reads_no_clock() -> None:
    offenders = []
    for path in Path(prober.core.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CLOCK_CALLS
            ):
                offenders.append(f"{path.name}:{node.lineno}: .{node.func.attr}()")
    assert offenders == []
