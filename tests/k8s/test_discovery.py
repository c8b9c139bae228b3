"""Discovery and node names with the real kubernetes client against a small local API."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from prober.config import Config, load_config
from prober.core.header import format_shutdown_header
from prober.core.kinds import standard_kinds
from prober.core.models import LB, ApiserverNode, IdentitySeen, RunRecord, Sample, Window, rfc3339
from prober.daemon.app import Daemon
from prober.daemon.commands import discover
from prober.k8s.cluster import ClusterAccess, Infrastructure, LeaseView
from prober.k8s.discovery import HostDecoder, discover_targets
from prober.k8s.errors import ClusterError
from tests.support.certs import Certs
from tests.support.kube_api import INFRASTRUCTURE, LEASES, KubeAPI, infrastructure, lease
from tests.support.logcapture import log_line
from tests.support.replay import read_log
from tests.support.tls_server import HOST_ID, TLSServer
from tests.support.waiting import until

IDENTITY = {"apiserver.kubernetes.io/identity": "kube-apiserver"}
API_TOKEN = "kube-api-token-0b5e"

UPSTREAM_RENEW = Config().identity_renew_interval  # the default: upstream's 10 s


@pytest.fixture
def kube(certs: Certs) -> Iterator[KubeAPI]:
    api = KubeAPI(certs.server, API_TOKEN).start()
    api.infrastructure = infrastructure(
        "AWS", "https://api.example.com:6443", "https://api-int.example.com:6443"
    )
    api.leases = [
        lease(HOST_ID, {**IDENTITY, "kubernetes.io/hostname": "master-0"}),
        lease("apiserver-other", {**IDENTITY, "kubernetes.io/hostname": "master-1"}),
        lease("not-an-apiserver", {"kubernetes.io/hostname": "worker-9"}),
    ]
    yield api
    api.close()


def test_infrastructure_and_leases(kube: KubeAPI, certs: Certs, tmp_path: Path) -> None:
    access = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file)))
    assert access.infrastructure() == Infrastructure(
        "aws", "https://api.example.com:6443", "https://api-int.example.com:6443"
    )
    assert access.identity_leases() == [
        LeaseView(HOST_ID, "master-0", None, None),
        LeaseView("apiserver-other", "master-1", None, None),
    ]
    assert any("labelSelector=apiserver.kubernetes.io" in r for r in kube.requests)


def test_targets_from_the_cluster_and_the_pod_environment(
    kube: KubeAPI, certs: Certs, tmp_path: Path
) -> None:
    access = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file)))
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    targets = discover_targets(access.infrastructure(), localhost=True, env=env)
    assert [(t.lb, t.url) for t in targets] == [
        (LB.SERVICE_NETWORK, "https://[fd00::1]:443"),
        (LB.INTERNAL, "https://api-int.example.com:6443"),
        (LB.EXTERNAL, "https://api.example.com:6443"),
        (LB.LOCALHOST, "https://localhost:6443"),
    ]
    assert {t.ca_file for t in targets} == {None}  # the kubeconfig's CA: `with_discovered`
    assert access.ca_file == certs.ca_file
    assert {t.name for t in targets} == {"kube-api"}


async def test_node_names_are_kept_once_learnt(kube: KubeAPI, certs: Certs, tmp_path: Path):
    access = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file)))
    decoder = HostDecoder(access, renew_interval=UPSTREAM_RENEW)
    await decoder.refresh()
    kube.leases = kube.leases[1:]  # the stopped server's Lease is gone
    await decoder.refresh()
    assert decoder.node_of(HOST_ID) == "master-0"
    assert decoder.node_of("apiserver-unknown") is None


async def test_without_permission_to_read_leases_it_says_so_once(
    kube: KubeAPI, certs: Certs, tmp_path: Path, log_output: io.StringIO
) -> None:
    access = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file)))
    decoder = HostDecoder(access, renew_interval=UPSTREAM_RENEW)
    await decoder.refresh()  # learnt
    kube.forbidden.add(LEASES)
    await decoder.refresh()
    await decoder.refresh()
    warning = log_line(log_output, "apiserver_identity_unavailable")  # one, not two
    assert warning["level"] == "warning"
    assert warning["error"] == "leases in kube-system: HTTP 403 Forbidden"
    assert decoder.node_of(HOST_ID) == "master-0"  # what was learnt stays
    fresh = HostDecoder(access, renew_interval=UPSTREAM_RENEW)
    await fresh.refresh()  # never allowed: nothing known, and no error
    assert dict(fresh.nodes) == {}


async def test_targets_and_platform_configured_read_only_the_leases(
    kube: KubeAPI, certs: Certs, tls_server: TLSServer, tmp_path: Path
) -> None:
    """A cluster that is not OpenShift (the lab's apiservers) has no Infrastructure object:
    a config that names its targets and platform never asks for it."""
    kube.forbidden.add(INFRASTRUCTURE)
    config = load_config(
        env={},
        flags={
            "kubeconfig": str(kube.kubeconfig(tmp_path, certs.ca_file)),
            "platform": "gcp",
            "targets": [{"lb": "internal-lb", "url": tls_server.url}],
        },
    )
    config, hosts = await discover(config)
    assert [t.url for t in config.targets] == [tls_server.url]
    assert hosts.node_of(HOST_ID) == "master-0"
    assert not any(r.startswith(INFRASTRUCTURE) for r in kube.requests)


def test_client_faults_are_one_line(kube: KubeAPI, certs: Certs, tmp_path: Path) -> None:
    wrong = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file, "nope")))
    with pytest.raises(
        ClusterError, match=r"^infrastructures.config.openshift.io/cluster: HTTP 401"
    ):
        wrong.infrastructure()
    kube.infrastructure = None
    right = ClusterAccess.connect(False, str(kube.kubeconfig(tmp_path, certs.ca_file)))
    with pytest.raises(ClusterError, match=r"cluster: HTTP 404 Not ?Found"):
        right.infrastructure()
    kube.close()
    with pytest.raises(ClusterError, match=rf"^leases in kube-system: cannot read from {kube.url}"):
        right.identity_leases()
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ClusterError, match=r"^kubeconfig .*bad-kubeconfig: "):
        ClusterAccess.connect(False, str(bad))


@pytest.mark.parametrize("content", [b":\n  - [", b"\xff\xfe not text"], ids=["yaml", "utf-8"])
def test_a_kubeconfig_that_is_no_yaml_is_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_bytes(content)
    with pytest.raises(ClusterError, match=r"^kubeconfig .*kubeconfig: ") as raised:
        ClusterAccess.connect(False, str(bad))
    assert "\n" not in str(raised.value)


async def test_the_daemon_names_the_node_of_a_shutting_down_apiserver(
    kube: KubeAPI, tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path
) -> None:
    kube.infrastructure = infrastructure("GCP", tls_server.url, tls_server.url)
    events = tmp_path / "events.jsonl"
    config = load_config(
        env={},
        flags={
            "kubeconfig": str(kube.kubeconfig(tmp_path, certs.ca_file)),
            "token_file": str(token_file),
            "protocols": "http2",
            "connections": "reused",
            "interval": "20ms",
            "listen": "127.0.0.1:0",
            "watches": "false",  # a toy server: no Lease API to watch
            "event_log": str(events),
            "duration": "1500ms",
        },
    )
    config, hosts = await discover(config)
    assert config.platform == "gcp"
    assert [t.lb for t in config.targets] == [LB.INTERNAL, LB.EXTERNAL]
    went_down = time.monotonic()
    tls_server.plan.header = lambda: format_shutdown_header(
        True, 70, time.monotonic() - went_down, HOST_ID
    )
    daemon = Daemon(config, registry=CollectorRegistry(), hosts=hosts, install_signals=False)
    assert await asyncio.wait_for(daemon.run(), 15) == 0
    (window,) = read_log(events).of(Window)
    assert (window.host, window.node, window.closed_by) == (HOST_ID, "master-0", "end")
    assert {s.lb for s in window.streams if s.late} == {LB.INTERNAL, LB.EXTERNAL}


async def test_a_prober_on_a_master_labels_its_own_apiservers_answers_same_node(
    shutting_down: dict[str, object], tmp_path: Path
) -> None:
    """The node comes from the config (the downward API), the apiservers' nodes from the
    Leases; both are in the event log, and every answer of master-0's apiserver is labelled."""
    events = tmp_path / "events.jsonl"
    config = load_config(
        env={"PROBER_NODE": "master-0"}, flags={**shutting_down, "duration": "600ms"}
    )
    config, hosts = await discover(config)
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, hosts=hosts, install_signals=False)
    assert await asyncio.wait_for(daemon.run(), 15) == 0
    labels = {"platform": "gcp", "lb": "internal-lb", "protocol": "http2", "connection": "reused"}
    requests = registry.get_sample_value("prober_requests_total", {**labels, "result": "success"})
    assert registry.get_sample_value("prober_same_node_requests_total", labels) == requests
    # Not the LB's: its window is no readiness violation of the internal LB.
    assert not registry.get_sample_value("prober_readiness_violation_seconds_count", labels)
    log = read_log(events, types=standard_kinds().record_types)
    (run,) = log.of(RunRecord)
    assert run.node == "master-0"
    told = {(r.host, r.node) for r in log.of(ApiserverNode)}
    assert told == {(HOST_ID, "master-0"), ("apiserver-other", "master-1")}
    samples = log.of(Sample)
    assert samples
    assert all(s.same_node for s in samples)
    # Its window is master-0's own, kept apart: the internal LB's shows nothing of it.
    (window,) = log.of(Window)
    assert (window.node, window.same_node) == ("master-0", True)


@pytest.fixture
def shutting_down(
    kube: KubeAPI, certs: Certs, tls_server: TLSServer, token_file: Path, tmp_path: Path
) -> dict[str, object]:
    """Flags of a daemon on one toy target whose apiserver shuts down: a window stays open,
    so the Leases are read every `identity_refresh_fast` (the slow reads are six renew
    intervals apart)."""
    went_down = time.monotonic()
    tls_server.plan.header = lambda: format_shutdown_header(
        True, 70, time.monotonic() - went_down, HOST_ID
    )
    return {
        "kubeconfig": str(kube.kubeconfig(tmp_path, certs.ca_file)),
        "platform": "gcp",
        "targets": [{"lb": "internal-lb", "url": tls_server.url}],
        "token_file": str(token_file),
        "protocols": "http2",
        "connections": "reused",
        "interval": "20ms",
        "listen": "127.0.0.1:0",
        "watches": "false",
        "event_log": str(tmp_path / "events.jsonl"),
        "time_scale": "0.009",  # Leases read every 30 ms while a window is open
    }


def lease_reads(kube: KubeAPI) -> int:
    return sum(r.startswith(LEASES) for r in kube.requests)


async def test_the_daemon_writes_each_new_holder_reading_fast_in_a_restart(
    kube: KubeAPI, shutting_down: dict[str, object]
) -> None:
    kube.leases[0]["spec"] = {"holderIdentity": f"{HOST_ID}_one", "renewTime": rfc3339(time.time())}
    flags = shutting_down
    config, hosts = await discover(load_config(env={}, flags=flags))
    daemon = Daemon(config, registry=CollectorRegistry(), hosts=hosts, install_signals=False)
    running = asyncio.create_task(daemon.run())
    read = lease_reads(kube)
    # Beyond the read at the start, only the fast cadence can read within the wait.
    await until(lambda: lease_reads(kube) >= read + 3, "reads while the window is open")
    kube.leases[0]["spec"] = {"holderIdentity": f"{HOST_ID}_two", "renewTime": rfc3339(time.time())}
    taken = lease_reads(kube)
    await until(lambda: lease_reads(kube) >= taken + 2, "a read sent after the takeover")
    daemon.stop()
    assert await asyncio.wait_for(running, 15) == 0
    log = read_log(Path(str(flags["event_log"])), types=standard_kinds().record_types)
    old, new = log.of(IdentitySeen)
    assert (old.host, old.node, old.holder, old.before_t, old.first) == (
        HOST_ID,
        "master-0",
        f"{HOST_ID}_one",
        None,
        False,
    )
    assert (new.host, new.node, new.holder, new.first) == (
        HOST_ID,
        "master-0",
        f"{HOST_ID}_two",
        True,
    )
    assert new.before_t is not None
    assert new.renew_t is not None
    assert old.t < new.before_t < new.renew_t < new.t


async def test_without_the_lease_permission_the_daemon_warns_once_and_measures(
    kube: KubeAPI, shutting_down: dict[str, object], log_output: io.StringIO
) -> None:
    kube.forbidden.add(LEASES)
    flags = shutting_down
    config, hosts = await discover(load_config(env={}, flags=flags))
    registry = CollectorRegistry()
    daemon = Daemon(config, registry=registry, hosts=hosts, install_signals=False)
    running = asyncio.create_task(daemon.run())
    await until(lambda: lease_reads(kube) >= 5, "refused reads at the fast cadence")
    daemon.stop()
    assert await asyncio.wait_for(running, 15) == 0
    warning = log_line(log_output, "apiserver_identity_unavailable")  # one of five reads
    assert warning["error"] == "leases in kube-system: HTTP 403 Forbidden"
    lines = [json.loads(line) for line in log_output.getvalue().splitlines()]
    assert not [line for line in lines if line["level"] == "error"]
    labels = {"platform": "gcp", "lb": "internal-lb", "protocol": "http2", "connection": "reused"}
    assert registry.get_sample_value("prober_requests_total", {**labels, "result": "success"})
    log = read_log(Path(str(flags["event_log"])), types=standard_kinds().record_types)
    assert log.of(Window)  # measured as ever
    assert not log.of(IdentitySeen)
    assert not log.of(ApiserverNode)
