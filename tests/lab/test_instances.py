"""Each apiserver process from its truth file, written by real fake apiservers (two processes
of one host appending to one file, as a restart does), and each LB's add-back from its state
changes."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import httpx
import pytest

from prober.core.models import LB
from prober.core.truthlog import EarlyAnswered, EarlyRequest, Listening
from prober.fakeapiserver import ApiServer, ApiServerOptions
from prober.fakeapiserver.options import EarlyAnswer
from prober.lab.infra.instances import (
    AddBack,
    EarlyTruth,
    InstanceTruth,
    add_backs,
    early_by_audit_id,
    read_instances,
)
from prober.lab.infra.lbstate import ServerEvent
from prober.lab.infra.platforms import PLATFORMS
from prober.lab.infra.truth import LbTruth, TruthError, first_up
from prober.lab.judges.restarts import lb_of, rows
from tests.support.apiservers import TOKEN, LabCerts
from tests.support.clock import FakeClock
from tests.support.truthfiles import at, truth_lines, write_truth

API = "/api/v1/namespaces/default"
AGENT = "prober/0.1.0 kube-api-http1-internal-lb-new-connections"


async def get(server: ApiServer, certs: LabCerts, audit_id: str) -> int:
    assert server.ports is not None
    async with httpx.AsyncClient(verify=certs.client_context()) as http:
        response = await http.get(
            f"https://localhost:{server.ports.port}{API}",
            headers={"Authorization": f"Bearer {TOKEN}", "Audit-ID": audit_id, "User-Agent": AGENT},
        )
        return response.status_code


async def test_two_processes_of_one_host_in_one_truth_file(
    base_options: ApiServerOptions, certs: LabCerts, tmp_path: Path
) -> None:
    path = tmp_path / "truth.jsonl"
    options = dataclasses.replace(base_options, truth=path, post_start_hooks=2.0)
    first_clock = FakeClock(start=1000.0)
    first = ApiServer(options, clock=first_clock)
    await first.start()
    assert await get(first, certs, "normal") == 200
    await first_clock.advance(2.0)
    await first.startup.wait("ready")
    await first.kill()

    early = dataclasses.replace(
        options, post_start_hooks=1.0, early_ready=5.0, early_answer=EarlyAnswer.FORBIDDEN
    )
    clock = FakeClock(start=1100.0)
    second = ApiServer(early, clock=clock)
    await second.start()
    assert await get(second, certs, "before-ready") == 403
    await clock.advance(1.0)
    assert await get(second, certs, "after-ready") == 403
    await clock.advance(5.0)
    await second.startup.wait("serving")
    assert await get(second, certs, "served") == 200
    await second.kill()

    one, two = read_instances(path)
    wall = 1_700_000_000.0  # the fake clocks' wall offset
    assert (one.label, two.label) == ("master-0 #1", "master-0 #2")
    assert (one.holder, two.holder) == (first.holder, second.holder)
    assert one.apiserver == two.apiserver == first.apiserver_id
    assert (one.listening, one.serving, one.ready) == (wall + 1000.0, wall + 1000.0, wall + 1002.0)
    assert (one.early_ready, one.early) == (0.0, ())
    assert (two.listening, two.ready, two.serving) == (wall + 1100.0, wall + 1101.0, wall + 1106.0)
    assert two.early_ready == 5.0
    before, after = two.early
    assert (before.audit_id, before.after_ready) == ("before-ready", False)
    assert (after.audit_id, after.after_ready) == ("after-ready", True)
    for found in (before, after):
        assert (found.answer, found.status, found.how) == ("403", 403, "answered")
        assert (found.path, found.user_agent) == (API, AGENT)
        assert found.received <= found.settled
    assert early_by_audit_id([one, two]) == {
        "before-ready": ("master-0 #2", before),
        "after-ready": ("master-0 #2", after),
    }


def instance(host: str, start: int, listening: float, ready: float) -> InstanceTruth:
    return InstanceTruth(host, f"apiserver-{host}", f"holder-{start}", start, listening, ready,
                         ready, 0.0, ())  # fmt: skip


def test_each_lb_takes_each_instance_back_at_its_first_mark_up() -> None:
    events = [
        ServerEvent(40.0, "master-0", False, "a check starved of CPU"),
        ServerEvent(45.0, "master-0", True, "back: a mark-up of the first instance"),
        ServerEvent(90.0, "master-0", False, "shutting down"),
        ServerEvent(104.0, "master-1", True, "another host"),
        ServerEvent(106.0, "master-0", True, "the restarted instance"),
        ServerEvent(300.0, "master-0", True, "later"),
    ]
    lbs = {
        LB.INTERNAL: LbTruth(LB.INTERNAL, events, reset_on_down=True),
        LB.EXTERNAL: LbTruth(LB.EXTERNAL, events[:3], reset_on_down=True),
        LB.LOCALHOST: LbTruth(LB.LOCALHOST, (), False, reaches=frozenset({"master-0"})),
    }
    first, second = instance("master-0", 1, 0.0, 1.0), instance("master-0", 2, 100.0, 102.0)
    other = instance("master-1", 1, 0.0, 1.0)
    backs = add_backs([first, second, other], lbs)
    assert backs["master-0 #1"] == (AddBack(LB.INTERNAL, 45.0), AddBack(LB.EXTERNAL, 45.0))
    assert backs["master-0 #2"] == (AddBack(LB.INTERNAL, 106.0), AddBack(LB.EXTERNAL, None))
    assert backs["master-1 #1"] == (AddBack(LB.INTERNAL, 104.0), AddBack(LB.EXTERNAL, None))
    assert backs["master-0 #2"][0].after(second.ready) == 4.0
    assert backs["master-0 #2"][1].after(second.ready) is None


@pytest.mark.parametrize(
    ("after", "before", "expected"),
    [
        (0.0, math.inf, 45.0),
        (46.0, math.inf, 106.0),
        (46.0, 100.0, math.inf),
        (301.0, math.inf, math.inf),
    ],
)
def test_first_up(after: float, before: float, expected: float) -> None:
    events = [
        ServerEvent(45.0, "master-0", True, "up"),
        ServerEvent(50.0, "master-0", False, "down"),
        ServerEvent(80.0, "master-1", True, "another host"),
        ServerEvent(106.0, "master-0", True, "up"),
    ]
    assert first_up(events, "master-0", after, before) == expected


def test_an_early_record_without_its_status_is_named(tmp_path: Path) -> None:
    path = tmp_path / "truth.jsonl"
    early = json.loads(truth_lines([at(2.0, EARLY)]))
    del early["status"]
    listening = truth_lines([at(1.0, Listening(port=6443, holder="apiserver-x_1"))])
    path.write_text(listening + json.dumps(early) + "\n")
    with pytest.raises(TruthError) as raised:
        read_instances(path)
    assert str(raised.value) == f"{path}:2: early_answer: missing field 'status'"


def test_a_file_that_does_not_begin_with_listening_is_named(tmp_path: Path) -> None:
    path = write_truth(tmp_path / "truth.jsonl", [at(2.0, EARLY)])
    with pytest.raises(TruthError) as raised:
        read_instances(path)
    assert str(raised.value) == f"{path}: process 1: no `listening` begins its records"


EARLY = EarlyAnswered(
    request=EarlyRequest(audit_id="a", conn=1, stream=1, protocol="h2", method="GET",
                         path="/api", peer="198.18.0.2:1", user_agent="curl/8.5.0",
                         received=1.5, after_ready=True),
    answer="500", status=500, how="answered",
)  # fmt: skip


@pytest.mark.parametrize(
    ("agent", "lb"),
    [
        ("prober/0.1.0 kube-api-http2-internal-lb-new-connections", LB.INTERNAL),
        ("prober/0.1.0 kube-api-http1-service-network-reused-connections", LB.SERVICE_NETWORK),
        ("prober/0.1.0 kube-api-http1-localhost-watch watch", LB.LOCALHOST),
        ("curl/8.5.0", None),
    ],
)
def test_the_lb_a_request_named(agent: str, lb: LB | None) -> None:
    assert lb_of(agent) is lb


def answer(agent: str, status: int | None, how: str = "answered") -> EarlyTruth:
    return EarlyTruth("id", 101.0, 101.1, "403", status, how, True, API, agent, "198.18.0.2:1")


def test_a_row_per_lb_of_each_restarted_instance() -> None:
    internal = "prober/0.1.0 kube-api-http1-internal-lb-new-connections"
    early = (
        answer(internal, 403),
        answer(internal, 403),
        answer("prober/0.1.0 kube-api-http2-localhost-watch watch", None, "client-gone"),
        answer("curl/8.5.0", 403),
    )
    restarted = dataclasses.replace(
        instance("master-0", 2, 100.0, 100.5), serving=105.5, early=early
    )
    lbs = {
        LB.INTERNAL: LbTruth(LB.INTERNAL, [ServerEvent(103.5, "master-0", True, "up")], True),
        LB.EXTERNAL: LbTruth(LB.EXTERNAL, [], True),
        LB.LOCALHOST: LbTruth(LB.LOCALHOST, (), False, reaches=frozenset({"master-0"})),
    }
    head = ["master-0 #2", "0.50 s", "5.50 s"]
    assert rows([instance("master-0", 1, 0.0, 0.5), restarted], lbs, PLATFORMS["aws"]) == [
        [*head, "internal-lb", "3.00 s", "30.00 s", "403 x2"],
        [*head, "external-lb", "-", "30.00 s", "-"],
        [*head, "localhost", "-", "-", "hang/client-gone x1"],
        [*head, "-", "-", "-", "403 x1"],
    ]
