"""The legacy discovery documents (`/api`, `/apis`, a group, a group version): what client-go's
discovery client reads to map `leases` to `coordination.k8s.io/v1`. A client asking for
aggregated discovery (`as=APIGroupDiscoveryList`) gets these, as from a server that has none,
and falls back to reading them."""

from __future__ import annotations

from typing import Any

from prober.fakeapiserver.resources import encode

COORDINATION = "coordination.k8s.io"


def _resource(
    name: str, kind: str, namespaced: bool, verbs: list[str], short: list[str] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "singularName": kind.lower(),
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    }
    if short:
        entry["shortNames"] = short
    return entry


def _group(name: str) -> dict[str, Any]:
    version = {"groupVersion": f"{name}/v1", "version": "v1"}
    return {"name": name, "versions": [version], "preferredVersion": version}


_LEASE_VERBS = ["create", "delete", "get", "list", "update", "watch"]

DOCUMENTS: dict[str, dict[str, Any]] = {
    "/api": {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    },
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            _resource("namespaces", "Namespace", False, ["get", "list", "watch"], ["ns"])
        ],
    },
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(COORDINATION)]},
    f"/apis/{COORDINATION}": {"kind": "APIGroup", "apiVersion": "v1", **_group(COORDINATION)},
    f"/apis/{COORDINATION}/v1": {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{COORDINATION}/v1",
        "resources": [_resource("leases", "Lease", True, _LEASE_VERBS)],
    },
}
BODIES = {path: encode(document) for path, document in DOCUMENTS.items()}


def body(path: str) -> bytes | None:
    return BODIES.get(path.rstrip("/") or "/")
