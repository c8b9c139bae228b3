"""`python -m prober.fakeapiserver` as a process, driven by two clients nobody here wrote:
curl (HTTP/1.1 and HTTP/2) and nghttp (its frame log shows the GOAWAY)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from prober.core.header import apiserver_id
from prober.core.truthlog import (
    ConnectionOpened,
    EarlyAnswered,
    Listening,
    NotAcceptingNewRequest,
    ShutdownInitiated,
    TruthRecord,
    first,
    of_kind,
)
from prober.lab.infra.truth import read_truth
from tests.fakeapiserver.rawclient import RawH2
from tests.fakeapiserver.test_lifecycle import NO_RETRY_AFTER_ORDER, RETRY_AFTER_ORDER
from tests.support.apiservers import TOKEN, LabCerts, read_audit
from tests.support.waiting import until

pytestmark = pytest.mark.slow
API = "/api/v1/namespaces/default"
AUTH = f"Authorization: Bearer {TOKEN}"
ASK = "X-Openshift-If-Disruption: true"
HOST = apiserver_id("master-7")
R = TypeVar("R", bound=TruthRecord)


@dataclass
class Process:
    proc: asyncio.subprocess.Process
    port: int
    truth: Path
    audit: Path
    certs: LabCerts

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def wait_truth(self, kind: type[R], timeout: float = 15.0) -> R:
        def found() -> R | None:
            return first(read_truth(self.truth), kind) if self.truth.exists() else None

        return await until(found, f"a {kind.KIND} truth record", timeout)

    async def curl(self, *args: str) -> tuple[int, str]:
        return await run("curl", "-sS", "-i", "--cacert", str(self.certs.ca), *args)

    async def exit_code(self, timeout: float = 15.0) -> int:
        return await asyncio.wait_for(self.proc.wait(), timeout)


async def run(*command: str, timeout: float = 15.0) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(errors="replace")


StartProcess = Callable[..., "asyncio.Future[Process]"]


@pytest.fixture
async def start_process(
    certs: LabCerts, tmp_path: Path, token_file: Path
) -> AsyncIterator[Callable[..., object]]:
    started: list[asyncio.subprocess.Process] = []

    async def start(*flags: str) -> Process:
        truth, audit = tmp_path / "truth.jsonl", tmp_path / "audit" / "audit.log"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "prober.fakeapiserver", "--port", "0",
            "--cert", str(certs.server.cert), "--key", str(certs.server.key),
            "--hostname", "master-7", "--token-file", str(token_file),
            "--audit-log", str(audit), "--truth", str(truth), *flags,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        listening = json.loads(line)
        assert set(listening) == {"event", "port"}
        assert listening["event"] == "listening"
        return Process(proc, listening["port"], truth, audit, certs)

    yield start
    for proc in started:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def signals(truth: Path, order: list) -> list[str]:
    names = {s.value for s in order}
    return [r.KIND for r in read_truth(truth) if r.KIND in names]


async def test_sigterm_with_retry_after_seen_by_curl_and_nghttp(
    start_process: Callable, certs: LabCerts
) -> None:
    server: Process = await start_process(
        "--shutdown-delay-duration=1s",
        "--shutdown-watch-termination-grace-period=10s",
        "--watch-drain-min-qps=1",
    )
    for flag, name in (
        ("--http2", "x-openshift-disruption"),
        ("--http1.1", "X-Openshift-Disruption"),
    ):
        code, out = await server.curl(flag, "-H", ASK, "-H", AUTH, server.url(API))
        assert code == 0, out
        assert out.startswith("HTTP/2 200" if flag == "--http2" else "HTTP/1.1 200 OK")
        assert (
            f"{name}: shutdown=false shutdown-delay-duration=1s elapsed=0s host={HOST}\r\n" in out
        )
        assert "x-backend: master-7" in out.lower()
    # Three watches hold the 429 phase open: they drain at one per second.
    watcher = await RawH2.connect(server.port, certs.ca)
    for _ in range(3):
        await watcher.request("/api/v1/namespaces?watch=1", [("authorization", f"Bearer {TOKEN}")])
    await watcher.read_until(lambda c: all(s.body for s in c.streams.values()))

    server.proc.send_signal(signal.SIGTERM)
    await server.wait_truth(ShutdownInitiated)
    code, out = await server.curl("--http2", server.url("/readyz"))
    assert out.startswith("HTTP/2 500")
    assert out.endswith("[-]shutdown failed: reason withheld\nreadyz check failed\n")

    await server.wait_truth(NotAcceptingNewRequest)
    code, out = await server.curl("--http2", "-H", AUTH, server.url(API))
    assert out.startswith("HTTP/2 429")
    assert "retry-after: 5\r\n" in out
    code, out = await server.curl("--http1.1", "-H", AUTH, server.url(API))
    assert out.startswith("HTTP/1.1 429 Too Many Requests")
    assert "Connection: close\r\n" in out
    code, out = await run("nghttp", "-v", "-H", AUTH.lower(), server.url(API))
    assert "recv (stream_id=13) :status: 429" in out
    goaway = re.search(r"recv GOAWAY frame.*\n\s*\(last_stream_id=(\d+), error_code=(\S+)\(", out)
    assert goaway is not None, out
    assert goaway.groups() == ("13", "NO_ERROR")

    assert await server.exit_code() == 0
    await watcher.close()
    assert signals(server.truth, RETRY_AFTER_ORDER) == [s.value for s in RETRY_AFTER_ORDER]
    audit = read_audit(server.audit)
    assert {e["responseStatus"]["code"] for e in audit} == {200, 500}
    assert "curl" in {e.get("userAgent", "").split("/")[0] for e in audit}
    after_start = [e for e in audit if e["responseStatus"]["code"] == 500]
    assert after_start[0]["annotations"]["apiserver.k8s.io/shutdown"].startswith("elapsed=")


async def test_admin_trigger_without_retry_after_nghttp_sees_goaway_then_its_stream_end(
    start_process: Callable,
) -> None:
    server: Process = await start_process(
        "--shutdown-delay-duration=1s",
        "--no-shutdown-send-retry-after",
        "--shutdown-watch-termination-grace-period=1s",
    )
    watch = await asyncio.create_subprocess_exec(
        "nghttp", "-v", "-H", AUTH.lower(), server.url("/api/v1/namespaces?watch=true"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        await server.wait_truth(ConnectionOpened)
        code, out = await server.curl("-X", "POST", "-H", AUTH, server.url("/_lab/shutdown"))
        assert " 202" in out.splitlines()[0]
        out = (await asyncio.wait_for(watch.communicate(), 15))[0].decode()
    finally:
        if watch.returncode is None:
            watch.kill()
            await watch.wait()
    goaway_at = out.index("recv GOAWAY frame")
    assert "(last_stream_id=13, error_code=NO_ERROR(0x00)" in out[goaway_at:]
    end = re.search(r"recv DATA frame <length=0, flags=0x01, stream_id=13>\n\s*; END_STREAM", out)
    assert end is not None, out
    assert end.start() > goaway_at, "the watch below last_stream_id completes after the GOAWAY"
    code, _ = await server.curl("--http2", server.url("/readyz"))
    assert code == 7, "the listener is closed: connection refused"
    assert await server.exit_code() == 0
    assert signals(server.truth, NO_RETRY_AFTER_ORDER) == [s.value for s in NO_RETRY_AFTER_ORDER]
    started = first(read_truth(server.truth), ShutdownInitiated)
    assert started is not None
    assert started.trigger == "admin"


async def test_sigkill_is_a_crash_without_lifecycle_signals(start_process: Callable) -> None:
    server: Process = await start_process("--shutdown-delay-duration=10s")
    _code, out = await server.curl("--http2", server.url("/readyz"))
    assert out.startswith("HTTP/2 200")
    server.proc.send_signal(signal.SIGKILL)
    assert await server.exit_code() == -signal.SIGKILL
    assert not signals(server.truth, RETRY_AFTER_ORDER)


async def next_line(server: Process) -> dict:
    assert server.proc.stdout is not None
    return json.loads(await asyncio.wait_for(server.proc.stdout.readline(), 30))


async def test_it_serves_from_listening_and_says_when_it_is_ready(start_process: Callable) -> None:
    server: Process = await start_process()
    serving, ready = await next_line(server), await next_line(server)
    assert (serving["event"], ready["event"]) == ("serving", "ready")
    assert serving["holder"] == ready["holder"]
    assert ready["holder"].startswith(HOST + "_")


async def test_early_ready_says_ok_and_curl_meets_a_403_with_the_header(
    start_process: Callable,
) -> None:
    server: Process = await start_process(
        "--post-start-hooks-duration=200ms", "--early-ready-duration=1m", "--early-ready-answer=403"
    )
    ready = await next_line(server)
    assert ready["event"] == "ready"
    code, out = await server.curl("--http2", server.url("/readyz"))
    assert code == 0, out
    assert out.startswith("HTTP/2 200")
    assert out.endswith("\r\n\r\nok")
    code, out = await server.curl(
        "--http2", "-H", ASK, "-H", AUTH, "-H", "Audit-ID: curl-early", server.url(API)
    )
    assert code == 0, out
    assert out.startswith("HTTP/2 403")
    header = f"shutdown=false shutdown-delay-duration=0s elapsed=0s host={HOST}"
    assert f"x-openshift-disruption: {header}\r\n" in out
    record = await server.wait_truth(EarlyAnswered)
    assert (record.request.audit_id, record.status, record.how) == ("curl-early", 403, "answered")
    assert record.request.after_ready
    (listening,) = of_kind(read_truth(server.truth), Listening)
    assert (listening.holder, listening.early_ready) == (ready["holder"], 60.0)
    (audited,) = [e for e in read_audit(server.audit) if e["auditID"] == "curl-early"]
    assert audited["responseStatus"]["code"] == 403
