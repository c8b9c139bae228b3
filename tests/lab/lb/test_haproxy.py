"""HAProxy as each platform's LB: configurations HAProxy accepts, state changes it logs."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest

from prober.core.models import LB
from prober.lab.infra.haproxy import (
    Backend,
    HaproxyLB,
    free_port,
    parse_session_line,
    parse_state_line,
    render_config,
)
from prober.lab.infra.platforms import (
    CHECK_TIMEOUT_FLOOR,
    PLATFORMS,
    SYNC_DELAY_FLOOR,
    as_built,
    slow_lb,
)
from prober.lab.infra.processes import ProcessGroup
from tests.support.waiting import until

DOWN = (
    "<129>1 2026-11-30T23:48:06.068173+00:00 - haproxy 7462 - - Server apiservers/master-0 is "
    'DOWN, reason: Layer7 wrong status, code: 500, info: "Internal Server Error", check '
    "duration: 1ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 "
    "remaining in queue."
)
UP = (
    "<133>1 2026-11-30T23:49:06.5+00:00 - haproxy 7462 - - Server apiservers/master-0 is UP, "
    "reason: Layer7 check passed, code: 200, check duration: 2ms. 3 active and 0 backup servers "
    "online. 0 sessions requeued, 0 total in queue."
)
MAINT = (
    "<129>1 2026-11-30T23:48:42.483990+00:00 - haproxy 7487 - - Server apiservers/master-1 is "
    "going DOWN for maintenance. 0 active and 0 backup servers left. 0 sessions active, 0 "
    "requeued, 0 remaining in queue."
)


def test_parses_state_changes_with_microseconds() -> None:
    down = parse_state_line(DOWN)
    assert down is not None
    assert (down.server, down.up) == ("master-0", False)
    assert down.wall == pytest.approx(1796082486.068173, abs=1e-6)
    assert down.reason.startswith("reason: Layer7 wrong status, code: 500")
    up = parse_state_line(UP)
    assert up is not None
    assert (up.server, up.up) == ("master-0", True)
    maint = parse_state_line(MAINT)
    assert maint is not None
    assert (maint.server, maint.up, maint.reason) == (
        "master-1",
        False,
        "maintenance",
    )
    entered = parse_state_line(
        "<133>1 2026-11-30T23:50:25.261883+00:00 - haproxy 7874 - - Server apiservers/master-1 "
        "was DOWN and now enters maintenance."
    )
    assert entered is not None
    assert (entered.up, entered.reason) == (False, "maintenance")
    assert parse_state_line("[WARNING]  (7462) : Server apiservers/master-0 is DOWN") is None
    assert parse_state_line("<128>1 2026-11-30T23:48:06+00:00 - haproxy 1 - - backend x") is None


BACKENDS = [Backend(f"master-{i}", 6443 + i, health_port=6080 + i) for i in range(3)]
CASES = [
    (name, profile)
    for name, platform in sorted(PLATFORMS.items())
    for profile in (*platform.lbs, slow_lb(platform).lb(LB.EXTERNAL))
]


@pytest.mark.parametrize(("platform", "profile"), CASES, ids=[f"{n}-{p.lb}" for n, p in CASES])
def test_every_profile_renders_a_config_haproxy_accepts(platform, profile, tmp_path: Path) -> None:
    config = tmp_path / "haproxy.cfg"
    config.write_text(render_config(profile, 16443, BACKENDS, tmp_path / "admin.sock"))
    result = subprocess.run(
        ["haproxy", "-c", "-f", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_profiles_follow_the_reference() -> None:
    aws = render_config(PLATFORMS["aws"].lb(LB.INTERNAL), 1, BACKENDS, Path("/s"))
    assert "default-server check inter 10000ms fall 2 rise 2 check-ssl verify none " in aws
    assert "on-marked-down shutdown-sessions" in aws
    assert "option httpchk GET /readyz" in aws
    gcp_ext = render_config(PLATFORMS["gcp"].lb(LB.EXTERNAL), 1, BACKENDS, Path("/s"))
    assert "check-ssl" not in gcp_ext
    assert "server master-1 127.0.0.1:6444 port 6081" in gcp_ext
    assert "shutdown-sessions" not in gcp_ext
    svc = render_config(PLATFORMS["azure"].lb(LB.SERVICE_NETWORK), 1, BACKENDS, Path("/s"))
    assert "httpchk" not in svc
    assert "default-server" not in svc
    metal = render_config(PLATFORMS["metal"].lb(LB.INTERNAL), 1, BACKENDS, Path("/s"))
    assert "fastinter 2000ms" in metal
    assert "slowstart 60000ms" in metal
    scaled = PLATFORMS["aws"].scaled(0.1)
    assert scaled.shutdown_delay == pytest.approx(12.9)
    assert scaled.lb(LB.INTERNAL).check.interval == pytest.approx(1.0)


def test_slow_lb_cannot_mark_a_target_down_within_the_shutdown_delay() -> None:
    for platform in PLATFORMS.values():
        check = slow_lb(platform).lb(LB.EXTERNAL).check
        assert check is not None
        assert check.worst_detection > platform.shutdown_delay


def test_as_built_floors_what_a_python_actor_cannot_keep_and_nothing_else() -> None:
    gcp = PLATFORMS["gcp"]
    built = as_built(gcp.scaled(0.05))
    check = built.lb(LB.INTERNAL).check
    assert check is not None
    assert check.timeout == CHECK_TIMEOUT_FLOOR  # 2 s x 0.05 = 0.1 s, floored
    assert check.interval == pytest.approx(0.1)  # the rest as scaled
    assert built.lb(LB.SERVICE_NETWORK).sync_delay == SYNC_DELAY_FLOOR  # 0.1 s, floored
    assert as_built(gcp) == gcp  # real durations need no floor


async def test_haproxy_logs_state_changes_and_obeys_the_runtime_api(tmp_path: Path) -> None:
    # Backends on ports nobody listens on: the L4 checks fail at once and HAProxy marks them
    # down; the runtime API then takes one into maintenance, which it logs too.
    profile = PLATFORMS["gcp"].scaled(0.1).lb(LB.INTERNAL)
    backends = [Backend(f"master-{i}", free_port()) for i in range(2)]
    lb = HaproxyLB(profile, backends, tmp_path)
    before = time.time()
    async with ProcessGroup(tmp_path / "logs") as group:
        await lb.start(group)
        down = await lb.wait_for("master-0", up=False, timeout=10)
        assert before - 1 <= down.wall <= time.time() + 1
        assert "Connection refused" in down.reason
        down1 = await lb.wait_for("master-1", up=False, timeout=10)
        assert await lb.server_up() == {"master-0": False, "master-1": False}
        await lb.set_serving("master-1", False)
        maint = await lb.wait_for("master-1", up=False, timeout=10, since=down1.wall + 1e-6)
        assert maint.reason == "maintenance"
    assert lb.config_path.exists()
    assert (tmp_path / "logs" / "haproxy-internal-lb.stdout.log").read_text().count("is DOWN") >= 2


def test_free_ports_lie_below_the_ephemeral_range_and_are_given_once() -> None:
    """No connection's source port can take one between its choice and its bind."""
    from prober.lab.infra.haproxy import FIRST_PORT, _ephemeral_low, free_port

    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(FIRST_PORT <= port < _ephemeral_low() for port in ports)


async def test_each_session_is_logged_with_the_address_the_server_sees(tmp_path: Path) -> None:
    """HAProxy connects to the server from an address of its own; its session line, logged
    as it connects, joins the client's address to that one (`lab.judges.watchpairs`)."""
    seen: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        seen.append(f"{host}:{port}")
        await reader.read()
        writer.close()

    port = free_port()
    server = await asyncio.start_server(accept, "127.0.0.1", port)
    profile = PLATFORMS["gcp"].scaled(0.1).lb(LB.SERVICE_NETWORK)  # no health check
    lb = HaproxyLB(profile, [Backend("master-0", port)], tmp_path)
    async with server, ProcessGroup(tmp_path / "logs") as group:
        await lb.start(group)
        _, writer = await asyncio.open_connection(*lb.address)
        host, local = writer.get_extra_info("sockname")[:2]
        await until(lambda: bool(seen and lb.sessions), "the session at both ends", 10)
        writer.close()
    [session] = lb.sessions
    assert (session.client, session.backend, session.server) == (
        f"{host}:{local}",
        seen[0],
        "master-0",
    )
    assert parse_session_line("<134>1 2026-12-06T03:10:24.18+00:00 - haproxy 1 - - x") is None
