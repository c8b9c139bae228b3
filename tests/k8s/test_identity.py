"""Each new holder of an identity Lease, from recorded LeaseLists a cluster answers, served
over real TLS to the real kubernetes client: sequences of lists, and exactly the `identity`
records they make. The clocks are scripted: each read's send and answer times are the case's.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from prober.config import Config
from prober.core.models import IdentitySeen, parse_rfc3339
from prober.k8s.cluster import ClusterAccess, LeaseView
from prober.k8s.discovery import HostDecoder
from tests.support.certs import Certs
from tests.support.kube_api import LEASES, KubeAPI

FIXTURES = Path(__file__).parent / "fixtures"
TOKEN = "kube-api-token-51c9"
RUN_START = parse_rfc3339("2026-12-05T09:59:00Z")  # run time t is this wall clock + t
FORBIDDEN = "403"
HOSTS = {
    0: "apiserver-iv6w2nhkao7jmq6gk7k2joxneq",
    1: "apiserver-vt4yhzp7c6vqfvtkuilzp6ebvm",
    2: "apiserver-f74lzuvo6ts5iykoiqiakh5ski",
}
FIRST_HOLDERS = {
    0: "df3eb1b7-3456-4387-a6df-f4227cf1a59a",
    1: "caa7449d-ea14-4b4c-bed1-e13fdae20062",
    2: "5546dd01-8c57-4df2-b234-af5a1fa51cc8",
}
NEXT_HOLDERS = {
    1: "ad9d074c-01cf-4e41-8e84-7c41d13aba7e",
    2: "701629d4-0a31-42b5-b92c-a441789a73e0",
}

UPSTREAM_RENEW = Config().identity_renew_interval  # the default: upstream's 10 s


def seen(
    at: tuple[float, str], master: int, holder: str, renew_t: float | None, before_t: float | None
) -> IdentitySeen:
    """The record, not provably the holder's first write (`first` marks one that is)."""
    t, ts = at  # the read's answer: run time and wall clock
    return IdentitySeen(
        t=t,
        ts=ts,
        host=HOSTS[master],
        node=f"ci-op-x7k2m-master-{master}",
        holder=f"{HOSTS[master]}_{holder}",
        renew_t=renew_t,
        before_t=before_t,
        first=False,
    )


def first(record: IdentitySeen) -> IdentitySeen:
    return replace(record, first=True)


# The run's first read: every holder there is, none provably its first write.
AT_START = [
    seen((68.1, "2026-12-05T10:00:08.100000Z"), 0, FIRST_HOLDERS[0], 61.123456, None),
    seen((68.1, "2026-12-05T10:00:08.100000Z"), 1, FIRST_HOLDERS[1], 63.5, None),
    seen((68.1, "2026-12-05T10:00:08.100000Z"), 2, FIRST_HOLDERS[2], 67.000001, None),
]
MASTER_1_BACK = seen((72.6, "2026-12-05T10:00:12.600000Z"), 1, NEXT_HOLDERS[1], 72.25, 68.0)


@dataclass(frozen=True)
class Case:
    name: str
    reads: list[tuple[str, tuple[float, ...]]]  # (fixture or FORBIDDEN, (sent[, answered]))
    records: list[list[IdentitySeen]]  # per read
    renew_interval: float = 10.0
    warnings: int = 0
    nodes: dict[str, str] = field(default_factory=dict)  # known after the last read


START = ("leases-three-masters.json", (68.0, 68.1))
CASES = [
    Case(
        "a restart takes the Lease over: its renewTime is the first write",
        [START, ("leases-master-1-restarted.json", (72.5, 72.6))],
        [AT_START, [first(MASTER_1_BACK)]],
    ),
    Case(
        # 72.25 - 68.0 is 4.25 s: at a 4 s renew interval one earlier renewal fits between.
        "reads further apart than the renew interval prove nothing",
        [START, ("leases-master-1-restarted.json", (72.5, 72.6))],
        [AT_START, [MASTER_1_BACK]],
        renew_interval=4.0,
    ),
    Case(
        "a read that fails is no read before: the one before it is",
        [START, (FORBIDDEN, (70.0,)), ("leases-master-1-restarted.json", (72.5, 72.6))],
        [AT_START, [], [first(MASTER_1_BACK)]],
        warnings=1,
    ),
    Case(
        "a new holder without a renewTime, or with one that is no time, has none",
        [START, ("leases-restarted-without-renew-time.json", (72.5, 72.6))],
        [
            AT_START,
            [
                seen((72.6, "2026-12-05T10:00:12.600000Z"), 1, NEXT_HOLDERS[1], None, 68.0),
                seen((72.6, "2026-12-05T10:00:12.600000Z"), 2, NEXT_HOLDERS[2], None, 68.0),
            ],
        ],
    ),
    Case(
        "a Lease deleted and made again: the read without it comes before",
        [
            START,
            ("leases-master-2-gone.json", (78.0, 78.1)),
            ("leases-master-2-back.json", (85.0, 85.1)),
        ],
        [
            AT_START,
            [],
            [
                first(
                    seen((85.1, "2026-12-05T10:00:25.100000Z"), 2, NEXT_HOLDERS[2], 84.03125, 78.0)
                )
            ],
        ],
        nodes={HOSTS[m]: f"ci-op-x7k2m-master-{m}" for m in range(3)},  # master-2's kept
    ),
]


class Script:
    """Run time from the case's list, one value a call; the wall clock at the last one."""

    def __init__(self, times: list[float]) -> None:
        self._times = iter(times)
        self.last = 0.0

    def now(self) -> float:
        self.last = next(self._times)
        return self.last

    def wall(self) -> float:
        return RUN_START + self.last

    def left(self) -> list[float]:
        return list(self._times)


@pytest.fixture
def recorded(certs: Certs) -> Iterator[KubeAPI]:
    api = KubeAPI(certs.server, TOKEN).start()
    yield api
    api.close()


def warnings(output: io.StringIO) -> list[str]:
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    return [line["error"] for line in lines if line["event"] == "apiserver_identity_unavailable"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_recorded_lease_lists_make_exactly_these_records(
    case: Case, recorded: KubeAPI, certs: Certs, tmp_path: Path, log_output: io.StringIO
) -> None:
    access = ClusterAccess.connect(False, str(recorded.kubeconfig(tmp_path, certs.ca_file)))
    decoder = HostDecoder(access, renew_interval=case.renew_interval)
    script = Script([t for _, times in case.reads for t in times])
    decoder.start_run(script.now, script.wall)
    made = []
    for fixture, _ in case.reads:
        recorded.forbidden = {LEASES} if fixture == FORBIDDEN else set()
        if fixture != FORBIDDEN:
            recorded.lease_list = json.loads((FIXTURES / fixture).read_text())
        made.append(await decoder.refresh())
    assert made == case.records
    assert script.left() == []  # each read timed once at its send and once at its answer
    assert warnings(log_output) == ["leases in kube-system: HTTP 403 Forbidden"] * case.warnings
    if case.nodes:
        assert decoder.known() == case.nodes


async def test_before_the_runs_clock_a_read_learns_nodes_and_makes_no_record(
    recorded: KubeAPI, certs: Certs, tmp_path: Path
) -> None:
    """Discovery reads before the run has a clock: the holders then are the run's first
    read's, with no read before."""
    recorded.lease_list = json.loads((FIXTURES / "leases-three-masters.json").read_text())
    access = ClusterAccess.connect(False, str(recorded.kubeconfig(tmp_path, certs.ca_file)))
    decoder = HostDecoder(access, renew_interval=UPSTREAM_RENEW)
    assert await decoder.refresh() == []
    assert decoder.node_of(HOSTS[1]) == "ci-op-x7k2m-master-1"
    script = Script([68.0, 68.1])
    decoder.start_run(script.now, script.wall)
    assert await decoder.refresh() == AT_START


GARBLED = [
    ({"items": "none"}, []),
    ({"items": [None, 7, {"metadata": {"labels": "x"}}]}, []),
    (
        {"items": [{"metadata": {"name": "apiserver-a", "labels": {"kubernetes.io/hostname": 3}},
                    "spec": {"holderIdentity": ["h"], "renewTime": 1796464800}}]},
        [LeaseView("apiserver-a", None, None, None)],
    ),
    (
        {"items": [{"metadata": {"name": "apiserver-a"},
                    "spec": {"holderIdentity": "h", "renewTime": "2026-12-05T10:00:00"}}]},
        [LeaseView("apiserver-a", None, "h", None)],  # no offset: no instant
    ),
    (
        {"items": [{"metadata": {"name": "apiserver-a"},
                    "spec": {"renewTime": "2026-12-05T11:00:00.5+01:00"}}]},
        [LeaseView("apiserver-a", None, None, RUN_START + 60.5)],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "views"), GARBLED)
def test_what_the_server_sends_is_never_trusted(
    recorded: KubeAPI, certs: Certs, tmp_path: Path, answer: dict[str, object], views: list[object]
) -> None:
    recorded.lease_list = answer
    access = ClusterAccess.connect(False, str(recorded.kubeconfig(tmp_path, certs.ca_file)))
    assert access.identity_leases() == views
