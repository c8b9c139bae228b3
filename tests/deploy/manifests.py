"""Render the kustomize overlays and read what deploy/ produces.

`render` runs `kubectl kustomize` (the kubectl wheel in the venv); `restricted_violations`
holds a pod spec against the Pod Security Standards' restricted profile, naming each rule it
breaks; `held_rules` lists what the prober's ServiceAccount may do; `measuring` and `named`
pick a pod's containers, `flags` reads a container's `--name=value` arguments;
`SERVICE_MONITOR_SCHEMA` is the part of the Prometheus Operator's ServiceMonitor API these
manifests use, strictly (no schema of that CRD ships with kubernetes-validate).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("pod-network", "host-network", "localhost", "audit")
PROXY = "kube-rbac-proxy"  # the sidecar serving every overlay's /metrics over TLS
KUBECTL = Path(sys.executable).parent / "kubectl"
DASHBOARD = DEPLOY / "dashboards" / "prober.json"
# Grafana's variables, as a query of every value would see them.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m", "$__interval": "15s", "$__range": "3h",
    "$platform": ".*", "$lb": ".*", "$protocol": ".*", "$connection": ".*",
}  # fmt: skip

Obj = dict[str, Any]


def render(directory: Path) -> list[Obj]:
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [obj for obj in yaml.safe_load_all(done.stdout) if obj]


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def grafana_expanded(expr: str) -> str:
    for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    return expr


def find(objects: list[Obj], kind: str) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Obj], kind: str) -> Obj:
    (found,) = find(objects, kind)
    return found


def workload(objects: list[Obj]) -> Obj:
    (found,) = [obj for obj in objects if obj["kind"] in ("Deployment", "DaemonSet")]
    return found


def pod_spec(objects: list[Obj]) -> Obj:
    spec: Obj = workload(objects)["spec"]["template"]["spec"]
    return spec


def named(objects: list[Obj], name: str) -> Obj:
    """The workload's container of this name."""
    (found,) = [c for c in pod_spec(objects)["containers"] if c["name"] == name]
    return found


def measuring(objects: list[Obj]) -> Obj:
    """The container that does the overlay's work (`prober run`, `prober audit follow`):
    every one but the metrics proxy."""
    (found,) = [c for c in pod_spec(objects)["containers"] if c["name"] != PROXY]
    return found


def flags(container: Obj) -> dict[str, str]:
    """A container's `--name=value` arguments, by name."""
    split = (arg.partition("=") for arg in container.get("args", []))
    return {name: value for name, sep, value in split if sep}


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


ALLOWED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip
# The SELinux types the baseline (and so restricted) profile lets a pod ask for.
ALLOWED_SELINUX_TYPES = {
    "", "container_t", "container_init_t", "container_kvm_t", "container_engine_t",
}  # fmt: skip


def _selinux_violation(where: str, context: Obj) -> list[str]:
    options = context.get("seLinuxOptions", {})
    custom = options.get("type", "") not in ALLOWED_SELINUX_TYPES
    asked = custom or options.get("user") or options.get("role")
    return [f"{where}seLinuxOptions"] if asked else []


def restricted_violations(spec: Obj) -> list[str]:
    """The restricted-profile rules this pod spec breaks (Pod Security Standards, v1.25+)."""
    found = [f"{key}" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        found += [f"{kind} volume" for kind in sorted(kinds - ALLOWED_VOLUMES)]
    pod = spec.get("securityContext", {})
    found += _selinux_violation("", pod)
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("privileged"):
            found.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities not dropped")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
        if not context.get("runAsNonRoot", pod.get("runAsNonRoot", False)):
            found.append(f"{name}: runAsNonRoot")
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = context.get("seccompProfile", pod.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile")
        found += _selinux_violation(f"{name}: ", context)
        for port in container.get("ports", []):
            if port.get("hostPort"):
                found.append(f"{name}: hostPort")
    return found


def containers(objects: list[Obj]) -> Iterator[Obj]:
    for obj in objects:
        if obj["kind"] in ("Deployment", "DaemonSet"):
            yield from obj["spec"]["template"]["spec"]["containers"]


def held_rules(objects: list[Obj]) -> set[tuple[str, str, str, str, str]]:
    """(role namespace or *, api group, resource, resource names, verbs) the prober's
    ServiceAccount holds through the roles bound to it."""
    account = one(objects, "ServiceAccount")["metadata"]["name"]
    roles = {(o["kind"], o["metadata"]["name"]): o for o in find(objects, "Role")}
    roles |= {(o["kind"], o["metadata"]["name"]): o for o in find(objects, "ClusterRole")}
    held = set()
    for binding in [*find(objects, "RoleBinding"), *find(objects, "ClusterRoleBinding")]:
        if not any(s["name"] == account for s in binding["subjects"]):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        where = role["metadata"].get("namespace", "*")
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    names = ",".join(rule.get("resourceNames", []))
                    held.add((where, group, resource, names, ",".join(rule["verbs"])))
    return held


_DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_SECRET_KEY = {
    "type": "object",
    "required": ["name", "key"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "key": {"type": "string"}},
}
SERVICE_MONITOR_SCHEMA: Obj = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": _LABELS,
            },
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": _LABELS, "matchExpressions": {"type": "array"}},
                },
                "namespaceSelector": {"type": "object"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": _DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": _DURATION},
                            "honorLabels": {"type": "boolean"},
                            "bearerTokenFile": {"type": "string", "pattern": "^/"},
                            "authorization": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "type": {"type": "string"},
                                    "credentials": _SECRET_KEY,
                                },
                            },
                            "tlsConfig": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "caFile": {"type": "string", "pattern": "^/"},
                                    "serverName": {"type": "string"},
                                    "insecureSkipVerify": {"type": "boolean"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
