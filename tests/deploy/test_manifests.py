"""The kustomize overlays, rendered by `kubectl kustomize` and held against the Kubernetes
schemas offline, the restricted pod security profile, least-privilege RBAC, and the prober's
own command line and configuration loader."""

from __future__ import annotations

import argparse
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema  # kubernetes-validate's own validator
import kubernetes_validate
import pytest

from prober.cli import build_parser
from prober.common.values import host_port
from prober.config import Config, load_config
from tests.deploy.manifests import (
    DEPLOY,
    OVERLAYS,
    ROOT,
    SERVICE_MONITOR_SCHEMA,
    Obj,
    containers,
    find,
    held_rules,
    one,
    pod_spec,
    render,
    restricted_violations,
    selects,
    workload,
)

KUBERNETES_VERSIONS = ("1.29", "1.33")  # OpenShift 4.16 .. 4.20
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What a pod's environment holds at run time, for expanding $(VAR) in container args.
POD_ENV = {"KUBERNETES_SERVICE_HOST": "172.30.0.1", "KUBERNETES_SERVICE_PORT": "443"}
CONFIG_MAPS = {("prober-cluster", "api-url"): "https://api.ci.example.test:6443"}
FIELDS = {"spec.nodeName": "master-0", "status.podIP": "10.128.0.7"}


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_against_the_kubernetes_schemas(
    rendered: dict[str, list[Obj]], overlay: str, version: str
) -> None:
    checked = Counter()
    for obj in rendered[overlay]:
        if obj["kind"] == "ServiceMonitor":
            jsonschema.validate(obj, SERVICE_MONITOR_SCHEMA)
        else:
            kubernetes_validate.validate(obj, version, strict=True)
        checked[obj["kind"]] += 1
    assert checked["ServiceMonitor"] == 1
    assert checked["Deployment"] + checked["DaemonSet"] == 1


def test_the_validators_do_reject(rendered: dict[str, list[Obj]]) -> None:
    deployment = workload(rendered["pod-network"])
    broken = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)
    monitor = one(rendered["pod-network"], "ServiceMonitor")
    endpoint = {**monitor["spec"]["endpoints"][0], "interval": "15 seconds"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**monitor, "spec": {**monitor["spec"], "endpoints": [endpoint]}},
            SERVICE_MONITOR_SCHEMA,
        )


EXPECTED_VIOLATIONS = {
    "pod-network": [],
    "host-network": ["hostNetwork"],
    "localhost": ["hostNetwork"],
    "audit": [
        "hostPath volume", "audit: runAsNonRoot", "audit: runAsUser 0", "audit: seLinuxOptions"
    ],
}  # fmt: skip


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_are_restricted_but_for_what_their_job_needs(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    spec = pod_spec(rendered[overlay])
    assert restricted_violations(spec) == EXPECTED_VIOLATIONS[overlay]
    # One namespace for all overlays: enforced at the level the most exposed one needs,
    # warned and audited at restricted, so each exception is still reported.
    labels = one(render(DEPLOY / "namespace"), "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert context["allowPrivilegeEscalation"] is False
    assert spec.get("securityContext", {})["seccompProfile"] == {"type": "RuntimeDefault"}


def test_the_restricted_check_names_each_rule() -> None:
    spec: dict[str, Any] = {
        "hostNetwork": True,
        "volumes": [{"name": "logs", "hostPath": {"path": "/var/log"}}],
        "securityContext": {"seLinuxOptions": {"type": "spc_t"}},
        "containers": [{"name": "c", "securityContext": {"privileged": True}}],
    }
    assert restricted_violations(spec) == [
        "hostNetwork", "hostPath volume", "seLinuxOptions", "c: privileged",
        "c: allowPrivilegeEscalation", "c: capabilities not dropped", "c: runAsNonRoot",
        "c: seccompProfile",
    ]  # fmt: skip


DAEMON_RULES = {
    ("*", "", "namespaces", "default", "get"),
    ("*", "config.openshift.io", "infrastructures", "cluster", "get"),
    ("kube-system", "coordination.k8s.io", "leases", "", "get,list,watch"),
}


def _scc(name: str) -> tuple[str, str, str, str, str]:
    return ("prober", "security.openshift.io", "securitycontextconstraints", name, "use")


@pytest.mark.parametrize(
    ("overlay", "rules"),
    [
        ("pod-network", DAEMON_RULES),
        ("host-network", DAEMON_RULES | {_scc("hostnetwork-v2")}),
        ("localhost", DAEMON_RULES | {_scc("hostnetwork-v2")}),
        ("audit", {_scc("privileged")}),
    ],
)
def test_rbac_is_least_privilege(
    rendered: dict[str, list[Obj]], overlay: str, rules: set[tuple[str, ...]]
) -> None:
    assert held_rules(rendered[overlay]) == rules
    spec = pod_spec(rendered[overlay])
    assert (
        spec["serviceAccountName"] == one(rendered[overlay], "ServiceAccount")["metadata"]["name"]
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_monitor_and_policy_reach_this_overlays_pods_only(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    objects = rendered[overlay]
    service = one(objects, "Service")
    monitor = one(objects, "ServiceMonitor")
    policy = one(objects, "NetworkPolicy")
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    for other, other_objects in rendered.items():
        labels = workload(other_objects)["spec"]["template"]["metadata"]["labels"]
        mine = other == overlay
        assert selects(service["spec"]["selector"], labels) == mine
        assert selects(policy["spec"]["podSelector"]["matchLabels"], labels) == mine
        other_service = one(other_objects, "Service")["metadata"]["labels"]
        assert selects(monitor["spec"]["selector"]["matchLabels"], other_service) == mine
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert source == {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": "openshift-monitoring"}
        }
    }
    (container,) = pod_spec(objects)["containers"]
    names = {port["name"] for port in container["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in names
    assert rule["ports"][0]["port"] in names


def test_overlays_can_run_side_by_side(rendered: dict[str, list[Obj]]) -> None:
    seen = Counter(
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for objects in rendered.values()
        for o in objects
    )
    shared = {key for key, count in seen.items() if count > 1}
    assert shared == set()  # the namespace is deploy/namespace's, applied once
    host_ports = [
        port["containerPort"]
        for name in ("host-network", "localhost")
        for container in pod_spec(rendered[name])["containers"]
        for port in container["ports"]
    ]
    assert len(set(host_ports)) == len(host_ports)  # both may land on one control-plane node


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_limits_and_the_released_image(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    for container in containers(rendered[overlay]):
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert set(resources[kind]) == {"cpu", "memory"}, (container["name"], kind)
        assert container["image"] == f"ghcr.io/example/prober:{VERSION}"


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of container args."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), text)


def _container_env(container: Obj) -> dict[str, str]:
    env = dict(POD_ENV)
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[item["name"]] = CONFIG_MAPS[(ref["name"], ref["key"])]
        elif "fieldRef" in source:
            env[item["name"]] = FIELDS[source["fieldRef"]["fieldPath"]]
        else:
            env[item["name"]] = item["value"]
    return env


def _parsed(container: Obj) -> tuple[argparse.Namespace, dict[str, str]]:
    env = _container_env(container)
    args = [_expand(arg, env) for arg in container["args"]]
    unexpanded = [arg for arg in args if "$(" in arg]
    assert unexpanded == [], "an argument names a variable the container does not have"
    return build_parser().parse_args(args), env


def _loaded(objects: list[Obj], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """The configuration `prober run` would load in this pod, through the real CLI and
    loader; the ServiceAccount files are stand-ins written here."""
    (container,) = pod_spec(objects)["containers"]
    args, env = _parsed(container)
    assert args.command == "run"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert Path(args.config).parent == Path(mounts["config"])
    (config_map,) = find(objects, "ConfigMap")
    secrets = tmp_path / "serviceaccount"
    secrets.mkdir()
    (secrets / "ca.crt").write_text("stand-in\n")
    (secrets / "token").write_text("stand-in\n")
    config_file = tmp_path / "prober.yaml"
    config_file.write_text(config_map["data"]["prober.yaml"].replace(SA_DIR, str(secrets)))
    captured: dict[str, Any] = {}

    def daemon(config_path: str | None, flags: dict[str, object]) -> int:
        captured.update(path=config_path, flags=flags)
        return 0

    monkeypatch.setattr("prober.daemon.commands.run_command", daemon)
    assert args.handler(args) == 0
    config = load_config(str(config_file), env=env, flags=captured["flags"])
    assert Path(config.event_log or "").parent == Path(mounts["event-log"])
    assert config.listen[1] == container["ports"][0]["containerPort"]
    assert container["livenessProbe"]["httpGet"]["port"] == container["ports"][0]["name"]
    return config


@pytest.mark.parametrize(
    ("overlay", "targets"),
    [
        ("pod-network", {("service-network", "https://172.30.0.1:443"),
                         ("external-lb", "https://api.ci.example.test:6443")}),
        ("host-network", set()),  # discovered in the cluster: service network, internal, external
        ("localhost", {("localhost", "https://localhost:6443")}),
    ],
)  # fmt: skip
def test_the_daemon_accepts_its_arguments_and_configuration(
    rendered: dict[str, list[Obj]],
    overlay: str,
    targets: set[tuple[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _loaded(rendered[overlay], tmp_path, monkeypatch)
    assert {(str(t.lb), t.url) for t in config.targets} == targets
    assert config.in_cluster
    assert dict(config.labels) == {"vantage": overlay}
    assert (config.interval, config.workers) == (0.1, 2)  # the rate the resources are sized for


def test_the_audit_follower_accepts_its_arguments(rendered: dict[str, list[Obj]]) -> None:
    (container,) = pod_spec(rendered["audit"])["containers"]
    args, _ = _parsed(container)
    assert (args.command, args.audit_command) == ("audit", "follow")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert str(args.directory) == mounts["audit-logs"]["mountPath"]
    assert mounts["audit-logs"]["readOnly"] is True
    assert str(args.out) == mounts["state"]["mountPath"]
    assert args.node == "master-0"
    assert args.listen.endswith(f":{container['ports'][0]['containerPort']}")


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nothing_listens_on_ipv4_only(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """0.0.0.0 is every IPv4 address and no IPv6 one: a single-stack IPv6 cluster could not
    scrape or probe the pod. Args, env values and the config file alike."""
    assert [s for o in rendered[overlay] for s in _strings(o) if "0.0.0.0" in s] == []


@pytest.mark.parametrize("pod_ip", ["10.128.0.7", "fd01:0:0:1::7"])
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_listens_on_its_own_address_of_either_family(
    rendered: dict[str, list[Obj]],
    overlay: str,
    pod_ip: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the daemon or the follower binds, through their own CLI and config loader: not
    the daemon's default (0.0.0.0) and not [::], which the asyncio server makes IPv6-only."""
    monkeypatch.setitem(FIELDS, "status.podIP", pod_ip)
    (container,) = pod_spec(rendered[overlay])["containers"]
    port = container["ports"][0]["containerPort"]
    if overlay == "audit":
        args, _ = _parsed(container)
        assert host_port(args.listen) == (pod_ip, port)
    else:
        assert _loaded(rendered[overlay], tmp_path, monkeypatch).listen == (pod_ip, port)
