"""The background loops a kube-apiserver runs against its storage: etcd's compactor and the
identity Lease (`kube-system/apiserver-<hash>`, a new holder identity per process start).

Both wait on the injected clock; a failed round is logged and tried again next interval, as
upstream's controllers do: losing etcd for a while must not stop the server.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from prober.common.clock import Clock
from prober.core.models import rfc3339
from prober.fakeapiserver.etcd import EtcdClient, EtcdError, b64
from prober.fakeapiserver.store import LEASES, Store, StoreError
from prober.fakeapiserver.watchcache import COMPACT_KEY

log = logging.getLogger("prober.fakeapiserver")

IDENTITY_NAMESPACE = "kube-system"
IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
IDENTITY_LEASE_DURATION = 3600  # seconds, upstream's identity lease duration


def micro_time(wall: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return rfc3339(wall)


class Compactor:
    """storage/etcd3/compact.go: every interval each apiserver tries to move `compact_rev_key`
    on by one version; the one that wins compacts to the revision it saw one interval ago."""

    def __init__(self, etcd: EtcdClient, interval: float, clock: Clock) -> None:
        self.etcd, self.interval, self.clock = etcd, interval, clock
        self._version, self._revision = 0, 0

    async def run(self) -> None:
        while True:
            await self.clock.sleep(self.interval)
            try:
                await self.round()
            except EtcdError as error:
                log.warning("compactor: %s", error)

    async def round(self) -> int | None:
        """One try; the revision compacted, if this server did it."""
        compare = [
            {"key": b64(COMPACT_KEY), "target": "VERSION", "result": "EQUAL",
             "version": str(self._version)},
        ]  # fmt: skip
        put = {"request_put": {"key": b64(COMPACT_KEY), "value": b64(str(self._revision).encode())}}
        get = {"request_range": {"key": b64(COMPACT_KEY)}}
        answer = await self.etcd.txn(compare, [put], [get])
        current = int(answer.get("header", {}).get("revision", 0))
        if not answer.get("succeeded"):
            kvs = answer["responses"][0]["response_range"].get("kvs", [])
            self._version = int(kvs[0].get("version", 0)) if kvs else 0
            self._revision = current
            return None
        self._version += 1
        compacted, self._revision = self._revision, current
        if compacted == 0:
            return None  # upstream does not compact on its first round
        await self.etcd.compact(compacted)
        return compacted


class IdentityLease:
    """The server's identity Lease, created or taken over at start and renewed."""

    def __init__(
        self,
        store: Store,
        apiserver_id: str,
        *,
        hostname: str,
        renew_interval: float,
        clock: Clock,
        on_write: Callable[[dict[str, Any]], None],
        holder: str | None = None,  # None: a new one
    ) -> None:
        self.store, self.name, self.hostname = store, apiserver_id, hostname
        self.holder = holder or f"{apiserver_id}_{uuid.uuid4()}"
        self.renew_interval, self.clock = renew_interval, clock
        self._on_write = on_write
        self._version: str | None = None  # the Lease's resourceVersion as last written or read
        self._stopped = False
        self.acquired = micro_time(clock.wall())

    def lease(self) -> dict[str, Any]:
        now = micro_time(self.clock.wall())
        return {
            "kind": "Lease",
            "apiVersion": LEASES.api_version,
            "metadata": {
                "name": self.name,
                "namespace": IDENTITY_NAMESPACE,
                "labels": {
                    IDENTITY_LABEL: "kube-apiserver",
                    "kubernetes.io/hostname": self.hostname,
                },
            },
            "spec": {
                "holderIdentity": self.holder,
                "leaseDurationSeconds": IDENTITY_LEASE_DURATION,
                "acquireTime": self.acquired,
                "renewTime": now,
            },
        }

    async def run(self) -> None:
        while not self._stopped:
            try:
                await self.renew()
            except StoreError as error:
                log.warning("identity lease: %s", error.message)
            await self.clock.sleep(self.renew_interval)

    async def stop(self) -> None:
        """Upstream's pre-shutdown hook (`stop-kube-apiserver-identity-lease-controller`):
        no renewal more, and the Lease deleted, at the start of graceful termination."""
        self._stopped = True
        try:
            await self.store.delete(LEASES, IDENTITY_NAMESPACE, self.name)
        except StoreError as error:
            if error.code != 404:
                log.warning("identity lease: %s", error.message)

    async def renew(self) -> dict[str, Any]:
        """As upstream's lease controller: an update over the version it last wrote or read
        (a Lease takes no unconditional update); with none, or a stale one, the Lease as
        it is read now, or created where there is none."""
        lease = self.lease()
        if self._version is None:
            try:
                self._version = str(await self._current_version())
            except StoreError as error:
                if error.code != 404 or self._stopped:  # deleted by `stop`: not again
                    raise
                return self._written(await self.store.create(LEASES, IDENTITY_NAMESPACE, lease))
        lease["metadata"]["resourceVersion"] = self._version
        try:
            written = await self.store.update(LEASES, IDENTITY_NAMESPACE, self.name, lease)
        except StoreError:
            self._version = None  # read again on the next renewal
            raise
        return self._written(written)

    async def _current_version(self) -> str:
        current = await self.store.get(LEASES, IDENTITY_NAMESPACE, self.name)
        return str(current["metadata"]["resourceVersion"])

    def _written(self, written: dict[str, Any]) -> dict[str, Any]:
        self._version = str(written["metadata"]["resourceVersion"])
        self._on_write(written)
        return written
