"""Real clients through every LB of a lab whose apiservers keep their objects in etcd:
`kubectl get -w` (client-go) and the `kubernetes` Python client watch a heartbeat Lease that a
writer renews, through a rolling restart of every apiserver. Each sees the heartbeat before,
and again once the last server is back; every watch a stopping server held ends in its truth
log, cut (grace 0 s, upstream's default) or drained among the synthetic informer watches
(grace 25 s), and the two drains differ as upstream's does."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from prober.core.models import LB
from prober.core.truthlog import (
    SyntheticWatchesEnded,
    TerminationGracefulTerminationFinished,
    WatchEnded,
    WatchStarted,
    of_kind,
)
from prober.lab.infra.backends import SYNTHETIC_WATCHES
from prober.lab.infra.cluster import TOKEN, LabCluster
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.infra.processes import ProcessGroup
from prober.lab.infra.truth import process_records
from prober.lab.scenarios.playbook import play, sigterm
from tests.support.waiting import until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCALE = 0.05
HARNESS = Path(__file__).with_name("watchclients.py")
LBS = (LB.EXTERNAL, LB.INTERNAL, LB.SERVICE_NETWORK, LB.LOCALHOST)
CLIENTS = ("kubectl", "python")


class Seen:
    """What the harness printed: the heartbeat's versions per client and LB."""

    def __init__(self) -> None:
        self.written: list[int] = []
        self.events: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.restarts: dict[tuple[str, str], list[str]] = defaultdict(list)

    def line(self, text: str) -> None:
        try:
            record: dict[str, Any] = json.loads(text)
        except ValueError:
            return
        if "wrote" in record:
            self.written.append(record["wrote"])
        elif "rv" in record:
            self.events[record["client"], record["lb"]].append(record["rv"])
        elif "restart" in record:
            self.restarts[record["client"], record["lb"]].append(record["restart"])

    def all_saw(self, version: int) -> bool:
        return all(
            any(v >= version for v in self.events[client, str(lb)])
            for client in CLIENTS
            for lb in LBS
        )


async def rollout_with_clients(tmp_path: Path, platform: str, grace: float) -> LabCluster:
    profile = dataclasses.replace(PLATFORMS[platform], watch_grace=grace).scaled(SCALE)
    (tmp_path / "logs").mkdir()
    seen = Seen()
    async with ProcessGroup(tmp_path / "logs") as group:
        cluster = LabCluster(profile, tmp_path / "cluster", group, kernel=platform != "metal")
        try:
            await cluster.start()
            config = {
                "lbs": {str(lb): cluster.url(lb) for lb in LBS},
                "ca": str(cluster.ca_file),
                "token": TOKEN,
                "namespace": "default",
                "interval": 0.2,
                "read_timeout": 5.0,
                "h2_read_idle": 2,
                "h2_ping_timeout": 1,
                "cache": str(tmp_path / "kubectl-cache"),
            }
            (tmp_path / "clients.json").write_text(json.dumps(config))
            argv = cluster.enter_client(
                [sys.executable, str(HARNESS), str(tmp_path / "clients.json")]
            )
            await group.start("clients", argv, on_line=seen.line)
            await until(lambda: seen.written, "a first heartbeat", 30)
            await until(lambda: seen.all_saw(seen.written[0]), "every watch's first event", 60)
            await play(cluster, sigterm, None, lambda _: None)
            await cluster.settle()
            after = seen.written[-1]
            await until(lambda: seen.all_saw(after), "every watch after the rollout", 60)
        finally:
            cluster.close()
            for key, events in sorted(seen.events.items()):
                print(key, len(events), "events, last", max(events), seen.restarts[key])
    return cluster


@pytest.mark.parametrize(
    ("platform", "grace"),
    [("aws", 0.0), pytest.param("metal", 25.0, marks=pytest.mark.matrix)],  # metal: a matrix run
)
async def test_real_watches_through_every_lb_survive_a_rolling_restart(
    tmp_path: Path, platform: str, grace: float
) -> None:
    cluster = await rollout_with_clients(tmp_path, platform, grace)
    hows: dict[str, int] = defaultdict(int)
    for server in cluster.apiservers:
        stopped = process_records(server.truth_path)[0]  # each server was restarted once
        assert of_kind(stopped, TerminationGracefulTerminationFinished)
        started = {(r.conn, r.stream) for r in of_kind(stopped, WatchStarted)}
        ended = {(r.conn, r.stream): r for r in of_kind(stopped, WatchEnded)}
        assert started, f"{server.hostname} held no watch"
        assert started == set(ended), "every watch the stopping server held ends in its truth"
        for record in ended.values():
            hows[record.how] += 1
        (synthetic,) = of_kind(stopped, SyntheticWatchesEnded)
        if grace == 0:
            assert synthetic.ended == {"cut": SYNTHETIC_WATCHES}
        else:
            drained = synthetic.ended["drained"]
            assert drained == SYNTHETIC_WATCHES, synthetic
            # upstream's floor of 200 per second, on the run's time scale
            assert synthetic.last - synthetic.first >= (drained - 1) / (200 / SCALE) * 0.95
    print(dict(hows))
    assert hows["cut" if grace == 0 else "drained"] > 0
    assert set(hows) <= {"cut", "drained", "reset", "client-gone", "timeout"}
    if grace == 0:
        assert "drained" not in hows
