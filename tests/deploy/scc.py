"""OpenShift's SecurityContextConstraints admission, for the fields these pods touch.

`SCCS` holds the built-in SCCs the tests know, read from tests/deploy/scc/ (each file names
only what `scc_violations` checks). `scc_violations` holds a pod spec against one of them and
names every rule admission would refuse it on. What admission would assign rather than refuse
(the namespace's UID range and SELinux level, a seccomp profile or `allowPrivilegeEscalation:
false` where the pod says nothing, required capability drops) is not a violation. The UID
range and SELinux level of a namespace are only known in a cluster: a pod that fixes either
under a `MustRun...` strategy is taken as refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml

from tests.deploy.manifests import Obj

SCC_DIR = Path(__file__).parent / "scc"
SCCS: dict[str, Obj] = {
    scc["name"]: scc
    for scc in (yaml.safe_load(path.read_text()) for path in sorted(SCC_DIR.glob("*.yaml")))
}
REQUIRED_SCC = "openshift.io/required-scc"
# SCC names of seccomp profiles, from the securityContext's field.
SECCOMP_NAMES = {"RuntimeDefault": "runtime/default", "Unconfined": "unconfined"}


def _seccomp(context: Obj) -> str | None:
    profile = context.get("seccompProfile")
    if not profile:
        return None
    if profile["type"] == "Localhost":
        return f"localhost/{profile.get('localhostProfile', '')}"
    return SECCOMP_NAMES[profile["type"]]


def _allows(allowed: list[str], value: str) -> bool:
    return "*" in allowed or value in allowed


def _volume_kinds(spec: Obj) -> Iterator[str]:
    for volume in spec.get("volumes", []):
        yield from sorted(set(volume) - {"name"})
    # The ServiceAccount admission plugin, which runs before SCC admission, adds a projected
    # volume for the token unless the pod opts out.
    if spec.get("automountServiceAccountToken") is not False:
        yield "projected"


def _ids(where: str, context: Obj, strategies: Obj) -> list[str]:
    """The UID, SELinux and group rules for one securityContext (the pod's or a container's)."""
    found = []
    user = context.get("runAsUser")
    if strategies["user"] == "MustRunAsRange" and user is not None:
        found.append(f"{where}: runAsUser {user} outside the namespace's range")
    if strategies["user"] == "MustRunAsNonRoot":
        if user == 0:
            found.append(f"{where}: runAsUser 0")
        if context.get("runAsNonRoot") is False:
            found.append(f"{where}: runAsNonRoot false")
    selinux = {k: v for k, v in context.get("seLinuxOptions", {}).items() if v}
    if strategies["seLinux"] == "MustRunAs" and selinux:
        asked = ", ".join(f"{k} {v}" for k, v in sorted(selinux.items()))
        found.append(f"{where}: seLinuxOptions {asked} instead of the namespace's")
    if strategies["fsGroup"] == "MustRunAs" and context.get("fsGroup") is not None:
        found.append(f"{where}: fsGroup outside the namespace's range")
    if strategies["supplementalGroups"] == "MustRunAs" and context.get("supplementalGroups"):
        found.append(f"{where}: supplementalGroups outside the namespace's range")
    return found


def _container(container: Obj, host_network: bool, scc: Obj) -> list[str]:
    name = container["name"]
    context = container.get("securityContext", {})
    found = []
    if context.get("privileged") and not scc["privileged"]:
        found.append(f"{name}: privileged")
    if context.get("allowPrivilegeEscalation") and not scc["privilegeEscalation"]:
        found.append(f"{name}: allowPrivilegeEscalation")
    for capability in context.get("capabilities", {}).get("add", []):
        if not _allows(scc["addCapabilities"], capability):
            found.append(f"{name}: capability {capability} added")
    if scc["mustReadOnlyRoot"] and context.get("readOnlyRootFilesystem") is False:
        found.append(f"{name}: writable root filesystem")
    seccomp = _seccomp(context)
    if seccomp and not _allows(scc["seccomp"], seccomp):
        found.append(f"{name}: seccomp {seccomp}")
    for port in container.get("ports", []):
        # On the host network a container port is a host port (the API defaults hostPort).
        if (port.get("hostPort") or host_network) and not scc["host"]["ports"]:
            found.append(f"{name}: host port {port.get('hostPort', port['containerPort'])}")
    return found + _ids(name, context, scc["ids"])


def scc_violations(spec: Obj, scc: Obj) -> list[str]:
    """Why SCC admission would refuse this pod spec under `scc`; empty if it admits it."""
    host = scc["host"]
    found = [
        key
        for key, allowed in (("hostNetwork", "network"), ("hostPID", "pid"), ("hostIPC", "ipc"))
        if spec.get(key) and not host[allowed]
    ]
    for kind in _volume_kinds(spec):
        if not _allows(scc["volumes"], kind) or (kind == "hostPath" and not host["paths"]):
            found.append(f"{kind} volume")
    pod = spec.get("securityContext", {})
    seccomp = _seccomp(pod)
    if seccomp and not _allows(scc["seccomp"], seccomp):
        found.append(f"pod: seccomp {seccomp}")
    found += _ids("pod", pod, scc["ids"])
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        found += _container(container, bool(spec.get("hostNetwork")), scc)
    return found


def sccs_used(rules: set[tuple[str, str, str, str, str]]) -> set[str]:
    """The SCCs a ServiceAccount may `use`, from `held_rules`; plus those every user may."""
    used = {name for name, scc in SCCS.items() if scc.get("everyone")}
    for _, group, resource, names, verbs in rules:
        scc = (group, resource) == ("security.openshift.io", "securitycontextconstraints")
        if scc and "use" in verbs.split(","):
            used |= set(names.split(",")) if names else set(SCCS)  # no names: every SCC
    return used
