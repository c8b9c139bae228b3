"""The real `prober run` as a subprocess: SIGTERM drains and exits 0 with a complete event log;
SIGKILL leaves a log readable up to its last whole line; bad input is one line and exit 2."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from prober.cli import main
from prober.core.models import Interval, RunRecord, Sample, Summary, Window
from tests.support.certs import Certs
from tests.support.daemon_process import DaemonProcess
from tests.support.replay import read_log, replay
from tests.support.tls_server import TLSServer


def args(server: TLSServer, certs: Certs, token: Path, events: Path) -> list[str]:
    return [
        f"--target=internal-lb={server.url}",
        f"--ca-file={certs.ca_file}",
        f"--token-file={token}",
        "--interval=50ms",
        "--quiet-interval=0",  # one fixed rate: this test counts on it
        "--listen=127.0.0.1:0",
        "--watches=false",
        f"--event-log={events}",
        "--drain-timeout=2s",
        "--timeout=60s",  # a request in flight at SIGTERM ends by the drain's bound, not this
    ]


async def test_sigterm_drains_and_leaves_a_complete_log(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    daemon = await DaemonProcess.start(*args(tls_server, certs, token_file, events))
    try:
        listening = await daemon.wait_for("listening")
        assert listening["port"] > 0
        await daemon.wait_for("ready")
        await tls_server.refuse()  # a disruption is open when the signal comes
        await daemon.wait_for("disruption_started")
        tls_server.plan.mode = "stall"  # and requests are in flight
        seen = len(tls_server.requests)
        await tls_server.accept()
        # A request the server holds: on a busy machine the next one may not have left yet.
        await tls_server.wait_for(lambda server: len(server.requests) > seen)
        await daemon.signal(signal.SIGTERM)
        # Stalled requests run to their 60 s timeout unless the drain's 2 s end them.
        assert await daemon.wait(timeout=15) == 0
    finally:
        await daemon.close()
    stopping = await daemon.wait_for("stopping", timeout=1)
    assert stopping["in_flight"] > 0
    stopped = await daemon.wait_for("stopped", timeout=1)
    assert stopped["reason"] == "SIGTERM"
    assert stopped["cancelled"] == 0  # each request in flight ended as a sample

    log = read_log(events)  # strict: every line must decode
    assert isinstance(log.records[0], RunRecord)
    assert isinstance(log.records[-1], Summary)
    final = log.records[-1]
    open_at_end = [i for i in log.of(Interval) if i.end_t == final.t]
    assert open_at_end, "the open disruption closes at the end of the run"
    intervals, windows = replay(log)
    assert intervals == log.of(Interval)
    assert windows == log.of(Window)
    assert sum(s.samples for s in final.streams) == stopped["samples"]


async def test_sigkill_leaves_a_log_readable_to_its_last_whole_line(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path
) -> None:
    events = tmp_path / "events.jsonl"
    daemon = await DaemonProcess.start(*args(tls_server, certs, token_file, events))
    try:
        await daemon.wait_for("ready")
        await tls_server.refuse()  # every failure is written: the log is busy when killed
        await daemon.wait_for("disruption_started")
        await daemon.signal(signal.SIGKILL)
        assert await daemon.wait() == -signal.SIGKILL
    finally:
        await daemon.close()
    log = read_log(events, strict=False)
    assert isinstance(log.records[0], RunRecord)
    assert len(log.of(Sample)) > 0
    assert log.skipped == (1 if log.truncated else 0)
    if not events.read_bytes().endswith(b"\n"):
        assert log.truncated


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--target", "internal-lb=https://a:6443", "--workers", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "prober run: --workers: expected a whole number of at least 1, got 'none'\n"
    assert main(["run"]) == 2
    assert capsys.readouterr().err.startswith("prober run: targets: none configured")


async def test_a_taken_port_is_one_line_and_exit_2(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path
) -> None:
    taken = f"--listen=127.0.0.1:{tls_server.port}"
    daemon = await DaemonProcess.start(
        *args(tls_server, certs, token_file, tmp_path / "e.jsonl"), taken
    )
    try:
        assert await daemon.wait() == 2
        err = await daemon.stderr()
    finally:
        await daemon.close()
    assert err.startswith(f"prober run: listen 127.0.0.1:{tls_server.port}: ")
    assert err.count("\n") == 1
