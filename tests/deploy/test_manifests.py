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
from urllib.parse import urlsplit

import jsonschema  # kubernetes-validate's own validator
import kubernetes_validate
import pytest

from prober.cli import build_parser
from prober.common.values import host_port
from prober.config import Config, load_config
from tests.deploy.manifests import (
    DEPLOY,
    OVERLAYS,
    PROXY,
    ROOT,
    SERVICE_MONITOR_SCHEMA,
    Obj,
    containers,
    find,
    flags,
    held_rules,
    measuring,
    named,
    one,
    pod_spec,
    render,
    restricted_violations,
    selects,
    workload,
)
from tests.support.certs import ca_pem

KUBERNETES_VERSIONS = ("1.29", "1.33")  # OpenShift 4.16 .. 4.20
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# What a pod's environment holds at run time, for expanding $(VAR) in container args.
POD_ENV = {"KUBERNETES_SERVICE_HOST": "172.30.0.1", "KUBERNETES_SERVICE_PORT": "443"}
CONFIG_MAPS = {("prober-cluster", "api-url"): "https://api.ci.example.test:6443"}
FIELDS = {
    "spec.nodeName": "master-0", "status.podIP": "10.128.0.7", "metadata.name": "prober-x",
    "metadata.namespace": "prober", "metadata.uid": "0d6f3f0e-7d3b-4b8e-9a51-2c2b4f6e1a01",
}  # fmt: skip


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
    daemonset = workload(rendered["pod-network"])
    broken = {**daemonset, "spec": {**daemonset["spec"], "minReadySeconds": "two"}}
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


# The kube-rbac-proxy's: who a scrape's token is, and whether it may GET /metrics.
METRICS_AUTH_RULES = {
    ("*", "authentication.k8s.io", "tokenreviews", "", "create"),
    ("*", "authorization.k8s.io", "subjectaccessreviews", "", "create"),
}
DAEMON_RULES = METRICS_AUTH_RULES | {
    ("*", "", "namespaces", "default", "get"),
    ("*", "config.openshift.io", "infrastructures", "cluster", "get"),
    ("kube-system", "coordination.k8s.io", "leases", "", "get,list,watch"),
    ("prober", "coordination.k8s.io", "leases", "", "create,get,list,update,watch"),
}


def _scc(name: str) -> tuple[str, str, str, str, str]:
    return ("prober", "security.openshift.io", "securitycontextconstraints", name, "use")


@pytest.mark.parametrize(
    ("overlay", "rules"),
    [
        ("pod-network", DAEMON_RULES),
        ("host-network", DAEMON_RULES | {_scc("hostnetwork-v2")}),
        ("localhost", DAEMON_RULES | {_scc("hostnetwork-v2")}),
        ("audit", METRICS_AUTH_RULES | {_scc("privileged")}),
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
    # The one port the pod declares is its kube-rbac-proxy's; the Service, the ServiceMonitor
    # and the policy name it (the prober listens on loopback, for the proxy only).
    names = {port["name"] for c in pod_spec(objects)["containers"] for port in c.get("ports", [])}
    assert names == {port["name"] for port in named(objects, PROXY)["ports"]} == {"metrics"}
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
        for port in container.get("ports", [])
    ]
    assert len(set(host_ports)) == len(host_ports)  # both may land on one control-plane node


# Set by each overlay's `images:`; the kube-rbac-proxy's is a placeholder a CI job replaces
# with the cluster's own (deploy/ci).
IMAGES = {
    "prober": f"ghcr.io/example/prober:{VERSION}",
    "audit": f"ghcr.io/example/prober:{VERSION}",
    PROXY: "quay.io/openshift/origin-kube-rbac-proxy:latest",
}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_limits_and_the_released_image(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    for container in containers(rendered[overlay]):
        resources = container["resources"]
        for kind in ("requests", "limits"):
            assert set(resources[kind]) == {"cpu", "memory"}, (container["name"], kind)
        assert container["image"] == IMAGES[container["name"]]


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
    container = measuring(objects)
    args, env = _parsed(container)
    assert args.command == "run"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert Path(args.config).parent == Path(mounts["config"])
    (config_map,) = find(objects, "ConfigMap")
    secrets = tmp_path / "serviceaccount"
    secrets.mkdir()
    (secrets / "ca.crt").write_text(ca_pem())
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
    assert config.node == FIELDS["spec.nodeName"]  # the downward API: same-node results
    assert dict(config.labels) == {"vantage": overlay}
    assert (config.interval, config.workers) == (0.1, 2)  # the rate the resources are sized for


def test_the_audit_follower_accepts_its_arguments(rendered: dict[str, list[Obj]]) -> None:
    container = measuring(rendered["audit"])
    args, _ = _parsed(container)
    assert (args.command, args.audit_command) == ("audit", "follow")
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert str(args.directory) == mounts["audit-logs"]["mountPath"]
    assert mounts["audit-logs"]["readOnly"] is True
    assert str(args.out) == mounts["state"]["mountPath"]
    assert args.node == "master-0"


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nothing_listens_on_ipv4_only(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """0.0.0.0 is every IPv4 address and no IPv6 one: a single-stack IPv6 cluster could not
    scrape or probe the pod. Args, env values and the config file alike. (127.0.0.1, where
    the prober listens for its proxy, is on every pod's and node's loopback, IPv6-only
    clusters' too.)"""
    assert [s for o in rendered[overlay] for s in _strings(o) if "0.0.0.0" in s] == []


def _upstream(objects: list[Obj]) -> tuple[str, int]:
    """Where the pod's kube-rbac-proxy sends what it lets through."""
    url = urlsplit(flags(named(objects, PROXY))["--upstream"])
    assert (url.scheme, url.path) == ("http", "/")
    return url.hostname or "", url.port or 80


@pytest.mark.parametrize("pod_ip", ["10.128.0.7", "fd01:0:0:1::7"])
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_prober_listens_on_loopback_for_its_proxy_only(
    rendered: dict[str, list[Obj]],
    overlay: str,
    pod_ip: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the daemon or the follower binds, through their own CLI and config loader,
    whatever the pod's address: 127.0.0.1 (not the daemon's default, 0.0.0.0), on the port
    its kube-rbac-proxy forwards to. It declares no port: nothing but the proxy reaches it."""
    monkeypatch.setitem(FIELDS, "status.podIP", pod_ip)
    objects = rendered[overlay]
    container = measuring(objects)
    if overlay == "audit":
        args, _ = _parsed(container)
        listen = host_port(args.listen)
    else:
        listen = _loaded(objects, tmp_path, monkeypatch).listen
    assert listen == _upstream(objects)
    assert listen[0] == "127.0.0.1"
    assert container.get("ports", []) == []


@pytest.mark.parametrize("pod_ip", ["10.128.0.7", "fd01:0:0:1::7"])
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_proxy_listens_on_the_pods_own_address_of_either_family(
    rendered: dict[str, list[Obj]], overlay: str, pod_ip: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not 0.0.0.0 (no IPv6) and not [::] (IPv6 only, where the stack sets IPV6_V6ONLY): the
    pod's own address from the downward API, bracketed, which either family parses."""
    monkeypatch.setitem(FIELDS, "status.podIP", pod_ip)
    proxy = named(rendered[overlay], PROXY)
    env = _container_env(proxy)
    address = _expand(flags(proxy)["--secure-listen-address"], env)
    (port,) = proxy["ports"]
    assert host_port(address) == (pod_ip, port["containerPort"])


HOST_PORT_RANGE = range(9000, 10000)  # opened between nodes for host services


def test_loopback_ports_on_the_host_network_are_the_nodes_own(
    rendered: dict[str, list[Obj]],
) -> None:
    """A host-network pod's loopback is its node's, shared with every other host-network pod
    and host service there. The two host-network overlays may share a control-plane node:
    their probers' ports differ, from each other and from every port either pod declares,
    and lie outside 9000-9999, as OpenShift's host port registry asks of localhost-only
    ports (openshift/enhancements, dev-guide/host-port-registry.md)."""
    on_host = {o: rendered[o] for o in ("host-network", "localhost")}
    assert all(pod_spec(objects).get("hostNetwork") for objects in on_host.values())
    loopback = [_upstream(objects) for objects in on_host.values()]
    assert {host for host, _ in loopback} == {"127.0.0.1"}
    ports = [port for _, port in loopback]
    declared = {
        port["containerPort"]
        for objects in on_host.values()
        for container in pod_spec(objects)["containers"]
        for port in container.get("ports", [])
    }
    assert len(set(ports)) == len(ports)
    assert set(ports).isdisjoint(declared)
    assert not [port for port in ports if port in HOST_PORT_RANGE]
    assert declared <= set(HOST_PORT_RANGE)  # the proxies: reachable from the other nodes
