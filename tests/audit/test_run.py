"""`follow` as it runs: polling, metrics on a registry, `/metrics` scraped, logs, SIGTERM."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import httpx
import pytest
import structlog
from prometheus_client import CollectorRegistry

from prober.audit.files import discover
from prober.audit.follow import Follower, PollReport
from prober.audit.metrics import AuditMetrics
from prober.audit.run import STATE_FILE, FollowRunner
from prober.audit.state import load_state
from prober.common.statusserver import StatusServer
from tests.support.auditlog import OPERATOR, PROBER, append, event, graceful, line
from tests.support.waiting import until

REPO = Path(__file__).resolve().parents[2]
LATE = "prober_audit_late_requests_total"


def late(t: float, agent: str = PROBER) -> bytes:
    return line(event(t, user_agent=agent, annotations=graceful()))


class Running:
    """A FollowRunner polling every 10 ms in this event loop, with its log captured."""

    def __init__(
        self, directory: Path, state_path: Path, follower_type: type[Follower] = Follower
    ) -> None:
        families, _ = discover([directory], node="master-0")
        self.registry = CollectorRegistry()
        self.output = io.StringIO()
        log = structlog.wrap_logger(
            structlog.PrintLogger(self.output),
            processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
        )
        follower = follower_type(families, load_state(state_path))
        self.runner = FollowRunner(
            follower=follower,
            state_path=state_path,
            metrics=AuditMetrics(self.registry),
            interval=0.01,
            log=log,
        )
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.runner.run(self.stop), name="audit-follow")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)

    def late(self, agent: str) -> float | None:
        return self.registry.get_sample_value(LATE, {"apiserver": "master-0", "user_agent": agent})

    def logs(self) -> list[dict[str, object]]:
        return [json.loads(x) for x in self.output.getvalue().splitlines()]


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / "audit.log").write_bytes(b"")
    return directory


async def test_late_requests_become_metrics_and_log_lines(logdir: Path, tmp_path: Path):
    async with Running(logdir, tmp_path / "state.json") as running:
        append(logdir / "audit.log", line(event(1)), late(2), late(3), late(4, OPERATOR))
        await running.runner.wait_until(lambda: running.runner.lines >= 4)
        assert running.late("prober") == 2
        assert running.late("cluster-kube-apiserver-operator") == 1
        assert (
            running.registry.get_sample_value(
                "prober_audit_events_total", {"apiserver": "master-0"}
            )
            == 4
        )
        append(logdir / "audit.log", b"garbage\n")
        await running.runner.wait_until(lambda: running.runner.lines >= 5)
        assert (
            running.registry.get_sample_value(
                "prober_audit_bad_lines_total", {"apiserver": "master-0", "reason": "not_json"}
            )
            == 1
        )
    records = running.logs()
    lates = [r for r in records if r["event"] == "late requests"]
    assert {(r["user_agent"], r["new"], r["total"]) for r in lates} == {
        ("prober", 2, 2),
        ("cluster-kube-apiserver-operator", 1, 1),
    }
    assert any(r["event"] == "audit log problem" and "not json" in str(r["problem"])
               for r in records)  # fmt: skip
    saved = load_state(tmp_path / "state.json")
    assert saved.counts["master-0"].late == {"prober": 2, "cluster-kube-apiserver-operator": 1}


class GatedFollower(Follower):
    """Holds a poll that read lines in its thread, after counting them, until `gate` opens."""

    counted = threading.Event()
    gate = threading.Event()

    def poll(self) -> PollReport:
        report = super().poll()
        if report.lines:
            self.counted.set()
            self.gate.wait(30)
        return report


async def test_lines_move_only_once_the_polls_metrics_are_out(logdir: Path, tmp_path: Path):
    # The follower has counted the line in its thread; the metrics have not seen it yet. A
    # wait on `lines` must not end there (it did, and a test read /metrics in between).
    GatedFollower.counted.clear()
    GatedFollower.gate.clear()
    async with Running(logdir, tmp_path / "state.json", GatedFollower) as running:
        append(logdir / "audit.log", late(1))
        await asyncio.to_thread(GatedFollower.counted.wait, 30)
        waiter = asyncio.ensure_future(running.runner.wait_until(lambda: running.runner.lines >= 1))
        await asyncio.sleep(0)  # one pass of the loop: the waiter checks once, then waits
        GatedFollower.gate.set()
        await waiter
        assert running.late("prober") == 1


async def test_a_restart_exports_the_saved_totals_and_goes_on(logdir: Path, tmp_path: Path):
    state = tmp_path / "state.json"
    async with Running(logdir, state) as running:
        append(logdir / "audit.log", late(1), late(2))
        await running.runner.wait_until(lambda: running.runner.lines >= 2)
    async with Running(logdir, state) as again:
        await again.runner.wait_until(lambda: again.runner.polls >= 1)
        assert again.late("prober") == 2  # before any new line
        append(logdir / "audit.log", late(3))
        await again.runner.wait_until(lambda: again.late("prober") == 3)
        assert again.runner.lines == 1


async def test_metrics_and_health_are_served_and_promtool_accepts_them(logdir, tmp_path):
    async with Running(logdir, tmp_path / "state.json") as running:
        server = StatusServer(running.registry, healthz=running.runner.problems)
        port = await server.start("127.0.0.1", 0)
        try:
            append(logdir / "audit.log", late(1))
            await running.runner.wait_until(lambda: running.runner.lines >= 1)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                metrics = await client.get("/metrics")
                health = await client.get("/healthz")
                missing = await client.get("/nope")
                posted = await client.post("/metrics")
        finally:
            await server.close()
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain; version=")
    expected = 'prober_audit_late_requests_total{apiserver="master-0",user_agent="prober"} 1.0'
    assert expected in metrics.text
    assert (health.status_code, health.text) == (200, "ok\n")
    assert missing.status_code == 404
    assert posted.status_code == 405
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool comes with Debian's prometheus package"
    checker = await asyncio.create_subprocess_exec(
        promtool, "check", "metrics", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    said, _ = await asyncio.wait_for(checker.communicate(metrics.content), 30)
    assert checker.returncode == 0, said.decode()


async def test_a_failing_poll_is_logged_turns_unhealthy_and_recovers(logdir, tmp_path):
    blocker = tmp_path / "blocked"
    running = Running(logdir, blocker / "state.json")
    blocker.write_text("a file where the state directory should be")
    async with running:
        append(logdir / "audit.log", late(1))
        await running.runner.wait_until(lambda: running.runner.failures >= 1)
        assert not running.runner.last_poll_ok
        blocker.unlink()
        await running.runner.wait_until(lambda: running.runner.last_poll_ok)
    failed = [r for r in running.logs() if r["event"] == "audit poll failed"]
    assert failed
    assert failed[0]["task"] == "audit-follow"
    assert (blocker / "state.json").exists()


async def _line(stream: asyncio.StreamReader, wanted: str) -> dict[str, object]:
    while True:
        raw = await asyncio.wait_for(stream.readline(), 20)
        assert raw, f"the process ended before logging {wanted!r}"
        if raw.startswith(b"{"):
            record = json.loads(raw)
            if record["event"] == wanted:
                return record


async def _start(*argv: str) -> asyncio.subprocess.Process:
    code = "import sys; from tests.audit.cli import run; sys.exit(run(sys.argv[1:]))"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, "audit", "follow", *argv,
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


async def test_the_follow_command_serves_metrics_stops_on_sigterm_and_resumes(logdir, tmp_path):
    out = tmp_path / "out"
    argv = [str(logdir), "--node", "master-0", "--listen", "127.0.0.1:0", "--interval", "20ms",
            "--out", str(out)]  # fmt: skip
    append(logdir / "audit.log", late(1), late(2))
    for expected_total in (2, 3):
        process = await _start(*argv)
        try:
            assert process.stdout is not None
            started = await _line(process.stdout, "following")
            port = int(str(started["listen"]).rsplit(":", 1)[1])
            if expected_total == 3:
                append(logdir / "audit.log", late(3))
            record = await _line(process.stdout, "late requests")
            assert record["total"] == expected_total
            async with httpx.AsyncClient() as client:
                scraped = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
            assert f'user_agent="prober"}} {float(expected_total)}' in scraped
            process.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(process.stdout.read(), 20)
            assert await asyncio.wait_for(process.wait(), 20) == 0
            wrote = [json.loads(raw) for raw in rest.splitlines() if raw.startswith(b"{")]
            assert {"event": "wrote the follow state", "path": str(out / STATE_FILE)}.items() <= (
                wrote[-1].items()
            )
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{missing}"], "prober audit follow: {missing}: no such directory\n"),
        (["{logdir}", "--listen", "nowhere"],
         "prober audit follow: --listen: expected HOST:PORT such as 0.0.0.0:9090, got 'nowhere'\n"),
        (["{logdir}", "--interval", "soon"],
         "prober audit follow: --interval: 'soon' is not a Go duration such as 100ms or 5s\n"),
        (["{logdir}", "--interval", "0s"],
         "prober audit follow: --interval: '0s' must be longer than 0s\n"),
        (["{logdir}", "--listen", "192.0.2.1:0"], None),  # not an address of this machine
        (["{logdir}", "--state", "{bad_state}"], None),
    ],
)  # fmt: skip
def test_follow_bad_usage_is_one_line_and_exit_2(logdir, tmp_path, capsys, argv, message):
    from tests.audit.cli import run

    bad_state = tmp_path / "state.json"
    bad_state.write_text("{not json")
    fill = {"missing": tmp_path / "missing", "logdir": logdir, "bad_state": bad_state}
    assert run(["audit", "follow", *(a.format(**fill) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("prober audit follow: ")
    if message is not None:
        assert err == message.format(**fill)


async def test_follow_with_stdout_on_a_full_disk_goes_on_and_says_nothing_twice(logdir, tmp_path):
    """Its log lines find no room (stdout on a full device): before the follower shared the
    daemon's logging set-up, the first one raised and the command died with no state saved."""
    out = tmp_path / "out"
    append(logdir / "audit.log", late(1), late(2))
    code = "import sys; from tests.audit.cli import run; sys.exit(run(sys.argv[1:]))"
    argv = [str(logdir), "--node", "master-0", "--listen", "127.0.0.1:0", "--interval", "20ms",
            "--out", str(out)]  # fmt: skip
    with Path("/dev/full").open("w") as full:  # noqa: ASYNC230 (opening a device does not block)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, "audit", "follow", *argv,
            cwd=REPO, stdout=full, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    try:
        state = out / STATE_FILE

        def saved() -> bool:
            assert process.returncode is None, "the follower died"
            return state.exists() and b'"late":{"prober":2}' in state.read_bytes()

        await until(saved, "the state file with both late requests", 30)
        process.send_signal(signal.SIGTERM)
        assert process.stderr is not None
        said = await asyncio.wait_for(process.stderr.read(), 20)
        assert await asyncio.wait_for(process.wait(), 20) == 0, said.decode()
        assert said == b""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
