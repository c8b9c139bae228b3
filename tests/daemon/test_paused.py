"""Samples dropped on purpose: the real `prober run` is paused (SIGSTOP) inside a shutdown
window and resumed (SIGCONT). Its own coverage record must say so, and `prober analyze` must
fail "should have sampled each shutdown window without a gap" with the gap's length and place.

The pause is the test's own act, not a race: a request sent before SIGSTOP was sent before
it, one sent after SIGCONT after it, so the gap in the daemon's sampling is at least the pause
(a lower bound only: how soon the daemon sends again depends on the machine)."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from prober.cli import main
from prober.core.coverage import Coverage
from prober.core.header import format_shutdown_header
from prober.core.kinds import standard_kinds
from prober.core.models import RunRecord, parse_rfc3339
from prober.report.verdicts.identity import Case
from tests.support.certs import Certs
from tests.support.daemon_process import DaemonProcess
from tests.support.replay import read_log
from tests.support.tls_server import HOST_ID, READY, TLSServer

PAUSE = 2.0  # seconds the daemon is stopped: 80 of its 25 ms ticks per stream
SAMPLED = Case.SAMPLED.format(lb="internal-lb", protocol="http1", connection="new")
GAP = re.compile(
    r"a (\d+\.\d+) s gap from (\d+\.\d+) s to (\d+\.\d+) s run time \((\S+) to (\S+)\)"
)


def args(server: TLSServer, certs: Certs, token: Path, events: Path) -> list[str]:
    return [
        f"--target=internal-lb={server.url}",
        f"--ca-file={certs.ca_file}",
        f"--token-file={token}",
        "--interval=50ms",  # 2 workers: one request every 25 ms per stream, limit 100 ms
        "--quiet-interval=0",  # one fixed rate: the window gap from the start
        "--listen=127.0.0.1:0",
        "--watches=false",
        f"--event-log={events}",
        "--drain-timeout=2s",
        "--timeout=2s",
    ]


async def test_a_paused_daemon_fails_the_sampling_test_with_the_gaps_length_and_place(
    tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path, capsys
) -> None:
    events = tmp_path / "events.jsonl"
    daemon = await DaemonProcess.start(*args(tls_server, certs, token_file, events))
    try:
        await daemon.wait_for("ready")
        went_down = time.monotonic()
        tls_server.plan.header = lambda: format_shutdown_header(
            True, 70, time.monotonic() - went_down, HOST_ID
        )
        await daemon.wait_for("shutdown_window_opened")
        await daemon.signal(signal.SIGSTOP)
        stopped_at = time.time()
        await asyncio.sleep(PAUSE)  # the pause itself: the process cannot run meanwhile
        resumed_at = time.time()
        await daemon.signal(signal.SIGCONT)
        seen = len(tls_server.requests)
        await tls_server.wait_for(lambda server: len(server.requests) > seen + 20)
        tls_server.plan.header = READY  # the host answers shutdown=false: the window closes
        await daemon.wait_for("shutdown_window_closed")
        await daemon.signal(signal.SIGTERM)
        assert await daemon.wait(timeout=15) == 0
    finally:
        await daemon.close()
    past = await daemon.wait_for("window_gap_past_limit", timeout=1)  # said in its own log
    assert past["gap"] >= PAUSE

    log = read_log(events, types=standard_kinds().record_types)
    start = parse_rfc3339(log.of(RunRecord)[0].ts)
    (coverage,) = log.of(Coverage)
    for stream in coverage.streams:
        assert stream.gap is not None
        assert stream.gap >= PAUSE  # the pause, with whatever the loaded machine added
        assert stream.taken < stream.due  # the ticks missed in the pause were skipped
        # Its place: the wall clocks of both processes put it around the pause (a clock
        # step between them is all that could move it).
        assert start + stream.gap_start <= stopped_at < resumed_at <= start + stream.gap_end

    out = tmp_path / "out"
    assert main(["analyze", str(events), "--out", str(out)]) == 1
    capsys.readouterr()
    cases = {c.name: c for suite in JUnitXml.fromfile(str(out / "junit.xml")) for c in suite}
    (failure,) = cases[SAMPLED].result
    assert isinstance(failure, Failure)
    assert f"shutdown window of {HOST_ID} #1 (apiserver {HOST_ID}, T0 " in failure.message
    found = GAP.search(failure.message)
    assert found is not None, failure.message
    length, begin, end = (float(found[i]) for i in (1, 2, 3))
    assert length >= PAUSE
    assert parse_rfc3339(found[4]) <= stopped_at < resumed_at <= parse_rfc3339(found[5])
    [mine] = [s for s in coverage.streams if s.stream.endswith("http1-internal-lb-new-connections")]
    assert (begin, end) == pytest.approx((mine.gap_start, mine.gap_end), abs=5e-4)  # as printed
