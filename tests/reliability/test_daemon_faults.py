"""Faults of the daemon's own surroundings: SIGTERM with requests in flight, the event log's
disk full or unwritable, a DNS name that stops resolving, the token file pulled away, the
metrics endpoint scraped 50 times a second. Each runs the real daemon as a subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.reliability.harness import FaultDaemon
from tests.support.certs import Certs
from tests.support.daemon_process import DaemonProcess
from tests.support.mounts import fill, needs_root, small_tmpfs
from tests.support.tls_server import TLSServer

pytestmark = [pytest.mark.slow]


async def test_sigterm_with_requests_in_flight_records_each_of_them(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """The drain is shorter than the request timeout: what is still in flight when it ends
    is recorded as a timeout, not cancelled with its task (before: `cancelled` > 0)."""
    events = tmp_path / "events.jsonl"
    args = (f"--ca-file={certs.ca_file}", "--timeout=30s", "--drain-timeout=500ms")
    async with FaultDaemon(
        "sigterm_in_flight", events, [("internal-lb", tls_server.url)], *args
    ) as daemon:
        tls_server.plan.mode = "stall"
        await tls_server.wait_for(lambda s: sum(1 for r in s.requests) > 40)
        account = await daemon.stop(
            "drain 0.5 s < timeout 30 s: requests in flight end as timeouts"
        )
    report(account)
    stopped = [s for s in account.failed if s.detail == "no answer before the daemon stopped"]
    assert len(stopped) == account.failures["timeout"] > 0


async def test_an_event_log_that_cannot_be_opened_is_one_line_and_exit_2(
    certs: Certs, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a directory\n")
    events = tmp_path / "file" / "events.jsonl"
    daemon = await DaemonProcess.start(
        "--target=internal-lb=https://127.0.0.1:1", f"--event-log={events}",
        "--listen=127.0.0.1:0", f"--ca-file={certs.ca_file}",
    )  # fmt: skip
    try:
        assert await daemon.wait() == 2
        err = await daemon.stderr()
    finally:
        await daemon.close()
    assert err == f"prober run: event_log {events}: cannot create {events.parent}: File exists\n"


def events_named(daemon: FaultDaemon, name: str) -> list[dict]:
    assert daemon.process is not None
    return [line for line in daemon.process.lines if line.get("event") == name]


async def failing_server_daemon(
    server: TLSServer, certs: Certs, fault: str, events: Path, *args: str, wrap=()
) -> FaultDaemon:
    """A daemon whose every sample fails (HTTP 500), so every sample is a line to write."""
    server.plan.status = 500
    targets = [("internal-lb", server.url)]
    return FaultDaemon(fault, events, targets, f"--ca-file={certs.ca_file}", *args, wrap=wrap)


async def keeps_counting(daemon: FaultDaemon, more: int) -> None:
    """Metrics go on: prober_requests_total grows by `more`."""
    now = await daemon.total("prober_requests_total")
    await daemon.wait_for_total("prober_requests_total", now + more, "metrics to go on")


@needs_root
async def test_a_full_disk_is_said_once_counted_and_survived(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        events = disk / "events.jsonl"
        daemon = await failing_server_daemon(
            tls_server, certs, "disk_full", events, "--event-log-max-size=64KiB"
        )
        async with daemon:
            filler = fill(disk)
            await daemon.wait_for_total(
                "prober_event_log_dropped_total", 100, "samples dropped", kind="sample"
            )
            await keeps_counting(daemon, 200)
            filler.unlink()
            await daemon.process.wait_for("event_log_write_resumed")
            await keeps_counting(daemon, 200)
            account = await daemon.stop(
                "error logged once, records counted in prober_event_log_dropped_total, "
                "metrics went on, writing resumed when space came back"
            )
        (failed,) = events_named(daemon, "event_log_write_failed")
        (resumed,) = events_named(daemon, "event_log_write_resumed")
    report(account)
    assert failed["level"] == "error"
    assert failed["error"] == "No space left on device"
    assert account.dropped["sample"] > 100
    assert resumed["dropped"] == sum(account.dropped.values())


@needs_root
async def test_an_event_log_that_may_not_grow_is_said_once_counted_and_survived(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """The file turns unwritable under the daemon: its file-size limit (RLIMIT_FSIZE) is
    lowered to the log's size, so every write fails with EFBIG until it is raised again."""
    events = tmp_path / "events.jsonl"
    daemon = await failing_server_daemon(tls_server, certs, "unwritable_file", events)
    async with daemon:
        limit = events.stat().st_size
        prlimit(daemon.pid, f"--fsize={limit}:unlimited")
        await daemon.wait_for_total(
            "prober_event_log_dropped_total", 100, "samples dropped", kind="sample"
        )
        await keeps_counting(daemon, 200)
        prlimit(daemon.pid, "--fsize=unlimited:unlimited")
        await daemon.process.wait_for("event_log_write_resumed")
        account = await daemon.stop(
            "EFBIG: error logged once, records counted, metrics went on, writing resumed"
        )
    (failed,) = events_named(daemon, "event_log_write_failed")
    report(account)
    assert failed["error"] == "File too large"
    assert account.dropped["sample"] > 100


@needs_root
async def test_a_read_only_log_directory_stops_rotation_not_writing(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """The directory turns read-only under a daemon that, like a pod's non-root user, cannot
    override file permissions: rotation cannot rename, so it writes on past the limit."""
    logs = tmp_path / "logs"
    logs.mkdir()
    events = logs / "events.jsonl"
    no_override = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    daemon = await failing_server_daemon(
        tls_server, certs, "read_only_dir", events, "--event-log-max-size=64KiB", wrap=no_override
    )
    async with daemon:
        logs.chmod(0o555)  # before the first rotation: the file it writes is already open
        try:
            await daemon.process.wait_for("event_log_rotate_failed")
            await keeps_counting(daemon, 200)
            assert events.stat().st_size > 64 * 1024
        finally:
            logs.chmod(0o755)
        await daemon.process.wait_for("event_log_rotate_resumed")
        account = await daemon.stop("rotation failed once (logged), wrote on past the limit")
    report(account)
    assert account.dropped == {}


def prlimit(pid: int, *args: str) -> None:
    subprocess.run(["prlimit", f"--pid={pid}", *args], check=True)
