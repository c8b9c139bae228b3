"""Every rendered pod against OpenShift's SCC admission: the SCC it names
(openshift.io/required-scc), which its ServiceAccount must be allowed to use, admits it as
written; the SCCs its overlay's RBAC grants are no more than that one. Each rule of the check
(tests/deploy/scc.py) is shown to refuse a small pod that breaks it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.manifests import OVERLAYS, Obj, held_rules, pod_spec, workload
from tests.deploy.scc import REQUIRED_SCC, SCC_DIR, SCCS, scc_violations, sccs_used

# The SELinux types a container may read /var/log with on RHCOS (kube-apiserver's audit
# logs there are var_log_t): not container_t, the type SCC admission gives by default.
READS_HOST_LOGS = {"spc_t"}


def _pod(context: Obj | None = None, **spec: Any) -> Obj:
    """A small pod: one container `c` with this securityContext, and no token volume unless
    the test asks for one."""
    container = {"name": "c", "securityContext": context or {}}
    return {"automountServiceAccountToken": False, "containers": [container], **spec}


def _variant(name: str, host: dict[str, bool] | None = None, **changes: Any) -> Obj:
    """A known SCC with some rules changed, for rules no built-in SCC shows on its own."""
    return {**SCCS[name], "host": {**SCCS[name]["host"], **(host or {})}, **changes}


def test_the_fixtures_hold_what_the_check_reads() -> None:
    used = {"restricted-v2", "hostnetwork-v2", "hostaccess", "hostmount-anyuid", "privileged"}
    assert used <= set(SCCS)
    keys = {"name", "host", "privileged", "privilegeEscalation", "addCapabilities", "seccomp"}
    keys |= {"volumes", "mustReadOnlyRoot", "ids"}
    for path in sorted(SCC_DIR.glob("*.yaml")):
        scc = SCCS[path.stem]
        assert keys <= set(scc) <= keys | {"everyone"}, path.name
        assert set(scc["host"]) == {"network", "ports", "pid", "ipc", "paths"}
        assert set(scc["ids"]) == {"user", "seLinux", "fsGroup", "supplementalGroups"}
    assert [name for name, scc in SCCS.items() if scc.get("everyone")] == ["restricted-v2"]


def test_a_restricted_pod_is_admitted_everywhere() -> None:
    hardened = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    volumes = [{"name": "tmp", "emptyDir": {}}, {"name": "config", "configMap": {"name": "x"}}]
    pod = _pod(hardened, securityContext={"runAsNonRoot": True}, volumes=volumes)
    for scc in SCCS.values():
        assert scc_violations(pod, scc) == [], scc["name"]


def test_host_namespaces_need_the_scc_to_allow_them() -> None:
    pod = _pod(hostNetwork=True, hostPID=True, hostIPC=True)
    assert scc_violations(pod, SCCS["restricted-v2"]) == ["hostNetwork", "hostPID", "hostIPC"]
    assert scc_violations(pod, SCCS["hostnetwork-v2"]) == ["hostPID", "hostIPC"]
    assert scc_violations(pod, SCCS["hostaccess"]) == []


def test_a_port_on_the_host_network_is_a_host_port() -> None:
    ports = {"ports": [{"name": "metrics", "containerPort": 9773}]}
    host_port = {"ports": [{"name": "metrics", "containerPort": 9090, "hostPort": 9090}]}
    on_host = {**_pod(hostNetwork=True), "containers": [{"name": "c", **ports}]}
    no_ports = _variant("hostnetwork-v2", host={"ports": False})
    assert scc_violations(on_host, no_ports) == ["c: host port 9773"]
    assert scc_violations(on_host, SCCS["hostnetwork-v2"]) == []
    explicit = {**_pod(), "containers": [{"name": "c", **host_port}]}
    assert scc_violations(explicit, SCCS["restricted-v2"]) == ["c: host port 9090"]
    on_pod_network = {**_pod(), "containers": [{"name": "c", **ports}]}
    assert scc_violations(on_pod_network, SCCS["restricted-v2"]) == []


def test_host_paths_need_the_plugin_and_the_volume_type() -> None:
    pod = _pod(volumes=[{"name": "logs", "hostPath": {"path": "/var/log/kube-apiserver"}}])
    assert scc_violations(pod, SCCS["hostnetwork-v2"]) == ["hostPath volume"]
    assert scc_violations(pod, SCCS["hostmount-anyuid"]) == []
    no_plugin = _variant("hostmount-anyuid", host={"paths": False})
    assert scc_violations(pod, no_plugin) == ["hostPath volume"]


def test_every_volume_type_must_be_listed_the_token_volume_too() -> None:
    nfs = _pod(volumes=[{"name": "data", "nfs": {"server": "nfs", "path": "/"}}])
    assert scc_violations(nfs, SCCS["restricted-v2"]) == ["nfs volume"]
    assert scc_violations(nfs, SCCS["privileged"]) == []
    no_projected = _variant("restricted-v2", volumes=["configMap", "emptyDir"])
    with_token = {**_pod(), "automountServiceAccountToken": True}
    assert scc_violations(with_token, no_projected) == ["projected volume"]
    assert scc_violations(_pod(), no_projected) == []


def test_privileged_containers_and_escalation() -> None:
    pod = _pod({"privileged": True, "allowPrivilegeEscalation": True})
    refused = ["c: privileged", "c: allowPrivilegeEscalation"]
    assert scc_violations(pod, SCCS["restricted-v2"]) == refused
    assert scc_violations(pod, SCCS["hostmount-anyuid"]) == ["c: privileged"]
    assert scc_violations(pod, SCCS["privileged"]) == []
    # Unset, admission sets it to what the SCC allows: not refused.
    assert scc_violations(_pod({}), SCCS["restricted-v2"]) == []


def test_added_capabilities_must_be_allowed() -> None:
    pod = _pod({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "NET_RAW"]}})
    assert scc_violations(pod, SCCS["restricted-v2"]) == ["c: capability NET_RAW added"]
    refused = ["c: capability NET_BIND_SERVICE added", "c: capability NET_RAW added"]
    assert scc_violations(pod, SCCS["hostaccess"]) == refused
    assert scc_violations(pod, SCCS["privileged"]) == []


def test_a_seccomp_profile_must_be_one_the_scc_lists() -> None:
    runtime_default = {"seccompProfile": {"type": "RuntimeDefault"}}
    for pod, where in (
        (_pod(securityContext=runtime_default), "pod"),
        (_pod(runtime_default), "c"),
    ):
        # No profiles listed: none may be asked for, not even the runtime's default.
        refused = [f"{where}: seccomp runtime/default"]
        assert scc_violations(pod, SCCS["hostmount-anyuid"]) == refused
        assert scc_violations(pod, SCCS["restricted-v2"]) == []
        assert scc_violations(pod, SCCS["privileged"]) == []
    unconfined = _pod({"seccompProfile": {"type": "Unconfined"}})
    assert scc_violations(unconfined, SCCS["restricted-v2"]) == ["c: seccomp unconfined"]


def test_a_must_run_as_selinux_context_refuses_another_type() -> None:
    spc = {"seLinuxOptions": {"type": "spc_t"}}
    for pod, where in ((_pod(securityContext=spc), "pod"), (_pod(spc), "c")):
        for name in ("restricted-v2", "hostaccess", "hostmount-anyuid"):
            refused = [f"{where}: seLinuxOptions type spc_t instead of the namespace's"]
            assert scc_violations(pod, SCCS[name]) == refused, name
        assert scc_violations(pod, SCCS["privileged"]) == []
        assert scc_violations(pod, SCCS["hostmount-anyuid-v2"]) == []


@pytest.mark.parametrize("uid", [0, 1000])
def test_a_fixed_uid_is_refused_by_the_namespaces_range(uid: int) -> None:
    pod = _pod({"runAsUser": uid})
    assert scc_violations(pod, SCCS["restricted-v2"]) == [
        f"c: runAsUser {uid} outside the namespace's range"
    ]
    assert scc_violations(pod, SCCS["hostmount-anyuid"]) == []
    as_root = ["c: runAsUser 0"] if uid == 0 else []
    assert scc_violations(pod, SCCS["nonroot-v2"]) == as_root


def test_fixed_groups_are_refused_by_the_namespaces_range() -> None:
    pod = _pod(securityContext={"fsGroup": 1000, "supplementalGroups": [1000]})
    assert scc_violations(pod, SCCS["restricted-v2"]) == [
        "pod: fsGroup outside the namespace's range"
    ]
    assert scc_violations(pod, SCCS["hostnetwork-v2"]) == [
        "pod: fsGroup outside the namespace's range",
        "pod: supplementalGroups outside the namespace's range",
    ]
    assert scc_violations(pod, SCCS["anyuid"]) == []


def test_a_read_only_root_scc_refuses_a_writable_root() -> None:
    read_only = _variant("restricted-v2", mustReadOnlyRoot=True)
    assert scc_violations(_pod({"readOnlyRootFilesystem": False}), read_only) == [
        "c: writable root filesystem"
    ]
    assert scc_violations(_pod({}), read_only) == []  # defaulted to read-only


def _template(objects: list[Obj]) -> Obj:
    template: Obj = workload(objects)["spec"]["template"]
    return template


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_names_an_scc_that_admits_it_and_it_may_use(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    annotations = _template(rendered[overlay])["metadata"].get("annotations", {})
    name = annotations.get(REQUIRED_SCC)
    assert name in SCCS, f"{overlay}: {REQUIRED_SCC} is {name!r}"
    assert name in sccs_used(held_rules(rendered[overlay]))
    assert scc_violations(pod_spec(rendered[overlay]), SCCS[name]) == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_an_overlay_grants_no_scc_its_pod_does_not_run_under(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    granted = sccs_used(held_rules(rendered[overlay])) - {
        name for name, scc in SCCS.items() if scc.get("everyone")
    }
    annotations = _template(rendered[overlay])["metadata"].get("annotations", {})
    assert granted <= {annotations.get(REQUIRED_SCC)}
    for name in granted:  # and any SCC granted admits the pod
        assert scc_violations(pod_spec(rendered[overlay]), SCCS[name]) == [], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_logs_are_read_with_an_selinux_type_that_may_read_them(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    spec = pod_spec(rendered[overlay])
    host_logs = {
        v["name"]
        for v in spec.get("volumes", [])
        if "hostPath" in v and v["hostPath"]["path"].startswith("/var/log")
    }
    assert bool(host_logs) == (overlay == "audit")
    pod_type = spec.get("securityContext", {}).get("seLinuxOptions", {}).get("type")
    for container in spec["containers"]:
        if {m["name"] for m in container.get("volumeMounts", [])} & host_logs:
            context = container.get("securityContext", {})
            selinux = context.get("seLinuxOptions", {}).get("type", pod_type)
            assert selinux in READS_HOST_LOGS, container["name"]
