"""The work behind `prober audit summarize` and `prober audit follow`; the CLI only parses.

Bad input raises a `UserError` (one line on stderr and exit 2, by `prober.cli`); a verdict
(`--check`) ends in exit 1.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from prober.audit.evidence import ProberEvidence, read_prober_logs, read_shutdown_events
from prober.audit.files import InputError, discover, family_of
from prober.audit.follow import Follower
from prober.audit.output import render_table, write_outputs
from prober.audit.run import FollowRunner
from prober.audit.state import load_state, save_state
from prober.audit.summary import summarize
from prober.common.errors import writing
from prober.common.exits import ExitCode
from prober.common.logs import configure_logging
from prober.common.statusserver import StatusServer
from prober.common.values import Invalid, duration, host_port

STATE_FILE = "audit-follow-state.json"
T = TypeVar("T")


def summarize_command(
    paths: Sequence[Path],
    *,
    node: str | None = None,
    events: Sequence[Path] = (),
    shutdown_events: Sequence[Path] = (),
    out: Path = Path("."),
    junit: bool = False,
    check: bool = False,
    max_line_bytes: int,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    families, notes = discover(paths, node)
    if not families:
        raise InputError(f"no audit logs found in {', '.join(map(str, paths))}")
    evidence: ProberEvidence | None = read_prober_logs(events) if events else None
    spans = [span for path in shutdown_events for span in read_shutdown_events(path)]
    summary = summarize(families, evidence=evidence, spans=spans, max_line_bytes=max_line_bytes)
    summary.notes[:0] = notes
    print(render_table(summary), file=stdout)
    with writing(f"to {out}"):
        written = write_outputs(summary, out, junit=junit)
    for path in written:
        print(f"wrote {path}", file=stdout)
    late = sum(summary.late_by_apiserver.values())
    return ExitCode.FAILED if check and late else ExitCode.OK


def follow_command(
    directory: Path,
    *,
    node: str | None = None,
    listen: str,
    out: Path = Path("."),
    state_file: Path | None = None,
    interval: str = "1s",
    max_line_bytes: int,
) -> int:
    state_path = state_file or out / STATE_FILE
    if not directory.is_dir():
        raise InputError(f"{directory}: no such directory")
    families, notes = discover([directory], node)
    host, port = _value("--listen", host_port, listen)
    seconds = _value("--interval", duration(), interval)
    state = load_state(state_path)
    if not families:
        # An empty directory today may get its audit.log tomorrow: follow that.
        families = [family_of(directory / "audit.log", node, explicit=False)]
    follower = Follower(families, state, max_line_bytes=max_line_bytes)
    configure_logging()
    log = structlog.get_logger("prober.audit")
    for note in notes:
        log.warning("audit log problem", problem=note)
    asyncio.run(_follow(follower, state_path, host=host, port=port, interval=seconds, log=log))
    log.info("wrote the follow state", path=str(state_path))
    return ExitCode.OK


def _value(name: str, parse: Callable[[object], T], text: str) -> T:
    try:
        return parse(text)
    except Invalid as exc:
        raise InputError(f"{name}: {exc.problem}") from None


async def _follow(
    follower: Follower, state_path: Path, *, host: str, port: int, interval: float, log: Any
) -> None:
    registry = CollectorRegistry()
    runner = FollowRunner(
        follower, state_path=state_path, registry=registry, interval=interval, log=log
    )
    server = StatusServer(registry, healthz=runner.problems, readyz=runner.problems)
    try:
        bound = await server.start(host, port)
    except OSError as exc:
        raise InputError(f"--listen {host}:{port}: cannot listen: {exc.strerror}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info("following", families=[f.key for f in follower.families], listen=f"{host}:{bound}")
    task = asyncio.create_task(runner.run(stop), name="audit-follow")
    try:
        await task
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await server.close()
        try:
            save_state(follower.state, state_path)
        except OSError as exc:
            log.error("cannot save the follow state", path=str(state_path), error=exc.strerror)
