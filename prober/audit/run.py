"""`prober audit follow`: its inputs checked, then the long-running side: poll, save, export,
log; until told to stop (SIGTERM, SIGINT), its state saved last.

Polls run in a worker thread (a first poll may read gigabytes of history) one at a time; the
event loop stays free to answer `/metrics`. Tests wait on `wait_until`, never on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from prober.audit.files import InputError, discover, family_of
from prober.audit.follow import Follower, PollReport
from prober.audit.metrics import AuditMetrics
from prober.audit.state import load_state, save_state
from prober.common.exits import ExitCode
from prober.common.logs import configure_logging
from prober.common.statusserver import StatusServer
from prober.common.values import Invalid, duration, host_port

STATE_FILE = "audit-follow-state.json"
T = TypeVar("T")


@dataclass(eq=False, kw_only=True)
class FollowRunner:
    follower: Follower
    state_path: Path
    metrics: AuditMetrics
    interval: float  # seconds between polls
    log: Any
    polls: int = field(default=0, init=False)
    failures: int = field(default=0, init=False)
    last_poll_ok: bool = field(default=True, init=False)
    # Published by the event loop once a poll's results are in the metrics: a test that
    # waits on `lines` then reads `/metrics` sees that poll (the follower's own counter
    # moves inside the polling thread, before the metrics do).
    lines: int = field(init=False)
    _unsaved: bool = field(default=False, init=False)
    _progress: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)

    def __post_init__(self) -> None:
        self.lines = self.follower.lines_total

    def problems(self) -> list[str]:
        """What keeps `/healthz` from 200: the last poll failed (it is retried)."""
        return [] if self.last_poll_ok else ["the last poll of the audit logs failed"]

    async def run(self, stop: asyncio.Event) -> None:
        """Poll every `interval` until `stop`, then poll once more and return."""
        self.metrics.update(self.follower.state)
        while True:
            await self._poll_once()
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)

    async def _poll_once(self) -> None:
        try:
            report = await asyncio.to_thread(self.follower.poll)
            # A save that failed is retried at the next poll, changed or not.
            self._unsaved = self._unsaved or report.changed
            if self._unsaved:
                await asyncio.to_thread(save_state, self.follower.state, self.state_path)
                self._unsaved = False
        except Exception as exc:  # a bug or a full disk: say so, keep the process up, retry
            self.failures += 1
            self.last_poll_ok = False
            self.log.error("audit poll failed", task="audit-follow", error=repr(exc))
        else:
            self.last_poll_ok = True
            self.metrics.update(self.follower.state)
            self._log(report)
            self.lines = self.follower.lines_total
        async with self._progress:
            self.polls += 1
            self._progress.notify_all()

    def _log(self, report: PollReport) -> None:
        for problem in report.problems:
            self.log.warning("audit log problem", problem=problem)
        state = self.follower.state
        for (apiserver, agent), new in sorted(report.late.items()):
            total = state.counts[apiserver].late[agent]
            self.log.warning(
                "late requests", apiserver=apiserver, user_agent=agent, new=new, total=total
            )
        if report.lines:
            events = sum(c.stats.events for c in state.counts.values())
            self.log.info("audit lines read", lines=report.lines, events_total=events)

    async def wait_until(self, done: Callable[[], bool], timeout: float = 30.0) -> None:
        """Return once `done()` holds after some poll; TimeoutError if it never does."""
        async with asyncio.timeout(timeout), self._progress:
            await self._progress.wait_for(done)


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
        follower=follower,
        state_path=state_path,
        metrics=AuditMetrics(registry),
        interval=interval,
        log=log,
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
