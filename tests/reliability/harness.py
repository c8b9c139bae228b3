"""One real `prober run` taken through one fault, and the account of every sample it took.

`FaultDaemon` starts the daemon as a subprocess (so its memory is its own), waits for its
`ready` line, lets the test inject a fault, then stops it with SIGTERM and reads back:

* from the daemon's `stopped` line: requests it started, samples it recorded, requests the
  drain had to abandon, `prober_requests_total` by result at the end, records the event log
  could not take;
* from the event log: the final summary (every sample per stream and result), the failure
  samples and the samples the stop cut (class `stopped`: no failure), which are always
  written;
* from the process: its peak resident memory (VmHWM), read just before the signal.

`Account.problems()` names every disagreement; a test asserts there is none and prints the
numbers, which also land in the table at the end of the pytest run (see `conftest.py`).
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from prober.core.models import Sample, Summary
from tests.support.daemon_process import DaemonProcess
from tests.support.replay import read_log
from tests.support.waiting import until

FAST = (
    "--interval=25ms",  # 4x the default rate: two workers, a sample every 12.5 ms per stream
    "--quiet-interval=0",  # that rate from the start, not only once something goes wrong
    "--timeout=1s",
    "--drain-timeout=2s",
    "--listen=127.0.0.1:0",
    "--watches=false",
    "--summary-interval=1s",
)
PEAK_RSS_LIMIT_MB = 150.0  # the daemon idles at about 55 MB


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match[1]) / 1024


@dataclass
class Account:
    """What one daemon run took, recorded, counted and wrote."""

    fault: str
    started: int
    recorded: int
    abandoned: int
    metric: Counter[str]  # prober_requests_total by result, at the end
    summary: Counter[str]  # the final summary record, by result
    logged: Counter[str]  # failure samples in the event log, by error class
    dropped: Counter[str]  # records the event log could not take, by kind
    peak_rss_mb: float
    server_seen: int | None = None  # requests the server counted, when it counts them
    reached: int | None = None  # of the logged failures, how many the server had seen
    did: str = ""  # what the daemon did, in words, for the table
    stream_samples: dict[str, int] = field(default_factory=dict)
    failed: list[Sample] = field(default_factory=list)  # the failure samples logged
    cut: list[Sample] = field(default_factory=list)  # the samples the stop cut, logged

    @property
    def lost(self) -> int:
        return self.started - self.recorded

    @property
    def failures(self) -> Counter[str]:
        """Results that are neither a success nor cut by the stop (`stopped`, no failure)."""
        return Counter({k: v for k, v in self.summary.items() if k not in ("success", "stopped")})

    def problems(self) -> list[str]:
        """Every way the counts disagree; empty when every sample is accounted for."""
        found = []
        if self.lost or self.abandoned:
            found.append(f"started {self.started}, recorded {self.recorded}")
        if sum(self.metric.values()) != self.recorded:
            found.append(f"prober_requests_total {sum(self.metric.values())} != {self.recorded}")
        if self.metric != self.summary:
            found.append(f"metric {dict(self.metric)} != summary {dict(self.summary)}")
        # Every failure is written, unless the event log could not take it (then it is
        # counted, among the other samples it could not take).
        unwritten = self.dropped["sample"]
        failures = self.failures
        logged = sum(self.logged.values())
        if (
            any(self.logged[k] > failures[k] for k in self.logged)
            or logged + unwritten < sum(failures.values())
            or (not unwritten and logged != sum(failures.values()))
        ):
            found.append(
                f"failures logged {dict(self.logged)} + unwritten {unwritten}"
                f" != counted {dict(failures)}"
            )
        if not unwritten and len(self.cut) != self.summary["stopped"]:
            found.append(f"stopped samples logged {len(self.cut)} != {self.summary['stopped']}")
        if self.server_seen is not None and self.reached is not None:
            expected = self.summary["success"] + self.reached
            if self.server_seen != expected:
                found.append(
                    f"server saw {self.server_seen} requests, the daemon accounts for {expected}"
                )
        if self.peak_rss_mb > PEAK_RSS_LIMIT_MB:
            found.append(f"peak RSS {self.peak_rss_mb:.1f} MB > {PEAK_RSS_LIMIT_MB} MB")
        return found

    def line(self) -> str:
        classes = " ".join(f"{k}={v}" for k, v in sorted(self.summary.items()))
        server = "" if self.server_seen is None else f" server_saw={self.server_seen}"
        dropped = sum(self.dropped.values())
        return (
            f"{self.fault}: started={self.started} recorded={self.recorded} lost={self.lost} "
            f"metric={sum(self.metric.values())} logged_failures={sum(self.logged.values())} "
            f"unwritten={dropped}{server} peak_rss={self.peak_rss_mb:.1f}MB | {classes}"
        )


class FaultDaemon:
    """`async with FaultDaemon(...) as daemon:` a ready daemon; `await daemon.stop()` ends it."""

    def __init__(
        self,
        fault: str,
        events: Path,
        targets: Sequence[tuple[str, str]],
        *args: str,
        wrap: Sequence[str] = (),
        log_file: Path | None = None,
    ) -> None:
        """`log_file`: where `wrap` sends the daemon's stdout, to follow its lines there."""
        self.fault = fault
        self.events = events
        self._args = [
            *(f"--target={lb}={url}" for lb, url in targets),
            f"--event-log={events}",
            *FAST,
            *args,
        ]
        self._wrap = wrap
        self._log_file = log_file
        self.process: DaemonProcess | None = None
        self.port = 0
        self._client = httpx.AsyncClient(timeout=10)

    async def __aenter__(self) -> FaultDaemon:
        self.process = await DaemonProcess.start(
            *self._args, wrap=self._wrap, log_file=self._log_file
        )
        try:
            self.port = (await self.process.wait_for("listening"))["port"]
            await self.process.wait_for("ready")
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.process is not None:
            await self.process.close()
        await self._client.aclose()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.process.pid

    async def metrics(self) -> list[Any]:
        answer = await self._client.get(f"http://127.0.0.1:{self.port}/metrics")
        answer.raise_for_status()
        return list(text_string_to_metric_families(answer.text))

    async def total(self, name: str, **labels: str) -> float:
        found = 0.0
        for family in await self.metrics():
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    found += s.value
        return found

    async def wait_for_total(self, name: str, at_least: float, what: str, **labels: str) -> None:
        """Until the metric (summed over matching series) reaches `at_least`."""
        seen = 0.0

        async def check() -> bool:
            nonlocal seen
            seen = await self.total(name, **labels)
            return seen >= at_least

        await until(check, f"{what} ({name} {labels} >= {at_least})")

    async def results_since(self, before: dict[str, float]) -> dict[str, float]:
        now = await self.results()
        return {k: v - before.get(k, 0.0) for k, v in now.items() if v - before.get(k, 0.0)}

    async def results(self) -> dict[str, float]:
        out: Counter[str] = Counter()
        for family in await self.metrics():
            for s in family.samples:
                if s.name == "prober_requests_total":
                    out[s.labels["result"]] += s.value
        return dict(out)

    async def stop(self, did: str = "") -> Account:
        """SIGTERM, wait for exit 0, and account for everything."""
        assert self.process is not None
        rss = peak_rss_mb(self.pid)
        await self.process.signal(signal.SIGTERM)
        code = await self.process.wait(timeout=30)
        assert code == 0, f"prober run exited {code}: {await self.process.stderr()}"
        stopped = await self.process.wait_for("stopped", timeout=1)
        return account(self.fault, self.events, stopped, rss, did)


def account(fault: str, events: Path, stopped: dict[str, Any], rss: float, did: str) -> Account:
    log = read_log(events, strict=True)
    final = log.of(Summary)[-1]
    summary: Counter[str] = Counter()
    for stream in final.streams:
        summary.update(stream.results)
    failed = [s for s in log.of(Sample) if s.error is not None and not s.stopped]
    logged = Counter(str(s.error) for s in failed)
    return Account(
        fault=fault,
        started=stopped["started"],
        recorded=stopped["samples"],
        abandoned=stopped["cancelled"],
        metric=Counter({k: int(v) for k, v in stopped["requests"].items() if v}),
        summary=+summary,
        logged=logged,
        dropped=Counter(stopped.get("event_log_dropped", {})),
        peak_rss_mb=rss,
        did=did,
        stream_samples={s.stream: s.samples for s in final.streams},
        failed=failed,
        cut=[s for s in log.of(Sample) if s.stopped],
    )


def failed_audit_ids(events: Path) -> set[str]:
    return {s.audit_id for s in read_log(events).of(Sample) if s.error is not None}


__all__ = ["Account", "FaultDaemon", "account", "failed_audit_ids"]
