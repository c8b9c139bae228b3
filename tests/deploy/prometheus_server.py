"""A real Prometheus (Debian's) for tests: the project's rules loaded, scraping targets a test
adds while it runs (file service discovery), queried over its HTTP API."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from prober.lab.infra.haproxy import free_port
from tests.support.waiting import until

INTERVAL = "500ms"  # scrape and rule evaluation: the lab's windows last seconds, not minutes


@dataclass
class Prometheus:
    url: str
    targets: Path
    client: httpx.AsyncClient

    def scrape(self, name: str, port: int, labels: dict[str, str]) -> None:
        """Add a target; Prometheus sees the file appear (written whole, then renamed)."""
        entry = [{"targets": [f"127.0.0.1:{port}"], "labels": labels}]
        part = self.targets / f".{name}.json.part"
        part.write_text(json.dumps(entry))
        part.rename(self.targets / f"{name}.json")

    async def api(self, path: str, **params: Any) -> Any:
        answer = await self.client.get(f"{self.url}/api/v1/{path}", params=params)
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    async def query_range(self, expr: str, start: float, end: float) -> list[dict[str, Any]]:
        data = await self.api("query_range", query=expr, start=start, end=end, step=INTERVAL)
        result: list[dict[str, Any]] = data["result"]
        return result

    async def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        found: list[dict[str, str]] = await self.api(
            "series", **{"match[]": match}, start=start, end=end
        )
        return found

    async def until(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll a query until it returns something: Prometheus signals nothing else."""
        return await until(lambda: self.query(expr), f"a result of {expr}", timeout, every=0.1)


@asynccontextmanager
async def running_prometheus(workdir: Path, rule_files: list[Path]) -> AsyncIterator[Prometheus]:
    targets = workdir / "targets"
    targets.mkdir(parents=True)
    config = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": "prober",
                "scrape_timeout": INTERVAL,
                "file_sd_configs": [{"files": [str(targets / "*.json")], "refresh_interval": "1s"}],
            }
        ],
    }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        "prometheus",
        f"--config.file={config_file}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=log,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            await _until_ready(client, url, process, workdir / "prometheus.log")
            yield Prometheus(url, targets, client)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()
        log.close()


async def _until_ready(
    client: httpx.AsyncClient, url: str, process: asyncio.subprocess.Process, log: Path
) -> None:

    async def ready() -> bool:
        if process.returncode is not None:
            said = log.read_text()  # noqa: ASYNC240 - it died: nothing else is running
            raise AssertionError(f"prometheus exited {process.returncode}: {said}")
        try:
            return (await client.get(f"{url}/-/ready")).status_code == 200
        except httpx.TransportError:
            return False  # not listening yet

    await until(ready, "prometheus ready", 30, every=0.1)
