"""Objects in etcd as kube-apiserver's generic registry keeps them: one key per object under
`/registry/<resource>/<namespace>/<name>`, the value the object's JSON without its
resourceVersion, which is the key's `mod_revision` when read back. Creates and updates are
etcd transactions, so two apiservers writing the same object see optimistic concurrency (409)
exactly as kube-apiserver's clients do.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prober.fakeapiserver.etcd import EtcdClient, EtcdError, KeyValue, b64, key_value, prefix_end

PREFIX = b"/registry/"


@dataclass(frozen=True, slots=True)
class Kind:
    """What the registry needs of a resource to build its keys and messages."""

    resource: str  # plural, as in the URL: "leases"
    group: str  # "" for the core group
    kind: str  # "Lease"
    api_version: str  # "coordination.k8s.io/v1"
    # A PUT without a resourceVersion overwrites (upstream's AllowUnconditionalUpdate);
    # Leases refuse it (k8s.io/kubernetes pkg/registry/coordination/lease/strategy.go).
    unconditional_update: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    def prefix(self, namespace: str | None = None) -> bytes:
        tail = f"{namespace}/" if namespace else ""
        return PREFIX + f"{self.resource}/{tail}".encode()

    def key(self, namespace: str, name: str) -> bytes:
        return self.prefix(namespace) + name.encode()


LEASES = Kind("leases", "coordination.k8s.io", "Lease", "coordination.k8s.io/v1")


class StoreError(Exception):
    """A failure the API answers with a Status: its code, reason and message."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def not_found(kind: Kind, name: str) -> StoreError:
    details = {"name": name, "group": kind.group, "kind": kind.resource}
    return StoreError(404, "NotFound", f'{kind.qualified} "{name}" not found', details)


def conflict(kind: Kind, name: str) -> StoreError:
    message = (
        f'Operation cannot be fulfilled on {kind.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    details = {"name": name, "group": kind.group, "kind": kind.resource}
    return StoreError(409, "Conflict", message, details)


def no_version(kind: Kind, name: str) -> StoreError:
    """Upstream's answer to a PUT without a resourceVersion where that is no overwrite."""
    why = "Invalid value: 0: must be specified for an update"
    details = {
        "name": name, "group": kind.group, "kind": kind.resource,
        "causes": [{"reason": "FieldValueInvalid", "message": why,
                    "field": "metadata.resourceVersion"}],
    }  # fmt: skip
    message = f'{kind.qualified} "{name}" is invalid: metadata.resourceVersion: {why}'
    return StoreError(422, "Invalid", message, details)


def already_exists(kind: Kind, name: str) -> StoreError:
    details = {"name": name, "group": kind.group, "kind": kind.resource}
    return StoreError(409, "AlreadyExists", f'{kind.qualified} "{name}" already exists', details)


def unavailable(error: EtcdError) -> StoreError:
    return StoreError(500, "InternalError", f"Internal error occurred: {error}", {})


def decode(kv: KeyValue) -> dict[str, Any]:
    """The stored object, with its resourceVersion: etcd's revision of the last write."""
    obj: dict[str, Any] = json.loads(kv.value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
    return obj


def _encode(obj: dict[str, Any]) -> bytes:
    metadata = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return json.dumps({**obj, "metadata": metadata}, separators=(",", ":")).encode()


def _put(key: bytes, value: bytes) -> dict[str, Any]:
    return {"request_put": {"key": b64(key), "value": b64(value)}}


class Store:
    def __init__(self, etcd: EtcdClient, timestamp: Callable[[], str]) -> None:
        self.etcd = etcd
        self._timestamp = timestamp  # RFC 3339 "now", for creationTimestamp

    async def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        kv = await self._get(kind.key(namespace, name))
        if kv is None:
            raise not_found(kind, name)
        return decode(kv)

    async def items(self, kind: Kind, namespace: str | None) -> tuple[list[dict[str, Any]], int]:
        """Every object of the kind (in one namespace, or all) and the revision of the read."""
        prefix = kind.prefix(namespace)
        try:
            answer = await self.etcd.range(prefix, prefix_end(prefix))
        except EtcdError as error:
            raise unavailable(error) from None
        items = [decode(key_value(raw)) for raw in answer.get("kvs", [])]
        return items, int(answer.get("header", {}).get("revision", 0))

    async def create(self, kind: Kind, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        name = str(metadata.get("name", ""))
        metadata.update(
            namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=self._timestamp()
        )
        key = kind.key(namespace, name)
        compare = [{"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}]
        answer = await self._txn(compare, [_put(key, _encode(obj))], [])
        if not answer.get("succeeded"):
            raise already_exists(kind, name)
        metadata["resourceVersion"] = answer["header"]["revision"]
        return obj

    async def update(
        self, kind: Kind, namespace: str, name: str, obj: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT: with a resourceVersion only over that revision (409 otherwise); without one
        over whatever is there where the kind allows it, else 422, as upstream's registry."""
        key = kind.key(namespace, name)
        wanted = str(obj.get("metadata", {}).get("resourceVersion", "") or "")
        while True:
            current = await self._get(key)
            if current is None:
                raise not_found(kind, name)
            if not wanted and not kind.unconditional_update:
                raise no_version(kind, name)
            if wanted and wanted != str(current.mod_revision):
                raise conflict(kind, name)
            old = decode(current)["metadata"]
            metadata = obj.setdefault("metadata", {})
            metadata.update(
                name=name,
                namespace=namespace,
                uid=old.get("uid", ""),
                creationTimestamp=old.get("creationTimestamp", ""),
            )
            revision = str(current.mod_revision)
            compare = [
                {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": revision}
            ]
            answer = await self._txn(compare, [_put(key, _encode(obj))], [])
            if answer.get("succeeded"):
                metadata["resourceVersion"] = answer["header"]["revision"]
                return obj
            if wanted:
                raise conflict(kind, name)

    async def delete(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        key = kind.key(namespace, name)
        try:
            answer = await self.etcd.call("/v3/kv/deleterange", {"key": b64(key), "prev_kv": True})
        except EtcdError as error:
            raise unavailable(error) from None
        previous = answer.get("prev_kvs", [])
        if not previous:
            raise not_found(kind, name)
        return decode(key_value(previous[0]))

    async def _get(self, key: bytes) -> KeyValue | None:
        try:
            answer = await self.etcd.range(key)
        except EtcdError as error:
            raise unavailable(error) from None
        kvs = answer.get("kvs", [])
        return key_value(kvs[0]) if kvs else None

    async def _txn(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]],
        failure: list[dict[str, Any]],
    ) -> dict[str, Any]:  # fmt: skip
        try:
            return await self.etcd.txn(compare, success, failure)
        except EtcdError as error:
            raise unavailable(error) from None
