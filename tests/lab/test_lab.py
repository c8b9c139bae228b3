"""Short labs for every platform: real HAProxy, real fake apiservers, the real daemon.

Each run takes one apiserver (master-0, the one localhost reaches) through a graceful
shutdown at 1/20 of the platform's real durations, and holds what the daemon measured against
the truth from the apiserver's own record and HAProxy's log: the truth must lie inside the
bound the daemon gives (its sampling gaps), however busy the machine. Nothing here asserts how
tight a bound is: that depends on how fast the machine is today (`make test-loaded` runs these
beside two CPU-burning processes).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import signal
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from prober.common.exits import ExitCode
from prober.core.models import LB, Connection, Replacement
from prober.lab.commands import report, verdict_line
from prober.lab.infra.kernel.topology import CLIENT
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.infra.sessions import ADDRESS, LOG, NAT
from prober.lab.judges.compare import TOLERANCE, Row
from prober.lab.run import LabError, LabOptions, LabResult, run_lab
from prober.report.documents.age_tables import age_lines
from prober.report.verdicts.budget_verdicts import LATE_MARK
from prober.report.verdicts.identity import Case
from prober.report.verdicts.verdicts import Status
from tests.lab.kernel.leftovers import HostNetwork, network_namespaces
from tests.lab.typed import ANALYZED, docs_commands, missing_outputs, typed_lab
from tests.support.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCALE = 0.05


async def lab(
    tmp_path: Path,
    platform: str,
    scenario: str = "rollout",
    *,
    watch_grace: float | None = None,
) -> LabResult:
    options = LabOptions(
        platform=platform,
        scenario=scenario,
        time_scale=SCALE,
        shutdowns=1,
        tolerance=TOLERANCE,
        watch_grace=watch_grace,
    )
    return await run_lab(options, tmp_path / "lab", say=None)


def rows(result: LabResult) -> list[Row]:
    (shutdown,) = result.results
    assert shutdown.window is not None, "the daemon saw no shutdown window"
    return list(shutdown.rows)


def show(result: LabResult) -> None:
    for row in rows(result):
        print(
            f"{row.lb:16} {row.protocol} {row.connection:6} measured {row.measured} "
            f"bound [{row.lo}, {row.hi}] truth {row.truth:.3f} late {row.late} "
            f"failed {row.failures}"
        )
    for finding in result.findings:
        print("FINDING", finding)
    print("\n".join(age_lines(result.analysis.summary.get("connection_ages"))))


# `make test` holds aws (kernel L4), gcp (with a 25 s watch grace) and metal (HAProxy);
# azure and none, the same kernel path with other health checks, are matrix runs.
MATRIX_PLATFORMS = {"azure", "none"}


@pytest.mark.parametrize(
    "platform",
    [pytest.param(p, marks=[pytest.mark.matrix] if p in MATRIX_PLATFORMS else [])
     for p in sorted(PLATFORMS)],
)  # fmt: skip
async def test_a_graceful_shutdown_is_measured_within_tolerance(
    tmp_path: Path, platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, host = network_namespaces(), HostNetwork.now()
    # GCP's run has OpenShift's 25 s watch grace: its servers answer 429 while their watches
    # drain (one lab run for two tests' worth).
    gcp = platform == "gcp"
    if platform == "aws":  # `make demo`'s platform, run as the README's user types it
        result = await as_typed(tmp_path, monkeypatch)
    else:
        result = await lab(tmp_path, platform, watch_grace=25.0 if gcp else None)
    show(result)
    if platform == "gcp":
        retried_through_healthy_peers(result)
    if platform == "aws":
        # The run dropped every namespace it made and touched nothing of the host's network.
        assert network_namespaces() <= before
        assert HostNetwork.now() == host
        audit_agrees(result, tmp_path / "results")
        assert reads_from_the_watch_cache(result.out / "cluster")
        # Pass-through: the apiserver sees the daemon's own address, and the LBs' checks
        # come from the router's side of each master's link.
        prober, others = source_addresses(result.out / "cluster")
        assert prober == {CLIENT}
        assert others == {f"198.18.{i + 1}.1" for i in range(3)}
    assert result.problems == ()  # every truth, T0's included, inside its bound
    # Every watch the daemon established was found in its server's truth, and judged.
    assert result.watches is not None
    judged = {r.stream for r in result.watches.rows if r.truth_phase is not None}
    # ... found by its connection: its address, or HAProxy's log of it, never its timing.
    by_time = [(r.stream, r.server, r.paired_by, r.unjoined) for r in result.watches.rows
               if r.paired_by not in {ADDRESS, LOG, NAT}]  # fmt: skip
    assert by_time == [], result.out
    assert {s for s in judged if "localhost" not in s} == {
        f"kube-api-{p}-{lb.lb}-watch" for p in ("http1", "http2") for lb in result.platform.lbs
    }
    storage_agrees(result.out / "cluster")
    delay = result.platform.shutdown_delay
    by_key = {(r.lb, r.protocol, r.connection): r for r in rows(result)}
    for lb in (LB.EXTERNAL, LB.INTERNAL):
        for protocol in ("http1", "http2"):
            new = by_key[(lb, protocol, Connection.NEW)]
            # Health-checked LBs take the server out long before its delay ends.
            assert new.truth < delay / 2
            reused = by_key[(lb, protocol, Connection.REUSED)]
            if reused.lo is None:
                continue  # this stream's connections were on other servers
            if result.platform.lb(lb).reset_on_down:
                assert reused.lo < delay / 2, "the LB should have reset the connection"
            else:
                assert reused.lo > delay / 2, "the LB should have kept the connection"
    # Localhost reaches the server until it stops listening, whatever the LBs do.
    localhost = by_key[(LB.LOCALHOST, "http1", Connection.NEW)]
    assert localhost.lo is not None
    assert localhost.lo > delay / 2
    # The platform's LBs, as the lab builds them from its table, keep what they promise, but
    # for what the lab LB's own lag (a late or slowed check, on a busy machine) cost.
    assert unexplained_budget_failures(result) == []
    # The run's last line says what it proved, in junit.xml's own counts.
    line = verdict_line(result)
    match = re.fullmatch(
        r"prober lab: measurement passed \((\d+) truths? inside their bounds\); LB verdicts: "
        r"(\d+) tests, (\d+) failed, (\d+) passed, (\d+) skipped"
        r"(?: \((\d+) of the failed by design, each passed again\))?",
        line,
    )
    assert match is not None, line
    suite = ET.parse(result.out / "junit.xml").getroot()
    tests, failed, _, skipped = (int(match[i]) for i in (2, 3, 4, 5))
    assert (tests, failed, skipped) == tuple(
        int(suite.get(k, "")) for k in ("tests", "failures", "skipped")
    )
    assert int(match[1]) > 0
    # Reported as `prober lab --check` reports it: no estimate of its outputs (its printed
    # report and lab-result.json too) outside its bound (tests/lab/test_lab_bounds.py).
    assert report(result, io.StringIO()) == ()
    connection_ages_agree(result, cut_when_sent=platform == "aws")


async def as_typed(folder: Path, monkeypatch: pytest.MonkeyPatch) -> LabResult:
    """`prober lab --check` in a fresh folder, no --out (`tests.lab.typed`): exit 0, every
    file the README's table lists, then docs/usage.md's commands on relative paths."""
    typed = await typed_lab(folder, monkeypatch, "--time-scale", str(SCALE), "--shutdowns", "1",
                            "--tolerance", str(TOLERANCE))  # fmt: skip
    assert typed.code == 0, typed.stdout
    # What the run proved is its last line, where the README shows it.
    assert typed.stdout.splitlines()[-1] == verdict_line(typed.result)
    assert str(typed.out).startswith("lab-out/")
    assert missing_outputs(typed) == []
    for line, (code, absent) in docs_commands(typed).items():
        allowed = ANALYZED if line.startswith("analyze") else (ExitCode.OK,)
        assert code in allowed, line
        assert absent == [], line
    return typed.result


def idle_cuts(result: LabResult, lb: LB) -> list[float]:
    """When a kept connection of `lb` was found gone between requests, inside a shutdown's
    delay: the server closes none before the delay's end, so the LB cut it."""
    windows = [(w.t0, w.t0 + w.delay) for w in result.analysis.replay.windows]
    return [
        s.t
        for s in result.analysis.log.samples
        if s.lb is lb
        and s.connection is Connection.REUSED
        and s.replaced is Replacement.CLOSED
        and any(t0 <= s.t <= end for t0, end in windows)
    ]


def connection_ages_agree(result: LabResult, *, cut_when_sent: bool) -> None:
    """The connection-age table differs as the LBs do. One that resets established flows
    (aws's NLB, metal's HAProxy) cuts a kept connection opened before T0 at its detection:
    its late answers all come in the delay's first 80 %, and on aws's kernel path, which
    resets a flow when the client next sends on it (`cut_when_sent`), that request fails or
    is resent there. One that keeps them (gcp, azure, none) leaves it on the server into the
    delay's last 20 %, and none of them fails (past the delay the server may answer 429 with
    Retry-After, which client-go retries): the 20 % rule held. No default run fails the
    rule's test: where it breaks, the LB resets flows by its settings."""
    section = result.analysis.summary["connection_ages"]
    findings = {f["lb"]: f for f in section["findings"]}
    verdicts = {v.name: v for v in result.analysis.verdicts}
    for lb in (LB.EXTERNAL, LB.INTERNAL):
        test = verdicts[Case.TWENTY_PERCENT.format(lb=lb)]
        assert test.status is not Status.FAILED, test.message
        kept = [r for r in section["rows"]
                if (r["lb"], r["connection"], r["opened"]) == (lb, "reused", "before")]  # fmt: skip
        late, cut = Counter[str](), Counter[str]()
        for row in kept:
            late.update(row["late"])
            cut.update(row["failed"])
            cut.update(row["resent"])
        if not late:
            continue  # its kept connections were all on other servers
        met = {phase for key in late for phase in key.split("|")}
        if result.platform.lb(lb).reset_on_down:
            assert met == {"delay_early"}, f"{lb}: late answers {dict(late)}"
            assert {phase for key in cut for phase in key.split("|")} <= {"delay_early"}
            if cut_when_sent:
                # The reset meets the client's next packet on the flow: its next request
                # (failed or resent), or an ACK or WINDOW_UPDATE it sends after the last late
                # answer, which ends the connection idle (the next request says `closed`).
                assert cut or idle_cuts(result, lb), (
                    f"{lb}: kept connections answered late, then nothing cut them"
                )
            if findings[lb]["rule"] == "broken":  # skipped, saying why
                assert "resets established connections" in test.message
        else:
            assert "delay_late" in met, f"{lb}: late answers {dict(late)}"
            # Only answers 429 with Retry-After past the delay, which client-go retries.
            assert {e for row in kept for e in row["errors"]} <= {"retry_after"}, kept
            assert findings[lb]["rule"] == "held", findings[lb]["text"]


def retried_through_healthy_peers(result: LabResult) -> None:
    """The draining server answered the kept connections 429 with Retry-After; client-go's
    retry, five seconds on, went through the LB to a healthy peer: raw disruption, none
    felt, every retry's outcome known (the lab sampled past the last one's wait)."""
    summary = result.analysis.summary
    told = {name: entry for name, entry in summary["retry_after"].items()
            if "-localhost-" not in name}  # fmt: skip
    assert told, "no kept connection through an LB met the draining server's 429"
    streams = {s["stream"]: s for s in summary["streams"]}
    for name, entry in told.items():
        assert entry["unresolved"] == 0, (name, entry)
        assert entry["succeeded"] == entry["answers"], (name, entry)
        assert streams[name]["disruption_seconds"] > 0
        assert streams[name]["felt_disruption_seconds"] == 0.0, (name, streams[name])


def failed_budget_tests(result: LabResult) -> list[str]:
    """The LB-budget and delay-coverage tests that failed, with their messages."""
    return [f"{v.name}: {v.message}" for v in result.analysis.verdicts
            if v.id.case in (Case.WITHIN_BUDGET, Case.DELAY_COVERS)
            and v.status is Status.FAILED]  # fmt: skip


def unexplained_budget_failures(result: LabResult) -> list[str]:
    """The failed budget tests not explained by the truth: the LB was within its budget (the
    verdict is wrong), or over it by more than the lab LB's own lag (a late or slowed check
    on a busy machine), which the platform's table does not promise."""
    by_key = {(str(r.lb), r.protocol, str(r.connection)): r for r in rows(result)}
    delay = result.platform.shutdown_delay
    unexplained = []
    for failure in failed_budget_tests(result):
        found = re.search(r"load-balancer/(\S+) protocol/(\S+) connection/(\S+)", failure)
        assert found is not None, failure
        row = by_key[found.groups()]
        if "within its health-check budget" not in failure:
            budget = LATE_MARK * delay
        elif row.connection is Connection.NEW:
            budget = result.platform.lb(row.lb).stop_routing
        else:
            budget = result.platform.kept_budget(row.lb)
        wrong = row.truth < budget - result.tolerance
        if wrong or row.truth - row.lb_lag > budget + result.tolerance:
            unexplained.append(f"{failure} (truth {row.truth:.3f} s, lag {row.lb_lag:.3f} s)")
    return unexplained


def storage_agrees(cluster: Path) -> None:
    """Every apiserver kept its identity Lease in the run's etcd, a new holder for each
    start; the daemon's heartbeat Lease was written there; and the run's etcd is gone with
    the run."""
    heartbeats = 0
    for truth in sorted(cluster.glob("master-*/truth.jsonl")):
        records = [json.loads(line) for line in truth.read_text().splitlines()]
        writes = [r for r in records if r["event"] == "lease_written"]
        holders = {r["holder"] for r in writes if r["verb"] == "identity"}
        starts = sum(r["event"] == "listening" for r in records)
        assert len(holders) == starts, (truth, holders)
        heartbeats += sum(r["verb"] != "identity" for r in writes)
    assert heartbeats > 0, "the daemon's heartbeat never reached the store"
    assert (cluster / "etcd" / "member").is_dir()
    assert not processes_with(str(cluster / "etcd")), "the run's etcd outlived it"


def processes_with(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def source_addresses(cluster: Path) -> tuple[set[str], set[str]]:
    """The source addresses of the prober's requests, and of every other's."""
    prober: set[str] = set()
    others: set[str] = set()
    for log in cluster.rglob("audit*.log"):
        for event in map(json.loads, log.read_text().splitlines()):
            mine = event.get("userAgent", "").startswith("prober/")
            (prober if mine else others).update(event["sourceIPs"])
    return prober, others


def reads_from_the_watch_cache(cluster: Path) -> bool:
    """Every request of the prober's request streams the apiservers logged asked for
    `resourceVersion=0` (its watch streams, `... watch` agents, list and watch Leases; its
    discovery, `... discovery`, lists the identity Leases; the direct path's `/readyz`, asked
    while an apiserver restarts, reads no resource)."""
    uris = {
        event["requestURI"]
        for log in cluster.rglob("audit*.log")
        for event in map(json.loads, log.read_text().splitlines())
        if event.get("userAgent", "").startswith("prober/")
        and not event["userAgent"].endswith((" watch", " discovery"))
        and event["requestURI"] != "/readyz"
    }
    assert uris, "no request of the prober in the audit logs"
    return uris == {"/api/v1/namespaces/default?resourceVersion=0"}


async def test_slow_lb_lets_requests_fail(tmp_path: Path) -> None:
    result = await lab(tmp_path, "gcp", "slow-lb")
    show(result)
    assert result.problems == ()
    slow = [r for r in rows(result) if r.lb is LB.EXTERNAL]
    assert sum(r.failures for r in slow) > 0
    assert all(r.failures_expected for r in slow if r.connection is Connection.NEW)
    fine = [r for r in rows(result) if r.lb is LB.INTERNAL and r.connection is Connection.NEW]
    assert sum(r.failures for r in fine) == 0
    # The slow LB fails the budget its platform promises, and the delay: no other LB does.
    # (The budgets are the scaled ones the daemon's run record carries: the table's 8 s
    # would pass a 4.5 s reaction.)
    failed = [f for f in failed_budget_tests(result) if "load-balancer/external-lb " in f]
    assert failed, "the slow LB should fail its budget"
    assert all("connection/new " in f for f in failed)
    assert {"within its health-check budget" in f for f in failed} == {True, False}
    others = [f for f in unexplained_budget_failures(result) if "/external-lb " not in f]
    assert others == []


@pytest.mark.matrix  # two labs at once: `make test-matrix`
async def test_two_labs_side_by_side_each_see_their_crash(tmp_path: Path) -> None:
    """Two labs at once (free ports, their own admin sockets and files), each killing one of
    its apiservers: each sees its own crash, and nothing of the other's."""
    runs = await asyncio.gather(
        *(lab(tmp_path / platform, platform, "crash") for platform in ("azure", "metal"))
    )
    assert runs[0].out != runs[1].out
    for result in runs:
        assert result.results == ()  # no graceful shutdown, no window
        assert result.problems == ()
        lbs = {interval.lb for interval in result.analysis.replay.intervals}
        assert LB.LOCALHOST in lbs  # localhost has nowhere else to go
        assert lbs & {LB.EXTERNAL, LB.INTERNAL}


async def test_an_output_directory_is_never_reused(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "events.jsonl").write_text("")
    with pytest.raises(LabError, match="not empty"):
        await lab(tmp_path, "aws")


def audit_agrees(result: LabResult, out: Path) -> None:
    """The second witness on the same run: the apiserver's audit log flags the prober's own
    late requests (matched by Audit-ID), each through the LB that sent it (`out`: where
    `prober audit summarize` wrote its summary of the run)."""
    summary = json.loads((out / "audit-summary.json").read_text())
    late = {entry["apiserver"] for entry in summary["late"]}
    assert "master-0" in late
    prober_late = {entry["lb"] for entry in summary["prober"]["late"]}
    # Flagged late in the audit log (near the delay's end) only through an LB whose samples
    # the server answered `shutdown=true`; localhost reaches it to the end.
    answered_late = {str(s.lb) for s in result.analysis.log.samples if s.late}
    assert "localhost" in prober_late
    assert prober_late <= answered_late
    assert summary["bad_lines"] == 0


async def started_lab(out: Path) -> tuple[asyncio.subprocess.Process, list[int]]:
    """`prober lab` (kernel path, AWS) as a user starts it, once its rollout has begun: the
    process and every one it started."""
    argv = [sys.executable, "-m", "prober", "lab", "--time-scale", "0.05", "--out", str(out)]
    lab = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        # A suite started in the background (`make test &`, nohup) inherits SIGINT ignored,
        # and so would the lab; a user at a terminal pressing Ctrl-C never has that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert lab.stdout is not None
    async with asyncio.timeout(60):
        while b"SIGTERM" not in await lab.stdout.readline():  # the rollout has begun
            assert lab.returncode is None
    daemon = json.loads((out / "daemon.json").read_text())["pid"]
    children = _children(lab.pid)
    assert daemon in children
    assert len(children) >= 7  # etcd, 3 apiservers, 2 LBs' health checkers, the daemon
    assert "etcd" in _commands(children)
    return lab, children


async def test_ctrl_c_stops_every_process_and_drops_every_namespace(tmp_path: Path) -> None:
    before, host = network_namespaces(), HostNetwork.now()
    lab, children = await started_lab(tmp_path / "lab")
    async with asyncio.timeout(60):
        lab.send_signal(signal.SIGINT)
        await lab.communicate()
    assert lab.returncode != 0
    assert _alive(children) == []
    assert network_namespaces() <= before
    assert HostNetwork.now() == host


async def test_a_killed_lab_leaves_no_process_and_no_namespace(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up: the children die by their parent-death signal, and the
    namespaces, held only by the lab's descriptors and its children, go with them."""
    before, host = network_namespaces(), HostNetwork.now()
    lab, children = await started_lab(tmp_path / "lab")
    lab.kill()
    await lab.communicate()
    await until(lambda: not _alive(children), "the children's parent-death signals", 30)
    await until(lambda: network_namespaces() <= before, "the namespaces to be freed", 30)
    assert HostNetwork.now() == host


def _alive(pids: list[int]) -> list[int]:
    """Of `pids`, those still running (a zombie has exited: only its parent's wait is due)."""
    alive = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if "\nState:\tZ" not in status:
            alive.append(pid)
    return alive


def _commands(pids: list[int]) -> set[str]:
    return {Path(f"/proc/{pid}/comm").read_text().strip() for pid in pids}


def _children(pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in text:
            found.append(int(status.parent.name))
    return found


async def test_a_vanished_node_disrupts_requests_and_opens_no_window(tmp_path: Path) -> None:
    result = await lab(tmp_path, "aws", "node-loss")
    assert result.problems == ()  # no window invented, no error class a silent node can't give
    assert result.results == ()  # no graceful shutdown to compare
    (loss,) = result.losses
    by_key = {(r.lb, r.protocol, r.connection): r for r in loss.rows}
    for protocol in ("http1", "http2"):
        direct = by_key[(LB.LOCALHOST, protocol, Connection.NEW)]
        assert direct.errors.keys() == {"timeout"}  # nobody answers, nobody refuses
        assert direct.truth is None
    for lb in (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK):
        row = by_key[(lb, "http1", Connection.NEW)]
        assert row.truth is not None, f"{lb} never took the vanished node out"
    intervals = result.analysis.replay.intervals
    assert {i.lb for i in intervals} >= {LB.LOCALHOST}
    assert all(i.error.value in {"timeout", "connection_reset"} for i in intervals)
    # The watches, as the heartbeat measured them: every LB x protocol, how long blind.
    watches = {(w.lb, w.protocol): w for w in loss.watches}
    assert watches.keys() == {(lb, p) for lb in LB for p in ("http1", "http2")}
    gone = loss.back - loss.lost
    for w in watches.values():
        assert w.blind >= 0
        assert (w.noticed is None) == (w.spells == 0)
        assert w.noticed is None or w.noticed >= 0
        assert w.ended is None or 0 <= w.ended <= gone
    # The direct path's watches sat on the silent node: HTTP/2's health check dropped its
    # connection while the node was gone; HTTP/1.1 has none, and its watch just hung.
    assert watches[(LB.LOCALHOST, "http2")].how == "ping"
    assert watches[(LB.LOCALHOST, "http1")].ended is None
    assert loss.heartbeat is not None
    assert loss.heartbeat.failed <= loss.heartbeat.writes


async def test_a_node_vanishes_only_on_the_kernel_path(tmp_path: Path) -> None:
    options = LabOptions(platform="aws", scenario="node-loss", lb="haproxy")
    with pytest.raises(LabError, match=r"^--scenario node-loss: a node can vanish only on the"):
        await run_lab(options, tmp_path / "lab", say=None)
    assert not (tmp_path / "lab").exists()
