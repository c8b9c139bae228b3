"""What the apiserver's request-info resolver and authenticator would say about a request:
its verb and object for audit and metrics, whether it is long-running, who sent it."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from prober.fakeapiserver.audit import ObjectRef
from prober.fakeapiserver.options import ANONYMOUS, User

HEALTH_PATHS = ("/readyz", "/livez", "/healthz")
RETRY_AFTER_EXEMPT_PREFIXES = ("/metrics", *HEALTH_PATHS)
PUBLIC_PATHS = ("/readyz", "/livez", "/healthz", "/version")
SELF_USER_AGENT = "kube-apiserver/"
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    verb: str  # audit verb: get, list, watch, create... or the lowercased method
    resource: str  # "" for non-resource URLs
    scope: str  # metrics label: resource, namespace, cluster or ""
    object_ref: ObjectRef | None
    api_version: str = ""  # "v1", "coordination.k8s.io/v1"

    @property
    def is_watch(self) -> bool:
        return self.verb == "watch"


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Resolve `/api/v1/...` and `/apis/<group>/<version>/...` paths as k8s.io/apiserver's
    RequestInfoFactory does."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[:2] == ["api", "v1"]:
        group, version, parts = "", "v1", parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, parts = parts[1], parts[2], parts[3:]
    else:
        return RequestInfo(method.lower(), "", "", None)
    watch_path = parts[0] == "watch"
    if watch_path:
        parts = parts[1:]
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        namespace, parts = parts[1], parts[2:]
    if not parts:
        return RequestInfo(method.lower(), "", "", None)
    resource = parts[0]
    name = parts[1] if len(parts) > 1 else None
    if method in ("GET", "HEAD"):
        watching = watch_path or query.get("watch", "").lower() in ("true", "1")
        verb = "watch" if watching else ("get" if name else "list")
    else:
        verb = _VERBS.get(method, method.lower())
    api_version = f"{group}/{version}" if group else version
    ref = ObjectRef(resource, name, namespace, api_version=version, api_group=group)
    if namespace and not name and resource != "namespaces":
        scope = "namespace"
    else:
        scope = "resource" if name else "cluster"
    return RequestInfo(verb, resource, scope, ref, api_version)


def exempt_from_retry_after(path: str, user_agent: str) -> bool:
    """Requests `WithRetryAfter` and `WithWaitGroup` let through during shutdown."""
    return user_agent.startswith(SELF_USER_AGENT) or path.startswith(RETRY_AFTER_EXEMPT_PREFIXES)


def health_base(path: str) -> str | None:
    """`/readyz` for `/readyz` and `/readyz/<check>`, and so on; None for other paths."""
    return next((p for p in HEALTH_PATHS if path == p or path.startswith(p + "/")), None)


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(tuple(p + "/" for p in PUBLIC_PATHS))


@dataclass(frozen=True, slots=True)
class AuthResult:
    user: User | None  # None: authentication failed
    message: str = ""


def authenticate(
    tokens: Mapping[str, User] | None, authorization: str | None, path: str
) -> AuthResult:
    """Bearer tokens from the token file; anonymous only on the public health/version paths."""
    if tokens is None:
        return AuthResult(ANONYMOUS)
    if authorization:
        scheme, _, token = authorization.partition(" ")
        user = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            return AuthResult(None, "Authentication failed, attempted: bearer")
        return AuthResult(user)
    if is_public(path):
        return AuthResult(ANONYMOUS)
    return AuthResult(None, "Authentication failed, no credentials provided")


def source_ips(forwarded_for: str | None, real_ip: str | None, remote: str) -> list[str]:
    """X-Forwarded-For entries, then X-Real-Ip, then the peer, as utilnet.SourceIPs does."""
    ips: list[str] = []
    for candidate in [*(forwarded_for or "").split(","), real_ip or ""]:
        text = candidate.strip()
        if text and _is_ip(text) and text not in ips:
            ips.append(text)
    if remote not in ips:
        ips.append(remote)
    return ips


def is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
