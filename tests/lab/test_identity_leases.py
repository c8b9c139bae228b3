"""The in-cluster T1 source on the lab's fake API: `k8s.discovery.HostDecoder` with the real
kubernetes client reads a fake apiserver's identity Lease on real etcd, the apiserver
restarts on the same host (a new holder takes the Lease over), and the decoder tells the new
holder with its first renewTime on the run's clock, between the reads that bracket it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from prober.config import load_config
from prober.core.truthlog import LeaseWritten, of_kind
from prober.k8s.cluster import ClusterAccess
from prober.k8s.discovery import HostDecoder
from prober.lab.infra.cluster import kubeconfig
from prober.lab.infra.etcd import LabEtcd
from tests.support.apiservers import TOKEN, LabCerts, Running, StartServer
from tests.support.waiting import until


def writes_by(running: Running) -> int:
    """How often the server wrote its identity Lease (its truth log)."""
    writes = of_kind(running.server.truth.records or [], LeaseWritten)
    return sum(1 for r in writes if r.holder == running.server.holder)


@pytest.mark.parametrize(
    "case",  # (renew interval, writes by the new holder before the read, first)
    [
        # The renew interval outlasts the restart: the read before comes less than one ahead.
        (60.0, 1, True),
        # The new holder renewed once before the read: that renewal is not its first write.
        (0.3, 2, False),
    ],
    ids=["first-write", "renewed-since"],
)
async def test_a_restart_on_the_same_host_is_a_new_holder_with_its_first_write(
    start_server: StartServer,
    etcd: LabEtcd,
    certs: LabCerts,
    tmp_path: Path,
    case: tuple[float, int, bool],
) -> None:
    renew, renewals, first = case
    start = time.monotonic()

    def now() -> float:
        return round(time.monotonic() - start, 6)

    options = {"etcd_servers": etcd.endpoint, "identity_renew_interval": renew}
    before = await start_server(**options)
    assert before.server.storage is not None
    await before.server.storage.identity_written.wait()
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(f"https://127.0.0.1:{before.ports.port}", certs.ca, TOKEN))
    decoder = HostDecoder(ClusterAccess.connect(False, str(path)), renew_interval=renew)
    decoder.start_run(now, time.time)

    (old,) = await decoder.refresh()
    assert (old.host, old.node, old.holder) == (
        before.server.apiserver_id,
        "master-0",
        before.server.holder,
    )
    assert (old.before_t, old.first) == (None, False)  # the run's first read
    assert old.renew_t is not None
    assert 0 <= old.renew_t <= old.t

    await before.server.kill()
    after = await start_server(port=before.ports.port, **options)  # same host and port
    await until(lambda: writes_by(after) >= renewals, f"{renewals} writes by the new holder")
    (new,) = await decoder.refresh()
    assert after.server.holder != before.server.holder
    assert (new.host, new.node, new.holder) == (
        before.server.apiserver_id,
        "master-0",
        after.server.holder,
    )
    assert new.before_t is not None
    assert new.renew_t is not None
    assert new.before_t < old.t < new.renew_t < new.t  # between the reads that bracket it
    assert new.first is first
    assert (new.renew_t - new.before_t < renew) is first
    assert await decoder.refresh() == []  # once per holder


@pytest.mark.parametrize("scale", [0.01, 0.05, 0.1, 1.0])
def test_the_lab_daemon_reads_faster_than_its_apiservers_renew(scale: float) -> None:
    """At every time scale the lab runs, the daemon's fast reads are a third of the renew
    interval or less, and the config they make loads."""
    renew = 10.0 * scale
    config = load_config(env={}, flags={"time_scale": scale, "targets": TARGET})
    assert config.identity_renew_interval == pytest.approx(renew)
    assert config.identity_refresh_fast <= renew / 3 + 0.0005  # rounded to the millisecond
    assert config.identity_refresh_fast <= 1.0


TARGET = [{"lb": "internal-lb", "url": "https://127.0.0.1:6443"}]
