"""What every lab LB keeps: the servers' state changes with their times, which are the
ground truth of when it gave up on a server, and a wait for the next one; and a node's
outage, which every LB meets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from prober.lab.infra.platforms import LBProfile
from prober.lab.infra.processes import ProcessError, ProcessGroup
from prober.lab.infra.waiters import Waiters


@dataclass(slots=True)
class Outage:
    """A node that vanished: when (wall time), and when it was back (None: not yet)."""

    hostname: str
    lost: float
    back: float | None = None


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """A server state change an LB made (HAProxy's log line, the kernel LB's checker)."""

    wall: float  # epoch seconds
    server: str
    up: bool
    reason: str
    # Seconds the change came later than the LB's budget allows for reasons no cloud LB has:
    # the checker's own lateness, a check slowed past its step (the kernel LB's says; 0 else).
    lag: float = 0.0


@dataclass(slots=True)
class StateChanges:
    """An LB's state changes in the order it made them."""

    name: str
    events: list[ServerEvent] = field(default_factory=list)
    _waiters: Waiters[ServerEvent] = field(default_factory=Waiters)

    def add(self, event: ServerEvent) -> None:
        self.events.append(event)
        self._waiters.offer(event)

    def current(self, servers: list[str]) -> dict[str, bool]:
        """Each server's state after the last change; a server starts up."""
        state = dict.fromkeys(servers, True)
        for event in self.events:
            state[event.server] = event.up
        return state

    async def wait_for(
        self, server: str, up: bool, timeout: float, since: float = 0.0
    ) -> ServerEvent:
        """The first state change of `server` to `up` at or after wall time `since`."""

        def wanted(e: ServerEvent) -> bool:
            return e.server == server and e.up is up and e.wall >= since

        for event in self.events:
            if wanted(event):
                return event
        try:
            return await self._waiters.wait(wanted, timeout)
        except TimeoutError:
            state = "UP" if up else "DOWN"
            raise ProcessError(
                f"{self.name}: {server} not {state} within {timeout:.0f} s"
            ) from None


class LabLB(Protocol):
    """What the lab asks of any of its LBs, HAProxy's or the kernel's."""

    @property
    def profile(self) -> LBProfile: ...

    @property
    def address(self) -> tuple[str, int]: ...

    @property
    def events(self) -> list[ServerEvent]: ...

    async def start(self, group: ProcessGroup) -> None: ...

    async def wait_for(
        self, server: str, up: bool, timeout: float, since: float = 0.0
    ) -> ServerEvent: ...

    async def server_up(self) -> dict[str, bool]: ...

    async def set_serving(self, server: str, serving: bool) -> None: ...
