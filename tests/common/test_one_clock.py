"""One clock: outside `common.clock`, no module of the measuring product reads the real clock
or sleeps on it, so a fake clock (`tests/support/clock.py`) drives every wait and every time
it stamps. The only exceptions are the probe's on-wire timestamps: a sample's own times are
read where its request meets the network (`probe/prober.py`, `probe/wire/`)."""

from __future__ import annotations

import ast
from pathlib import Path

import prober

ROOT = Path(prober.__file__).parent
PACKAGES = ("core", "daemon", "probe", "report")
WIRE = ("probe/prober.py", "probe/wire/")  # the on-wire timestamps
CALLS = {("time", "monotonic"), ("time", "time"), ("time", "perf_counter"),
         ("asyncio", "sleep")}  # fmt: skip


def real_clock_calls(source: str, name: str) -> list[str]:
    """Each `time.monotonic()`, `time.time()`, `time.perf_counter()` or `asyncio.sleep()` in
    `source`, and each import of one of them by name."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in CALLS
        ):
            found.append(f"{name}:{node.lineno}: {node.func.value.id}.{node.func.attr}()")
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "asyncio"):
            for alias in node.names:
                if (node.module, alias.name) in CALLS:
                    found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
    return found


def test_the_scanner_finds_each_way_of_reading_the_real_clock() -> None:
    source = (
        "import time, asyncio\nfrom time import monotonic\n"
        "async def f():\n    time.time(); time.monotonic(); await asyncio.sleep(1)\n"
    )
    assert len(real_clock_calls(source, "x.py")) == 4


def test_only_the_clock_and_the_wire_read_real_time() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if not name.startswith(WIRE):
                offenders += real_clock_calls(path.read_text(), name)
    assert offenders == []
