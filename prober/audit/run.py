"""The long-running side of `follow`: poll, save, export, log; until told to stop.

Polls run in a worker thread (a first poll may read gigabytes of history) one at a time; the
event loop stays free to answer `/metrics`. Tests wait on `wait_until`, never on time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from prober.audit.follow import Follower, PollReport
from prober.audit.metrics import AuditMetrics
from prober.audit.state import save_state


class FollowRunner:
    def __init__(
        self,
        follower: Follower,
        *,
        state_path: Path,
        registry: CollectorRegistry,
        interval: float,
        log: Any,
    ) -> None:
        self.follower = follower
        self.state_path = state_path
        self.metrics = AuditMetrics(registry)
        self.interval = interval
        self.log = log
        # Published by the event loop once a poll's results are in the metrics: a test that
        # waits on `lines` then reads `/metrics` sees that poll (the follower's own counter
        # moves inside the polling thread, before the metrics do).
        self.lines = follower.lines_total
        self.polls = 0
        self.failures = 0
        self.last_poll_ok = True
        self._unsaved = False
        self._progress = asyncio.Condition()

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
