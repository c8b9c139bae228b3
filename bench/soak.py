"""Soak: `prober run` against the lab for 30 minutes at 4x the default sampling rate, with a
rolling restart of every apiserver every few minutes. Its resident memory, open file
descriptors, threads, asyncio tasks and event log are read every minute, and must be flat
after warm-up; every sample it took must be accounted for.

The lab is `prober.lab.LabCluster`: 3 fake apiservers as processes behind HAProxy LBs set up
as AWS's, at time scale 0.05 (a shutdown window lasts 6.5 s). The daemon is the real `prober
run` (a subprocess) probing the internal LB (`--lbs`; 4 streams: h1/h2 x new/reused) every
25 ms per worker, 2 workers: 80 samples a second per stream, 4x the default. One CPU core
runs about 400 samples a second (fresh TLS connections dominate), so more LBs at this rate
would only measure how the daemon skips ticks when the machine cannot keep up; the rate
achieved is checked (at least 90 % of nominal). Its event log is rotated at 128 KiB, so
that the first rotation (and the gzip thread it starts) happens during warm-up.
Every `--every` seconds one reading is taken, each value the median of 5 reads a second
apart: VmRSS, open fds and threads from /proc, `prober_tasks` and `prober_requests_total`
from /metrics, and the event log's bytes on disk (PATH and its segments) and written (a gzip
segment's trailer holds its uncompressed size).

Flat: a line through the second half of a series (the first half is warm-up), fitted by
Theil-Sen (the median slope over all pairs of readings, so that one reading in the middle of
a burst of requests does not tilt it), its slope over one hour as a percentage of the series'
mean over that half, must stay under `--max-growth` (10 %/h); for the counts (fds, threads,
tasks, a few dozen at most) a slope of up to 10 an hour passes too; a falling slope passes
(a leak only grows). The event log grows by
design: what must not grow is what it costs per sample, its KB written per 1000 samples over
the second half against the first half (from the first rollout on), at most 1.25 times (one
rollout more or less in a half moves it by about 20 %). Per series the baseline is measured
in the same run: the first reading of the second half (for the log, its first-half rate);
printed are baseline, end, their ratio and the growth per hour.
The account, from the daemon's `stopped` line and its event log: requests started = samples
recorded = `prober_requests_total`, failures counted = failure samples logged. Exit 0 when
every series is flat, the rate was kept and nothing was lost, else 1.

    .venv/bin/python bench/soak.py [--minutes 30] [--every 60] [--rollout-every 3] [--out DIR]
        [--lbs internal-lb,localhost]
    .venv/bin/python bench/soak.py --judge DIR/soak.json   # judge a saved run again
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from prober.common.segments import read_lines, segment_path, segment_paths  # noqa: E402
from prober.core.eventlog import EventLogReader  # noqa: E402
from prober.core.models import LB, Sample, Summary  # noqa: E402
from prober.lab.infra.cluster import LabCluster  # noqa: E402
from prober.lab.infra.platforms import PLATFORMS  # noqa: E402
from prober.lab.infra.processes import ManagedProcess, ProcessGroup  # noqa: E402

# Each series, and the growth per hour it may show whatever its mean: counts of a few
# dozen move by one or two between readings, and a line through 15 such readings can tilt by
# a few per hour by chance; a leak of one per rollout (20 an hour) still fails.
SERIES = {"rss_mb": 0.0, "fds": 10.0, "threads": 10.0, "tasks": 10.0}
MAX_LOG_RATE_RATIO = 1.25  # one rollout more or less in a half moves the rate by ~20 %
READS = 5  # per reading, a second apart; the median is kept


@dataclass
class Reading:
    t: float  # seconds since the daemon was ready
    samples: float
    rss_mb: float
    fds: float
    threads: float
    tasks: float
    log_disk_kb: float  # on disk: PATH, plain segments, gzip segments
    log_written_kb: float  # what was written, before compression


@dataclass
class Verdict:
    series: str
    baseline: float
    end: float
    growth_per_hour: float  # in the series' unit
    growth_per_hour_pct: float  # of its mean over the second half
    flat: bool


@dataclass
class SoakResult:
    minutes: float
    rollouts: int
    readings: list[Reading] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    account: dict[str, Any] = field(default_factory=dict)
    peak_rss_mb: float = 0.0

    nominal_rate: float = 0.0  # samples a second the configuration asks for
    rate: float = 0.0  # samples a second achieved, over the whole run

    @property
    def passed(self) -> bool:
        flat = all(v.flat for v in self.verdicts)
        return flat and self.rate >= 0.9 * self.nominal_rate and not self.account.get("problems")


def proc_status(pid: int, key: str) -> float:
    match = re.search(rf"^{key}:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(), re.M)
    assert match is not None, key
    return float(match[1])


def log_sizes(path: Path) -> tuple[float, float]:
    """(KB on disk, KB written) of the event log; a gzip segment's trailer holds the size
    of what it compressed (mod 4 GiB, far above a segment)."""
    disk = written = 0
    for segment in [*segment_paths(path), path]:
        if not segment.exists():
            continue
        size = segment.stat().st_size
        disk += size
        if segment.suffix == ".gz":
            with segment.open("rb") as stream:
                stream.seek(-4, 2)
                size = int.from_bytes(stream.read(4), "little")
        written += size
    return disk / 1024, written / 1024


def process_reads(pid: int) -> tuple[float, float, float]:
    """(VmRSS in MB, open fds, threads) of a process."""
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    return proc_status(pid, "VmRSS") / 1024, float(fds), proc_status(pid, "Threads")


async def scrape(client: httpx.AsyncClient, port: int) -> dict[str, float]:
    text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    found: Counter[str] = Counter()
    for name in ("prober_requests_total", "prober_tasks"):
        for match in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M):
            found[name] += float(match[1])
    return found


async def reading(
    client: httpx.AsyncClient, pid: int, port: int, events: Path, t0: float
) -> Reading:
    reads = []
    for index in range(READS):
        if index:
            await asyncio.sleep(1.0)  # spread the reads: requests in flight come and go
        metrics = await scrape(client, port)
        reads.append((metrics["prober_tasks"], *process_reads(pid)))
    tasks, rss, fds, threads = (statistics.median(column) for column in zip(*reads, strict=True))
    disk, written = log_sizes(events)
    samples = (await scrape(client, port))["prober_requests_total"]
    return Reading(time.monotonic() - t0, samples, rss, fds, threads, tasks, disk, written)


def growth_per_hour(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Theil-Sen: the median slope over every pair of points, over one hour (robust to a
    reading taken in the middle of a burst), and the mean value."""
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.combinations(points, 2)]
    mean = statistics.fmean(p[1] for p in points)
    return (statistics.median(slopes) * 3600 if slopes else 0.0), mean


def judge(readings: list[Reading], max_growth: float, first_rollout: float) -> list[Verdict]:
    second = readings[len(readings) // 2 :]
    verdicts = []
    for name, floor in SERIES.items():
        points = [(r.t, float(getattr(r, name))) for r in second]
        growth, mean = growth_per_hour(points)
        pct = growth / mean * 100 if mean else 0.0
        # One-sided: a leak grows. A count that settles lower after warm-up (requests in
        # flight when the machine was busiest) is no leak.
        flat = growth <= max(max_growth / 100 * abs(mean), floor)
        verdicts.append(Verdict(name, points[0][1], points[-1][1], growth, pct, flat))
    verdicts.append(log_verdict(readings, first_rollout))
    return verdicts


def log_verdict(readings: list[Reading], first_rollout: float) -> Verdict:
    """The event log grows by design; per sample taken it must grow no faster in the second
    half than in the first (from the first rollout on: before it, nothing is written)."""
    start = next(r for r in readings if r.t >= first_rollout)
    middle, end = readings[len(readings) // 2], readings[-1]

    def rate(a: Reading, b: Reading) -> float:
        return (b.log_written_kb - a.log_written_kb) * 1000 / max(1.0, b.samples - a.samples)

    before, after = rate(start, middle), rate(middle, end)
    ratio = after / before if before else float("inf")
    hours = (end.t - middle.t) / 3600
    pct = (ratio - 1) * 100 / hours if hours else 0.0
    return Verdict("log_kb_per_1k", before, after, 0.0, pct, ratio <= MAX_LOG_RATE_RATIO)


async def rolling_restarts(cluster: LabCluster, every: float, done: list[int]) -> None:
    """Every `every` seconds (or right after the last one, if it overran), restart each
    apiserver in turn the way a rollout does: SIGTERM, wait for it to exit, start again."""
    platform = cluster.platform
    next_at = time.monotonic() + every
    while True:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        next_at = time.monotonic() + every
        for server in cluster.apiservers:
            await cluster.shutdown(server)
            await cluster.wait_exit(server, platform.graceful_termination + 30)
            await cluster.restart(server)
        await cluster.settle()
        done.append(1)
        print(f"  rollout {len(done)} done", flush=True)


def results_of(summary: Summary) -> Counter[str]:
    counted: Counter[str] = Counter()
    for stream in summary.streams:
        counted.update(stream.results)
    return counted


def failures_of(summary: Summary) -> Counter[str]:
    return Counter({k: v for k, v in results_of(summary).items() if k != "success"})


def account(stopped: dict[str, Any], events: Path) -> dict[str, Any]:
    reader = EventLogReader(read_lines(events), source=str(events), strict=True)
    records = list(reader)
    summaries = [r for r in records if isinstance(r, Summary)]
    final = summaries[-1]
    counted = results_of(final)
    # Retention removes the oldest segments past KEEP_SEGMENTS (under load a fast soak writes
    # more late samples, so more segments): then every failure is held from the first
    # summary kept on, against what the counts grew by since it.
    kept = segment_paths(events)
    pruned = bool(kept) and not kept[0].name.startswith(segment_path(events, 1).name)
    since = records.index(summaries[0]) if pruned else 0
    failures = failures_of(final) - (failures_of(summaries[0]) if pruned else Counter())
    logged = Counter(str(r.error) for r in records[since:] if isinstance(r, Sample) and r.error)
    problems = []
    if stopped["started"] != stopped["samples"] or stopped["cancelled"]:
        problems.append(f"started {stopped['started']}, recorded {stopped['samples']}")
    if sum(stopped["requests"].values()) != stopped["samples"]:
        problems.append("prober_requests_total differs from the samples recorded")
    if logged != failures:
        problems.append(f"failures logged {dict(logged)} != counted {dict(failures)}")
    if stopped.get("event_log_dropped"):
        problems.append(f"event log dropped {stopped['event_log_dropped']}")
    return {
        "started": stopped["started"],
        "recorded": stopped["samples"],
        "lost": stopped["started"] - stopped["samples"],
        "results": dict(sorted(counted.items())),
        "failures_logged": sum(logged.values()),
        "held_from": "the first summary kept (segments pruned)" if pruned else "the start",
        "event_log_files": len(stopped["event_log_files"]),
        "problems": problems,
    }


async def soak(args: argparse.Namespace, out: Path) -> SoakResult:
    platform = PLATFORMS["aws"].scaled(args.time_scale)
    events = out / "events.jsonl"
    result = SoakResult(args.minutes, 0)
    done: list[int] = []
    async with ProcessGroup(out / "logs") as group:
        cluster = LabCluster(platform, out / "cluster", group, servers=3)
        try:
            await cluster.start()
            lbs = [LB(name) for name in args.lbs.split(",")]
            daemon = await start_daemon(group, cluster, events, lbs)
            result.nominal_rate = len(lbs) * 4 * 80
            ready = asyncio.create_task(daemon.wait_for_line(_event("ready"), 60))
            port = json.loads(await daemon.wait_for_line(_event("listening"), 60))["port"]
            await ready
            assert daemon.pid is not None
            roller = asyncio.create_task(rolling_restarts(cluster, args.rollout_every * 60, done))
            t0 = time.monotonic()
            async with httpx.AsyncClient(timeout=10) as client:
                while True:
                    row = await reading(client, daemon.pid, port, events, t0)
                    result.readings.append(row)
                    print_row(row, flush=True)
                    if row.t >= args.minutes * 60:
                        break
                    await asyncio.sleep(max(0.0, args.every * len(result.readings) - row.t))
            roller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await roller
            result.peak_rss_mb = proc_status(daemon.pid, "VmHWM") / 1024
            stopped_line = asyncio.create_task(daemon.wait_for_line(_event("stopped"), 60))
            daemon.send_signal(signal.SIGTERM)
            stopped = json.loads(await stopped_line)
            await daemon.wait(60)
        finally:
            cluster.close()
    result.rollouts = len(done)
    first, last = result.readings[0], result.readings[-1]
    result.rate = (last.samples - first.samples) / (last.t - first.t)
    result.verdicts = judge(result.readings, args.max_growth, args.rollout_every * 60)
    result.account = account(stopped, events)
    return result


async def start_daemon(
    group: ProcessGroup, cluster: LabCluster, events: Path, lbs: list[LB]
) -> ManagedProcess:
    argv = [sys.executable, "-m", "prober", "run", "--platform=aws", "--interval=25ms",
            "--quiet-interval=0",
            "--listen=127.0.0.1:0", f"--event-log={events}", "--event-log-max-size=128KiB",
            f"--ca-file={cluster.ca_file}", f"--token-file={cluster.token_file}",
            *(f"--target={lb}={cluster.url(lb)}" for lb in lbs)]  # fmt: skip
    return await group.start("prober-run", argv)


def _event(name: str):
    return lambda line: f'"event": "{name}"' in line


HEADER = "   t(s)    samples  rss(MB)  fds  threads  tasks  log disk(KB)  log written(KB)"


def print_row(row: Reading, flush: bool = False) -> None:
    print(
        f"{row.t:7.0f} {row.samples:10.0f} {row.rss_mb:8.1f} {row.fds:4.0f} {row.threads:8.0f}"
        f" {row.tasks:6.0f} {row.log_disk_kb:13.0f} {row.log_written_kb:16.0f}",
        flush=flush,
    )


def report(result: SoakResult, max_growth: float) -> None:
    print()
    print(f"{result.minutes:g} min, {result.rollouts} rolling restarts of 3 apiservers")
    print(
        f"rate: {result.rate:.0f} samples/s achieved, {result.nominal_rate:.0f} asked for "
        f"({result.rate / result.nominal_rate:.2f})"
    )
    print(
        f"flat: Theil-Sen growth over the second half <= {max_growth:g} % of its mean per hour"
        f" (counts: or <= 10 per hour); log KB per 1k samples: second half <= "
        f"{MAX_LOG_RATE_RATIO:g} x first half"
    )
    print(
        f"{'series':16} {'baseline':>9} {'end':>9} {'end/base':>8} {'growth/h':>10}"
        f" {'growth/h':>9}  verdict"
    )
    for v in result.verdicts:
        ratio = v.end / v.baseline if v.baseline else float("nan")
        print(
            f"{v.series:16} {v.baseline:9.1f} {v.end:9.1f} {ratio:8.3f} {v.growth_per_hour:+10.2f}"
            f" {v.growth_per_hour_pct:+8.1f}%  {'flat' if v.flat else 'GROWING'}"
        )
    a = result.account
    print(
        f"samples: started {a['started']}, recorded {a['recorded']}, lost {a['lost']}; "
        f"failures logged {a['failures_logged']}; peak RSS {result.peak_rss_mb:.1f} MB"
    )
    print(f"results: {a['results']}")
    for problem in a["problems"]:
        print(f"PROBLEM {problem}")
    print("PASS" if result.passed else "FAIL")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between readings")
    parser.add_argument("--rollout-every", type=float, default=3.0, help="minutes")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--max-growth", type=float, default=10.0, help="percent per hour")
    parser.add_argument("--lbs", default="internal-lb", help="comma-separated LBs to probe")
    parser.add_argument("--out", type=Path, help="keep the run's files here (default: removed)")
    parser.add_argument("--judge", type=Path, help="judge the soak.json of an earlier run again")
    args = parser.parse_args(argv)
    if args.judge is not None:
        return rejudge(args.judge, args)
    with contextlib.ExitStack() as stack:
        out = args.out or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        out.mkdir(parents=True, exist_ok=True)
        print(HEADER, flush=True)
        result = asyncio.run(_cancel_on_sigterm(soak(args, out)))
        report(result, args.max_growth)
        payload = asdict(result) | {"passed": result.passed}
        (out / "soak.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if result.passed else 1


def rejudge(path: Path, args: argparse.Namespace) -> int:
    saved = json.loads(path.read_text())
    result = SoakResult(saved["minutes"], saved["rollouts"], account=saved["account"])
    result.readings = [Reading(**row) for row in saved["readings"]]
    result.peak_rss_mb, result.rate = saved["peak_rss_mb"], saved["rate"]
    result.nominal_rate = saved["nominal_rate"]
    result.verdicts = judge(result.readings, args.max_growth, args.rollout_every * 60)
    report(result, args.max_growth)
    return 0 if result.passed else 1


async def _cancel_on_sigterm(work: Any) -> SoakResult:
    """SIGTERM (a test's timeout) cancels the soak, which still stops every process."""
    task = asyncio.ensure_future(work)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        print("soak: interrupted; every process it started is stopped", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    sys.exit(main())
