"""The bodies a kube-apiserver sends, byte for byte where clients or tools look at them."""

from __future__ import annotations

import json
from typing import Any

# A cluster's objects are the same whichever apiserver serves them.
NAMESPACE_UID = "4b3a5c1e-6f0d-4a57-9d1b-2f4f5e0a7c11"
CREATED = "2024-01-01T00:00:00Z"
RESOURCE_VERSION = "193"
FLOWSCHEMA_UID = "1f0f5bd4-4a36-4b0c-8d9d-1c6f7a8b9e01"
PRIORITY_LEVEL_UID = "8a4f2d3e-9b7c-4e61-a5d2-3c4b5a6f7e02"

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

VERSION: dict[str, str] = {
    "major": "1",
    "minor": "29",
    "gitVersion": "v1.29.5+prober-lab",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-05-01T00:00:00Z",
    "goVersion": "go1.21.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# Readiness checks in registration order; `shutdown` is the one graceful termination fails.
READYZ_CHECKS = (
    "ping",
    "log",
    "etcd",
    "etcd-readiness",
    "informer-sync",
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/start-kube-apiserver-identity-lease-controller",
    "shutdown",
)
# The checks the post-start hooks add: failing until the hooks finish (`lifecycle.Startup`).
POST_START_HOOKS = frozenset(c for c in READYZ_CHECKS if c.startswith("poststarthook/"))
LIVEZ_CHECKS = tuple(
    c for c in READYZ_CHECKS if c not in ("etcd-readiness", "informer-sync", "shutdown")
)


def encode(obj: Any) -> bytes:
    """JSON as Go's encoder writes it: compact, with a trailing newline."""
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def namespace(name: str = "default") -> dict[str, Any]:
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": NAMESPACE_UID,
            "resourceVersion": RESOURCE_VERSION,
            "creationTimestamp": CREATED,
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def namespace_list() -> dict[str, Any]:
    return {
        "kind": "NamespaceList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": RESOURCE_VERSION},
        "items": [namespace()],
    }


def watch_event(kind: str, obj: dict[str, Any]) -> bytes:
    return encode({"type": kind, "object": obj})


def status(
    code: int, reason: str, message: str, details: bool | dict[str, Any] = False
) -> dict[str, Any]:
    """A metav1.Status failure, as the apiserver's responsewriters encode it; `details`:
    True for an empty `details`, or its fields."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not False:
        body["details"] = {} if details is True else details
    body["code"] = code
    return body


UNAUTHORIZED = status(401, "Unauthorized", "Unauthorized")
NOT_FOUND = status(404, "NotFound", "the server could not find the requested resource", True)
SHUTTING_DOWN = status(503, "ServiceUnavailable", "apiserver is shutting down")
RETRY_AFTER_TEXT = b"The apiserver is shutting down, please try again later.\n"


def health_body(
    endpoint: str, checks: tuple[str, ...], failing: frozenset[str], verbose: bool
) -> tuple[int, bytes]:
    """k8s.io/apiserver healthz: `ok` when healthy (or every check with `?verbose`); on a
    failure, every check and `<endpoint> check failed`, HTTP 500, reason withheld."""
    if not failing and not verbose:
        return 200, b"ok"
    lines = []
    for check in checks:
        if check in failing:
            lines.append(f"[-]{check} failed: reason withheld")
        else:
            lines.append(f"[+]{check} ok")
    if failing:
        return 500, ("\n".join(lines) + f"\n{endpoint} check failed\n").encode()
    return 200, ("\n".join(lines) + f"\n{endpoint} check passed\n").encode()


def single_check_body(check: str, failing: frozenset[str]) -> tuple[int, bytes]:
    """`/readyz/<check>`: `ok`, or HTTP 500 `internal server error: reason withheld`."""
    if check in failing:
        return 500, b"internal server error: reason withheld\n"
    return 200, b"ok"


# The bodies that never change, encoded once.
NAMESPACE_BODY = encode(namespace())
NAMESPACE_LIST_BODY = encode(namespace_list())
VERSION_BODY = encode(VERSION)
