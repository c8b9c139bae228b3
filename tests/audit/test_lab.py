"""The audit log of the lab's fake kube-apiserver, written during a real graceful shutdown
driven by httpx, summarised and followed."""

from __future__ import annotations

import json
import ssl
from collections import Counter
from pathlib import Path

import httpx

from prober.audit.event import DURING_GRACEFUL, SHUTDOWN, user_agent_product
from prober.audit.files import discover
from prober.audit.follow import Follower
from prober.audit.summary import summarize
from prober.fakeapiserver import ApiServer, ApiServerOptions
from prober.lab.infra.certs import LabCA
from tests.support.clock import FakeClock

PATH = "/api/v1/namespaces/default"


async def test_a_fake_apiserver_shutdown_is_summarised_and_followed_alike(tmp_path: Path):
    ca = LabCA(tmp_path / "certs")
    cert = ca.issue("apiserver", ["localhost", "127.0.0.1"])
    logs = tmp_path / "audit"
    clock = FakeClock()
    server = ApiServer(
        ApiServerOptions(
            cert=cert.cert,
            key=cert.key,
            port=0,
            hostname="master-0",
            shutdown_delay=10.0,
            audit_log=logs / "master-0" / "audit.log",
            goaway_linger=0.05,
        ),
        clock=clock,
    )
    ports = await server.start()
    tls = ssl.create_default_context(cafile=str(ca.ca_cert))
    base = f"https://localhost:{ports.port}"

    async def fresh(agent: str, audit_id: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=base, verify=tls, http2=True) as client:
            return await client.get(PATH, headers={"User-Agent": agent, "Audit-ID": audit_id})

    try:
        async with httpx.AsyncClient(base_url=base, verify=tls, http2=True) as kept:

            async def reused(audit_id: str) -> httpx.Response:
                headers = {"User-Agent": "prober/0.1.0 reused", "Audit-ID": audit_id}
                return await kept.get(PATH, headers=headers)

            assert (await reused("before")).status_code == 200
            server.begin_shutdown()
            await clock.advance(2.0)  # 20 % of the delay: not late
            assert (await fresh("early-client/1.0", "early")).status_code == 200
            assert (await reused("reused-20")).status_code == 200
            await clock.advance(7.0)  # 90 %: new connections are late
            for i in range(3):
                response = await fresh("late-client/2.1 (linux/amd64)", f"late-{i}")
                assert response.status_code == 200
            # An old connection is not late, but the request is, by the older annotation.
            assert (await reused("reused-90")).status_code == 200
    finally:
        await server.kill()

    written = [json.loads(x) for x in (logs / "master-0" / "audit.log").read_text().splitlines()]
    by_id = {e["auditID"]: e.get("annotations", {}) for e in written if e["auditID"]}
    assert DURING_GRACEFUL in by_id["late-0"]
    assert SHUTDOWN in by_id["late-0"]
    assert DURING_GRACEFUL not in by_id["reused-90"]
    assert "late=true" in by_id["reused-90"][SHUTDOWN]
    assert "late=false" in by_id["early"][SHUTDOWN]
    assert SHUTDOWN not in by_id["before"]

    families, _ = discover([logs])
    summary = summarize(families)
    body = summary.to_json()
    assert body["bad_lines"] == 0
    assert body["events"] == len(written)
    assert [(g["apiserver"], g["user_agent"], g["count"]) for g in body["late"]] == [
        ("master-0", "late-client/2.1 (linux/amd64)", 3),
        ("master-0", "prober/0.1.0 reused", 1),
    ]
    assert all(g["source_ip"] == "127.0.0.1" for g in body["late"])

    follower = Follower(families)
    follower.poll()
    counts = follower.state.counts["master-0"]
    by_product: Counter[str] = Counter()
    for key, arrivals in summary.late.items():
        by_product[user_agent_product(key[1])] += arrivals.count
    assert counts.late == by_product == {"late-client": 3, "prober": 1}
    assert counts.stats.events == body["events"]
