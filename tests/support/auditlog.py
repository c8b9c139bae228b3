"""Real-shaped kube-apiserver audit events and the files kube-apiserver writes them to."""

from __future__ import annotations

import gzip
import itertools
import json
import os
from pathlib import Path
from typing import Any

from prober.core.models import rfc3339

T0 = 1_780_000_000.0  # an epoch second in 2026, the base of every timestamp here
_ids = itertools.count(1)

KUBELET = "kubelet/v1.29.0 (linux/amd64) kubernetes/3f7a50f"
OPERATOR = "cluster-kube-apiserver-operator/v0.0.0 (linux/amd64) kubernetes/$Format"
PROBER = "prober/0.1.0 kube-api-http2-internal-lb-new-connections"


def audit_id() -> str:
    return f"5c1e0f4a-0000-4000-8000-{next(_ids):012d}"


def event(
    t: float = 0.0,
    *,
    api_version: str = "audit.k8s.io/v1",
    verb: str = "get",
    uri: str = "/api/v1/namespaces/default",
    resource: str | None = "namespaces",
    subresource: str | None = None,
    user: str | None = "system:node:master-1",
    user_agent: str | None = KUBELET,
    source_ips: list[str] | None = None,
    stage: str = "ResponseComplete",
    annotations: dict[str, str] | None = None,
    aid: str | None = None,
    code: int = 200,
) -> dict[str, Any]:
    """One audit Event as kube-apiserver writes it at level Metadata, received at T0 + t."""
    body: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": api_version,
        "level": "Metadata",
        "auditID": aid or audit_id(),
        "stage": stage,
        "requestURI": uri,
        "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]} if user else {},
        "sourceIPs": source_ips if source_ips is not None else ["10.0.0.5"],
        "userAgent": user_agent,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": rfc3339(T0 + t),
        "stageTimestamp": rfc3339(T0 + t + 0.004),
        "annotations": {
            "authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": "",
            **(annotations or {}),
        },
    }
    if resource is not None:
        ref = {"resource": resource, "name": "default", "apiVersion": "v1"}
        if subresource:
            ref["subresource"] = subresource
        body["objectRef"] = ref
    if user_agent is None:
        del body["userAgent"]
    if api_version == "audit.k8s.io/v1beta1":
        body["timestamp"] = body["stageTimestamp"]
        body["metadata"] = {"creationTimestamp": body["stageTimestamp"]}
    return body


def graceful(peer: str = "10.0.0.5", loopback: bool = False) -> dict[str, str]:
    """The OpenShift late-connection annotation."""
    return {"openshift.io/during-graceful": f"loopback={str(loopback).lower()},{peer},readyz=false"}


def shutdown(elapsed: str = "60s", threshold: int = 85, late: bool | None = True) -> dict[str, str]:
    """The older `apiserver.k8s.io/shutdown` annotation; `late=None` leaves the field out."""
    late_field = "" if late is None else f" late={str(late).lower()}"
    value = f"elapsed={elapsed} threshold={threshold}%{late_field} self=false loopback=false"
    return {"apiserver.k8s.io/shutdown": value}


def line(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def write(path: Path, *items: dict[str, Any] | bytes, compress: bool = False) -> Path:
    """Write events (or raw bytes, as they are) to `path`, gzipped if `compress`."""
    data = b"".join(i if isinstance(i, bytes) else line(i) for i in items)
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def append(path: Path, *items: dict[str, Any] | bytes) -> None:
    with path.open("ab") as handle:
        for item in items:
            handle.write(item if isinstance(item, bytes) else line(item))


def rotate(directory: Path, stamp: str, *, compress: bool = False, prefix: str = "") -> Path:
    """What lumberjack does: rename the current file, start a new empty one, maybe gzip the
    rotation (write the .gz, then remove the plain file)."""
    current = directory / f"{prefix}audit.log"
    rotated = directory / f"{prefix}audit-{stamp}.log"
    os.rename(current, rotated)
    current.write_bytes(b"")
    if compress:
        gz = rotated.with_name(rotated.name + ".gz")
        gz.write_bytes(gzip.compress(rotated.read_bytes()))
        rotated.unlink()
        return gz
    return rotated
