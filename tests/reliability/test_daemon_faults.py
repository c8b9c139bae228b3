"""Faults of the daemon's own surroundings: SIGTERM with requests in flight, the event log's
disk full or unwritable, a DNS name that stops resolving, the token file pulled away, the
metrics endpoint scraped 50 times a second. Each runs the real daemon as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from prober.core.stats import percentiles
from prober.fakeapiserver import ApiServer, ApiServerOptions, load_tokens
from prober.lab.infra.certs import make_certificates
from tests.reliability.harness import FaultDaemon, failed_audit_ids
from tests.support.certs import Certs
from tests.support.daemon_process import DaemonProcess
from tests.support.mounts import fill, needs_root, small_tmpfs
from tests.support.tls_server import TLSServer

pytestmark = [pytest.mark.slow]


async def test_sigterm_with_requests_in_flight_records_each_of_them(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """The drain is shorter than the request timeout: what is still in flight when it ends
    is recorded as a sample of class `stopped`, not cancelled with its task (before:
    `cancelled` > 0), nor a timeout (before: a failure, and a disruption interval)."""
    events = tmp_path / "events.jsonl"
    args = (f"--ca-file={certs.ca_file}", "--timeout=30s", "--drain-timeout=500ms")
    async with FaultDaemon(
        "sigterm_in_flight", events, [("internal-lb", tls_server.url)], *args
    ) as daemon:
        tls_server.plan.mode = "stall"
        await tls_server.wait_for(lambda s: len(s.requests) > 40)
        account = await daemon.stop(
            "drain 0.5 s < timeout 30 s: requests in flight end as class stopped"
        )
    report(account)
    assert len(account.cut) == account.summary["stopped"] > 0
    assert all(s.detail.startswith("cut by the daemon's stop") for s in account.cut)
    assert account.failures["timeout"] == 0
    assert not account.failed  # a request the stop cut is no failure


async def test_an_event_log_that_cannot_be_opened_is_one_line_and_exit_2(
    certs: Certs, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("not a directory\n")
    events = tmp_path / "file" / "events.jsonl"
    daemon = await DaemonProcess.start(
        "--target=internal-lb=https://127.0.0.1:1", f"--event-log={events}",
        "--listen=127.0.0.1:0", "--watches=false", f"--ca-file={certs.ca_file}",
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


def failing_server_daemon(
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
        daemon = failing_server_daemon(
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
    daemon = failing_server_daemon(tls_server, certs, "unwritable_file", events)
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
    daemon = failing_server_daemon(
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


async def test_the_token_file_removed_emptied_or_replaced_mid_run(tmp_path: Path, report) -> None:
    """Against the lab's fake apiserver, which authenticates: a removed or emptied token
    file keeps the last token (a kubelet swap is not atomic for a reader), and so does one
    holding what no header can carry (before: every request raised, the streams' tasks
    crashed and their samples were lost); a replaced one is used from the next request, a
    token the server does not know is HTTP 401."""
    ca_file, cert = make_certificates(tmp_path / "pki", ["127.0.0.1", "localhost"])
    accepted = tmp_path / "server-tokens"
    accepted.write_text(f"{TOKEN}\n{ROTATED}\n")
    server = ApiServer(
        ApiServerOptions(
            cert=cert.cert, key=cert.key, port=0, hostname="master-0",
            tokens=load_tokens(accepted), audit_log=tmp_path / "audit.log",
        )
    )  # fmt: skip
    ports = await server.start()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    events = tmp_path / "events.jsonl"
    targets = [("internal-lb", f"https://127.0.0.1:{ports.port}")]
    args = (f"--ca-file={ca_file}", f"--token-file={token}", "--timeout=5s")
    try:
        async with FaultDaemon("token_file", events, targets, *args) as daemon:
            token.unlink()
            await daemon.process.wait_for(lambda e: "cannot stat" in e.get("detail", ""))
            await successes(daemon, 40)
            token.write_text("")
            await daemon.process.wait_for(lambda e: e.get("detail", "").endswith(": empty"))
            await successes(daemon, 40)
            replace(token, ROTATED)
            await daemon.process.wait_for("token_reloaded")
            await successes(daemon, 40)
            replace(token, "tøken-with-a-letter-no-header-can-carry")
            await daemon.process.wait_for(lambda e: "not a bearer token" in e.get("detail", ""))
            await successes(daemon, 40)
            replace(token, "a-token-nobody-knows")
            await daemon.wait_for_total("prober_requests_total", 20, "401s", result="http_4xx")
            replace(token, TOKEN)
            await successes(daemon, 40)
            account = await daemon.stop(
                "removed, emptied or not ASCII: kept the last token (logged once each); "
                "replaced: reloaded; unknown to the server: http_4xx until put right"
            )
    finally:
        await server.kill()
    audited = audit_ids(tmp_path / "audit.log")
    account.server_seen = len(audited)
    account.reached = len(failed_audit_ids(events) & audited)
    report(account)
    assert set(account.failures) == {"http_4xx"}
    assert all(s.detail == "HTTP 401" for s in account.failed)
    output = b"".join(daemon.process.raw).decode()
    assert TOKEN not in output
    assert ROTATED not in output
    assert output.count('"token_unreadable"') == 3
    assert '"task_failed"' not in output


TOKEN = "reliability-token-5b1e"
ROTATED = "reliability-token-rotated-77c0"


def replace(path: Path, text: str) -> None:
    """As the kubelet does: a new file renamed over the old one."""
    new = path.with_name(path.name + ".new")
    new.write_text(text + "\n")
    os.replace(new, path)


async def successes(daemon: FaultDaemon, more: int) -> None:
    now = await daemon.total("prober_requests_total", result="success")
    await daemon.wait_for_total("prober_requests_total", now + more, "successes", result="success")


def audit_ids(path: Path) -> set[str]:
    """Audit IDs of the prober's requests in a fake apiserver's audit log."""
    found = set()
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("userAgent", "").startswith("prober/"):
            found.add(event["auditID"])
    return found


@needs_root
async def test_a_name_that_stops_resolving_is_dns_and_comes_back(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """The daemon runs in a mount namespace of its own whose /etc/hosts is a file of the
    test's, and whose resolver reads only that file (no DNS query leaves the machine).
    Taking the name out of it makes new connections fail with `dns`; kept ones go on."""
    machine_hosts = read_bytes(Path("/etc/hosts"))
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 {NAME}\n")
    nsswitch = tmp_path / "nsswitch.conf"
    nsswitch.write_text("hosts: files\n")
    private_resolver = [
        "unshare", "--mount", "--propagation=private", "--", "sh", "-c",
        'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/nsswitch.conf '
        '&& shift 2 && exec "$@"',
        "sh", str(hosts), str(nsswitch),
    ]  # fmt: skip
    events = tmp_path / "events.jsonl"
    url = f"https://{NAME}:{tls_server.port}"
    daemon = FaultDaemon(
        "dns", events, [("internal-lb", url)], f"--ca-file={certs.ca_file}",
        "--timeout=5s", wrap=private_resolver,
    )  # fmt: skip
    async with daemon:
        hosts.write_text("# the name is gone\n")  # in place: the bind mount follows the inode
        await daemon.wait_for_total("prober_requests_total", 20, "dns failures", result="dns")
        hosts.write_text(f"127.0.0.1 {NAME}\n")
        await successes(daemon, 80)
        account = await daemon.stop(
            "new connections: dns while the name was gone; kept connections went on"
        )
    account.server_seen = len(tls_server.requests)
    account.reached = 0  # a request that could not resolve never reached the server
    report(account)
    assert set(account.failures) == {"dns"}
    assert all(s.reused is False for s in account.failed)  # only new connections resolve
    assert read_bytes(Path("/etc/hosts")) == machine_hosts  # the machine's was never touched


NAME = "api.prober.test"  # in the test certificates


def read_bytes(path: Path) -> bytes:
    return path.read_bytes()


async def test_metrics_scraped_50_times_a_second_lose_no_sample(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    events = tmp_path / "events.jsonl"
    targets = [("internal-lb", tls_server.url)]
    args = (f"--ca-file={certs.ca_file}", "--timeout=5s")
    async with FaultDaemon("scrape_50_per_second", events, targets, *args) as daemon:
        before = await daemon.total("prober_requests_total")
        latencies = await scrape(daemon.port, per_second=50, seconds=3.0)
        during = await daemon.total("prober_requests_total") - before
        spread = percentiles(latencies)
        p50, p99 = spread.p50, spread.p99
        account = await daemon.stop(
            f"150 scrapes in 3 s: latency p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
            f"max {max(latencies) * 1000:.1f} ms; {during / 3:.0f} samples/s (nominal 320)"
        )
    account.server_seen = len(tls_server.requests)
    account.reached = 0
    report(account)
    print(account.did)
    # Latency and rate are speed figures: printed here, held in `bench/scrape_latency.py`.
    assert len(latencies) == 150
    assert during > 0  # the pipeline kept feeding the metrics while they were scraped


async def scrape(port: int, per_second: float, seconds: float) -> list[float]:
    """Scrape /metrics at a steady rate over one kept-alive connection; each latency."""
    latencies = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        for index in range(round(per_second * seconds)):
            await asyncio.sleep(max(0.0, start + index / per_second - loop.time()))
            sent = loop.time()
            answer = await client.get("/metrics")
            latencies.append(loop.time() - sent)
            assert answer.status_code == 200
            assert b"prober_requests_total" in answer.content
    return latencies


@needs_root
async def test_logs_on_a_full_disk_cost_no_sample(
    tls_server: TLSServer, certs: Certs, tmp_path: Path, report
) -> None:
    """stdout redirected to a file on the disk that fills up, with the event log: a log line
    that cannot be written must not stop the pipeline (before: the first one raised in the
    pipeline's log sink, the supervisor's own log line about it raised too, and the pipeline
    never ran again: metrics froze and samples piled up in memory)."""
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        logfile, events = disk / "daemon.log", disk / "events.jsonl"
        to_file = ["sh", "-c", 'exec "$@" > "$0"', str(logfile)]
        daemon = FaultDaemon(
            "stdout_disk_full", events, [("internal-lb", tls_server.url)],
            f"--ca-file={certs.ca_file}", "--timeout=5s", wrap=to_file, log_file=logfile,
        )  # fmt: skip
        async with daemon:
            filler = fill(disk)
            flapping = asyncio.create_task(flap(tls_server))  # intervals open and close
            try:
                await daemon.wait_for_total(
                    "prober_event_log_dropped_total", 50, "records dropped", kind="interval"
                )
                await keeps_counting(daemon, 300)
            finally:
                flapping.cancel()
                tls_server.plan.status = 200
            filler.unlink()
            account = await daemon.stop(
                "log lines and records that found no room were dropped; the pipeline and "
                "the metrics went on"
            )
    report(account)
    assert account.dropped["interval"] >= 50


async def flap(server: TLSServer) -> None:
    """HTTP 500 and 200 in turn, 50 ms each: a stream of short disruption intervals."""
    while True:
        server.plan.status = 500 if server.plan.status == 200 else 200
        await asyncio.sleep(0.05)
