"""Real HAProxy processes standing in for each platform's load balancers.

Cloud LBs are layer 4, so every LB is HAProxy in TCP mode: TLS passes through to the
apiservers, and HAProxy's own health checks probe `/readyz` the way the platform's LB does
(`option httpchk`, over TLS with `check-ssl` or plain HTTP on the health port). Whether open
connections are reset when a target goes down is `on-marked-down shutdown-sessions`.
The service network has no health check: the lab takes a target out through HAProxy's runtime
API (`set server ... state maint`), which keeps established connections, as conntrack does.

HAProxy logs each server state change with a microsecond timestamp (`log stdout format
rfc5424`); those lines are the ground truth of when the LB gave up on a server. It logs each
session too, as it connects it (`option logasap`): which client address it came from and
which address HAProxy connected to the server from, the join between what the daemon and the
apiserver each record of one connection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import re
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prober.lab.infra.lbstate import ServerEvent, StateChanges
from prober.lab.infra.platforms import LBProfile
from prober.lab.infra.processes import ManagedProcess, ProcessError, ProcessGroup
from prober.lab.infra.sessions import Session

HAPROXY = "haproxy"
START_TIMEOUT = 10.0

_STATE_LINE = re.compile(
    r"^<\d+>1 (?P<ts>\S+) \S+ haproxy \d+ - - Server (?P<backend>[^/\s]+)/(?P<server>\S+) "
    r"(?P<what>is UP|is DOWN|is going DOWN for maintenance|was DOWN and now enters maintenance)"
    r"(?P<rest>.*)$"
)
# One client connection as HAProxy connects it to a server (`option logasap`, `SESSION_LOG`).
SESSION_LOG = "session %ci:%cp %bi:%bp %b/%s"
_SESSION_LINE = re.compile(
    r"^<\d+>1 (?P<ts>\S+) \S+ haproxy \d+ - - session (?P<client>\S+) (?P<backend>\S+) "
    r"[^/\s]+/(?P<server>\S+)$"
)


@dataclass(frozen=True, slots=True)
class Backend:
    """One apiserver as an LB sees it."""

    name: str
    port: int
    health_port: int | None = None  # plain-HTTP `/readyz` for checks without TLS
    host: str = "127.0.0.1"


def parse_state_line(line: str) -> ServerEvent | None:
    match = _STATE_LINE.match(line)
    if match is None:
        return None
    wall = dt.datetime.fromisoformat(match["ts"]).timestamp()
    what = match["what"]
    reason = "maintenance" if "maintenance" in what else match["rest"].lstrip(" ,").rstrip(".")
    return ServerEvent(wall=wall, server=match["server"], up=what == "is UP", reason=reason)


def parse_session_line(line: str) -> Session | None:
    match = _SESSION_LINE.match(line)
    if match is None or match["server"] == "<NOSRV>":
        return None
    wall = dt.datetime.fromisoformat(match["ts"]).timestamp()
    return Session(wall, match["client"], match["backend"], match["server"])


def _seconds(value: float) -> str:
    return f"{max(1, round(value * 1000))}ms"


def render_config(
    profile: LBProfile, port: int, backends: Sequence[Backend], admin_socket: Path
) -> str:
    """The HAProxy configuration for one LB of a platform profile."""
    check = profile.check
    server_opts: list[str] = []
    if check is not None:
        server_opts += [
            "check",
            f"inter {_seconds(check.interval)}",
            f"fall {check.fall}",
            f"rise {check.rise}",
        ]
        if check.tls:
            server_opts += ["check-ssl", "verify none"]
        if check.fastinter is not None:
            server_opts.append(f"fastinter {_seconds(check.fastinter)}")
    if profile.slowstart is not None:
        server_opts.append(f"slowstart {_seconds(profile.slowstart)}")
    if profile.reset_on_down:
        server_opts.append("on-marked-down shutdown-sessions")
    servers = []
    for b in backends:
        line = f"    server {b.name} {b.host}:{b.port}"
        if check is not None and not check.tls:
            if b.health_port is None:
                raise ValueError(f"{profile.lb}: backend {b.name} has no health port")
            line += f" port {b.health_port}"
        servers.append(line)
    lines = [
        "global",
        "    log stdout format rfc5424 local0",
        f"    stats socket {admin_socket} mode 600 level admin",
        "    nbthread 1",
        "    hard-stop-after 5s",
        "defaults",
        "    mode tcp",
        "    timeout connect 2s",
        "    timeout client 10m",
        "    timeout server 10m",
        f"    timeout check {_seconds(check.timeout) if check else '2s'}",
        # A cloud LB does not retry a refused connect on the client's behalf.
        "    retries 0",
        f"frontend {profile.lb}",
        f"    bind 127.0.0.1:{port}",
        # Each session as it connects: the server sees HAProxy's address, not the client's,
        # and this line joins the two (`lab.judges.watchpairs`).
        "    log global",
        "    option logasap",
        f'    log-format "{SESSION_LOG}"',
        "    default_backend apiservers",
        "backend apiservers",
        "    log global",
        "    balance roundrobin",
    ]
    if check is not None:
        lines += ["    option httpchk GET /readyz", "    http-check expect status 200"]
    if server_opts:
        lines.append("    default-server " + " ".join(server_opts))
    return "\n".join(lines + servers) + "\n"


FIRST_PORT = 10000  # below: the well-known and registered ports other software expects
_given: set[int] = set()


def free_port() -> int:
    """A port no socket holds now, below the kernel's ephemeral range. The lab's apiservers
    and LBs bind theirs seconds later (a Python process starting on a loaded machine), and
    again after every restart; a port from the ephemeral range may meanwhile become the
    source port of one of the many connections the daemon and the LBs' health checks open
    (an apiserver's bind failed with EADDRINUSE beside two CPU burners). A port is handed
    out once per process: two labs in one process (a test runs two side by side) never
    share one."""
    below = _ephemeral_low()
    for _ in range(1000):
        port = random.randrange(FIRST_PORT, below)
        if port in _given:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise OSError(f"no free port in [{FIRST_PORT}, {below}) after 1000 tries")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as stream:
            return int(stream.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


class HaproxyLB:
    """One running HAProxy for one LB profile, with its state changes and its runtime API."""

    def __init__(
        self,
        profile: LBProfile,
        backends: Sequence[Backend],
        workdir: Path,
        socket_dir: Path | None = None,
    ) -> None:
        self.profile = profile
        self.backends = list(backends)
        self.name = str(profile.lb)
        self.config_path = workdir / f"haproxy-{self.name}.cfg"
        # Unix socket paths are limited to about 100 bytes: callers with deep work directories
        # pass a short one.
        self.admin_socket = (socket_dir or workdir) / f"haproxy-{self.name}.sock"
        self.changes = StateChanges(self.name)
        self.sessions: list[Session] = []
        self.port = 0
        self.restarts = 0
        self._proc: ManagedProcess | None = None

    async def start(self, group: ProcessGroup, attempts: int = 3) -> None:
        """Start on a free port; a port taken between choosing and binding is retried."""
        for attempt in range(attempts):
            self.port = free_port()
            self.config_path.write_text(
                render_config(self.profile, self.port, self.backends, self.admin_socket)
            )
            name = f"haproxy-{self.name}" + (f"-{attempt}" if attempt else "")
            try:
                await self._launch(group, name)
                return
            except ProcessError:
                if self._proc is None or self._proc.returncode is None:
                    raise
        raise ProcessError(f"{self.name}: HAProxy did not start after {attempts} attempts")

    async def _launch(self, group: ProcessGroup, name: str) -> None:
        self._proc = await group.start(
            name, [HAPROXY, "-db", "-f", str(self.config_path)], on_line=self._on_line
        )
        await self._wait_ready()

    async def kill(self, timeout: float = 10.0) -> None:
        """A crash of the LB: SIGKILL; the kernel closes every client connection it held."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGKILL)
        await self._proc.wait(timeout)

    async def restart(self, group: ProcessGroup) -> None:
        """Start again after `kill`, on the same port with the same configuration."""
        self.restarts += 1
        await self._launch(group, f"haproxy-{self.name}-restart-{self.restarts}")

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while loop.time() < deadline:
            assert self._proc is not None
            if self._proc.returncode is not None:
                raise ProcessError(f"{self.name}: HAProxy exited with {self._proc.returncode}")
            try:
                await self.command("show info")
                return
            except OSError:
                await asyncio.sleep(0.05)  # polling a socket that is not there yet
        raise ProcessError(f"{self.name}: HAProxy admin socket not ready in {START_TIMEOUT} s")

    @property
    def events(self) -> list[ServerEvent]:
        return self.changes.events

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def _on_line(self, line: str) -> None:
        event = parse_state_line(line)
        if event is not None:
            self.changes.add(event)
        elif (session := parse_session_line(line)) is not None:
            self.sessions.append(session)

    async def wait_for(
        self, server: str, up: bool, timeout: float, since: float = 0.0
    ) -> ServerEvent:
        """The first state change of `server` to `up` logged at or after wall time `since`."""
        return await self.changes.wait_for(server, up, timeout, since)

    async def command(self, text: str) -> str:
        """One runtime API command; the answer as text."""
        reader, writer = await asyncio.open_unix_connection(str(self.admin_socket))
        try:
            writer.write(text.encode() + b"\n")
            await writer.drain()
            return (await reader.read()).decode()
        finally:
            writer.close()

    async def set_serving(self, server: str, serving: bool) -> None:
        """Put a server in or out of rotation, keeping its established connections."""
        state = "ready" if serving else "maint"
        answer = await self.command(f"set server apiservers/{server} state {state}")
        if answer.strip():
            raise ProcessError(f"{self.name}: set server {server} {state}: {answer.strip()}")

    async def server_up(self) -> dict[str, bool]:
        """Current operational state of each server (from `show servers state`)."""
        answer = await self.command("show servers state apiservers")
        states = {}
        for line in answer.splitlines():
            fields = line.split()
            if len(fields) > 6 and not line.startswith("#") and fields[1] == "apiservers":
                states[fields[3]] = fields[5] == "2" and fields[6] == "0"
        return states
