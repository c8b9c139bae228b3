"""Upstream's lines as the lab's truth: the main's JSON lines written in the fake's records, so
that every truth reader holds both; the service network following the real endpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prober.core.header import apiserver_id
from prober.core.phase import ShutdownPhase
from prober.core.truthlog import ShutdownInitiated, WatchEnded, of_kind
from prober.lab.infra.endpoints import Follower, addresses
from prober.lab.infra.instances import read_instances
from prober.lab.infra.truth import read_shutdowns, read_truth
from prober.lab.infra.upstream import TruthWriter, go_line, with_hostname
from prober.lab.judges.watchcheck import read_truth_watches

WALL = 1_796_530_000.0
HOST = apiserver_id("master-0")


def line(event: str, at: float, **fields: object) -> str:
    return json.dumps({"event": event, "wall": WALL + at, "uptime_s": at, **fields})


def test_the_mains_lines_become_the_fakes_records(tmp_path: Path) -> None:
    path = tmp_path / "truth.jsonl"
    write = TruthWriter(path, "master-0", delay=10.0, port=6443)
    lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=true"
    for text in (
        line("start", 0.0, pid=1),
        line("listening", 1.0, status=500),
        # a watch before the holder is known: held, so that the process begins listening
        line("watch_started", 1.5, stream=1, peer="198.18.0.2:4000", protocol="h1", path=lease),
        line("ready", 2.0, status=200),
        line("identity_lease", 2.5, name="apiserver-x", holder="apiserver-x_1"),
        line("shutdown_initiated", 20.0),
        line("watch_ended", 21.0, stream=1, how="client-gone"),
        line("watch_started", 29.0, stream=2, peer="198.18.0.2:4001", protocol="h2", path=lease),
        line("not_accepting_new_requests", 30.0),
        line("watch_ended", 30.5, stream=2, how="ended"),
        line("http_server_stopped_listening", 31.0),
        "not json: klog goes to stderr, but a stray line is skipped",
    ):
        write(text)
    records = read_truth(path)
    assert [r.KIND for r in records][:4] == ["listening", "ready", "serving", "watch_started"]
    (started,) = of_kind(records, ShutdownInitiated)
    assert (started.host, started.apiserver, started.delay) == ("master-0", HOST, 10.0)
    ended = of_kind(records, WatchEnded)
    assert [(e.stream, e.seconds, e.phase) for e in ended] == [
        (1, 19.5, ShutdownPhase.DELAY_EARLY), (2, 1.5, ShutdownPhase.AFTER)
    ]  # fmt: skip
    (instance,) = read_instances(path)
    assert (instance.hostname, instance.holder) == ("master-0", "apiserver-x_1")
    assert (instance.listening, instance.ready) == (WALL + 1.0, WALL + 2.0)
    (shutdown,) = read_shutdowns(path)
    assert (shutdown.t0, shutdown.not_accepting, shutdown.stopped) == (
        WALL + 20.0, WALL + 30.0, WALL + 31.0
    )  # fmt: skip
    first, second = read_truth_watches(path, "/leases")
    assert (first.peer, first.protocol, first.phase, first.how) == (
        "198.18.0.2:4000", "http1", "before", "client-gone"
    )  # fmt: skip
    # begun in the delay's last 20 %, ended by the server as it drained
    assert (second.protocol, second.phase, second.how) == ("http2", "delay_late", "drained")


@pytest.mark.parametrize(
    "text",
    ["not json", "[1]", '{"wall": 1.0}', '{"event": "x"}', '{"event": "x", "wall": true}',
     '{"event": 1, "wall": 1.0}'],
)  # fmt: skip
def test_a_line_no_go_program_of_ours_printed_is_none(text: str) -> None:
    assert go_line(text) is None


def test_a_go_line_keeps_the_keys_beside_its_event() -> None:
    found = go_line(line("watch_started", 1.0, stream=3, peer="198.18.0.2:1"))
    assert found is not None
    assert (found.event, found.wall, found.integer("stream"), found.text("peer")) == (
        "watch_started", WALL + 1.0, 3, "198.18.0.2:1"
    )  # fmt: skip


def test_a_hostname_of_its_own_keeps_the_pid() -> None:
    argv = with_hostname("master-1", ["/bin/kube-apiserver", "--v=2"])
    assert argv[:3] == ["unshare", "--uts", "--"]
    assert argv[-3:] == ["master-1", "/bin/kube-apiserver", "--v=2"]
    assert "exec" in argv[5]


def endpoints(event: str, *ips: str) -> bytes:
    subsets = [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": 6443}]}] if ips else []
    return json.dumps({"type": event, "object": {"kind": "Endpoints", "subsets": subsets}}).encode()


@pytest.mark.parametrize(
    ("event", "found"),
    [(endpoints("ADDED", "198.18.2.2", "198.18.1.2"), ["198.18.1.2", "198.18.2.2"]),
     (endpoints("MODIFIED"), []), (endpoints("DELETED", "198.18.1.2"), None),
     (b'{"type": "BOOKMARK", "object": {"kind": "Endpoints"}}', None), (b"no json", None)],
)  # fmt: skip
def test_an_endpoints_event_gives_its_addresses(event: bytes, found: list[str] | None) -> None:
    assert addresses(event) == found


def test_the_service_network_follows_each_address_out_and_in() -> None:
    later: list[tuple[float, object]] = []
    follow = Follower({"198.18.1.2": "master-0", "198.18.2.2": "master-1"}, 0.5,
                      lambda delay, action: later.append((delay, action)), mover)  # fmt: skip
    said = [["198.18.1.2", "198.18.2.2"], ["198.18.2.2"], ["198.18.2.2", "198.18.9.9"],
            ["198.18.1.2", "198.18.2.2"]]  # fmt: skip
    for at, found in enumerate(said):
        follow(json.dumps({"event": "endpoints", "wall": float(at), "addresses": found}))
    follow("not a line of the follower")
    # the first version is what the service network was built with; 198.18.9.9 is no lab's
    assert [delay for delay, _ in later] == [0.5, 0.5]
    moved = [action() for _, action in later]  # type: ignore[operator]
    assert moved == [("master-0", False), ("master-0", True)]


def mover(hostname: str, serving: bool) -> tuple[str, bool]:
    return hostname, serving
