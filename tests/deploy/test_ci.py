"""deploy/ci: the prober's CI steps in openshift/release's step-registry shape. Every ref
parses into the fields ci-operator knows, names its commands file and is named after its
directory, as the registry's checks demand; every commands script is strict bash that
shellcheck passes; the example job runs prober-deploy before the test and prober-gather
first after it. Both scripts run against a stand-in `oc`: prober-deploy's applies are rendered
with kubectl's kustomize; prober-gather collects the pod log of a real daemon run and judges
it with the real `prober` CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.manifests import DEPLOY, OVERLAYS, ROOT, Obj, flags, measuring, named, pod_spec
from tests.support.certs import Certs
from tests.support.daemon_process import DaemonProcess
from tests.support.tls_server import TLSServer, cycling_header

CI = DEPLOY / "ci"  # the step registry's root: ci-operator/step-registry/ in openshift/release
REFS = sorted(CI.rglob("*-ref.yaml"))
SCRIPTS = sorted(CI.rglob("*-commands.sh"))
GATHER = CI / "prober" / "gather" / "prober-gather-commands.sh"
DEPLOY_SCRIPT = CI / "prober" / "deploy" / "prober-deploy-commands.sh"
BIN = Path(sys.executable).parent  # `prober` and `kubectl` of the venv
# ci-operator's LiteralTestStep fields (openshift/ci-tools, pkg/api/types.go), and a ref's
# `documentation`: anything else is a typo ci-operator would refuse.
REF_FIELDS = {
    "as", "from", "from_image", "commands", "resources", "timeout", "grace_period",
    "credentials", "env", "dependencies", "dnsConfig", "leases", "optional_on_success",
    "best_effort", "cli", "observers", "run_as_script", "documentation",
}  # fmt: skip
GO_DURATION = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")
STRICT = "set -o nounset -o errexit -o pipefail"


def _ref(path: Path) -> Obj:
    document = yaml.safe_load(path.read_text())
    assert set(document) == {"ref"}, path
    ref: Obj = document["ref"]
    return ref


def _owners(directory: Path) -> Obj:
    """The nearest OWNERS file at or above `directory`, up to the registry's root."""
    for parent in [directory, *directory.parents]:
        if (parent / "OWNERS").exists():
            owners: Obj = yaml.safe_load((parent / "OWNERS").read_text())
            return owners
        assert parent != CI, f"no OWNERS above {directory}"
    raise AssertionError(directory)


def test_the_registry_holds_both_steps() -> None:
    assert [_ref(path)["as"] for path in REFS] == ["prober-deploy", "prober-gather"]
    assert [path.name for path in SCRIPTS] == [
        "prober-deploy-commands.sh", "prober-gather-commands.sh"
    ]  # fmt: skip


@pytest.mark.parametrize("path", REFS, ids=lambda p: p.stem)
def test_every_ref_is_named_after_its_place_and_names_its_files(path: Path) -> None:
    ref = _ref(path)
    assert set(ref) <= REF_FIELDS, set(ref) - REF_FIELDS
    where = path.parent.relative_to(CI)
    # The registry's rule: a step's name is its directory's path, joined with dashes, and
    # its files are named after it.
    assert ref["as"] == "-".join(where.parts) == path.name.removesuffix("-ref.yaml")
    assert ref["commands"] == f"{ref['as']}-commands.sh"
    assert (path.parent / ref["commands"]).is_file()
    assert ("from" in ref) != ("from_image" in ref)
    assert set(ref["resources"]["requests"]) == {"cpu", "memory"}
    for duration in ("timeout", "grace_period"):
        assert GO_DURATION.match(ref[duration]), (duration, ref[duration])
    assert ref["documentation"].strip()
    for parameter in ref.get("env", []):
        assert set(parameter) <= {"name", "default", "documentation"}
        assert parameter["documentation"].strip(), parameter["name"]
        # ci-operator's defaults are strings: `false` unquoted would be YAML's boolean.
        assert isinstance(parameter.get("default", ""), str), parameter["name"]
    for dependency in ref.get("dependencies", []):
        assert set(dependency) == {"name", "env"}


@pytest.mark.parametrize("path", REFS, ids=lambda p: p.stem)
def test_every_ref_has_its_metadata(path: Path) -> None:
    metadata = json.loads(path.with_name(path.name.replace(".yaml", ".metadata.json")).read_text())
    assert metadata["path"] == str(path.relative_to(CI))
    owners = _owners(path.parent)
    assert metadata["owners"] == {
        "approvers": owners["approvers"],
        "reviewers": owners["reviewers"],
    }
    assert metadata["owners"]["approvers"]
    assert metadata["owners"]["reviewers"]


def test_gathering_never_fails_the_job_unless_asked_to_gate() -> None:
    gather = _ref(CI / "prober" / "gather" / "prober-gather-ref.yaml")
    assert gather["best_effort"] is True
    assert {p["name"]: p["default"] for p in gather["env"]}["PROBER_GATE"] == "false"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_commands_script_is_strict_bash(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n")
    assert STRICT in text.splitlines()
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_commands_script_passes_shellcheck(script: Path) -> None:
    done = subprocess.run(
        ["shellcheck", "--shell=bash", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def test_the_example_job_deploys_before_the_test_and_gathers_first_after_it() -> None:
    job = yaml.safe_load((CI / "example-job.yaml").read_text())
    (test,) = job["tests"]
    steps = test["steps"]
    pre = [step.get("ref") or step.get("chain") for step in steps["pre"]]
    post = [step.get("ref") or step.get("chain") for step in steps["post"]]
    assert pre[-1] == "prober-deploy"  # on the installed cluster
    assert post[0] == "prober-gather"  # before anything tears the cluster down
    ours = {n for n in pre + post if n.startswith("prober-")}
    assert ours == {_ref(path)["as"] for path in REFS}
    built = {image["to"] for image in job["images"]}
    for path in REFS:
        ref = _ref(path)
        needed = {ref.get("from")} | {d["name"] for d in ref.get("dependencies", [])}
        assert needed - {"src", None} <= built, ref["as"]
    assert set(steps["env"]) <= {p["name"] for path in REFS for p in _ref(path).get("env", [])}


FAKE_OC = r"""#!/bin/bash
# The `oc` prober-deploy calls, offline: records each call, renders what `apply -k` would
# apply with kubectl's kustomize, and answers the few reads the script makes.
set -o nounset -o errexit -o pipefail
printf '%s\n' "$*" >> "$FAKE_OC_DIR/calls"
case "$*" in
    "apply -k "*)
        n=$(ls "$FAKE_OC_DIR" | grep -c '^applied-' || true)
        "$KUBECTL" kustomize "$3" > "$FAKE_OC_DIR/applied-$n.yaml" ;;
    "apply -f -") cat > "$FAKE_OC_DIR/configmap.yaml" ;;
    "get infrastructure cluster "*) echo "https://api.ci.example.test:6443" ;;
    "-n prober create configmap prober-cluster "*) echo "kind: ConfigMap" ;;
    "-n openshift-monitoring get daemonset node-exporter "*) echo "$FAKE_PROXY_IMAGE" ;;
    "-n prober get deployment,daemonset "*) all="$*"; echo "daemonset/prober-${all##*=}" ;;
    "get nodes -l node-role.kubernetes.io/worker -o name")
        for ((i = 0; i < ${FAKE_WORKERS:-3}; i++)); do echo "node/w-$i"; done ;;
    "label --overwrite "*) ;;
    "-n prober rollout status "*) [[ "$5" != "$FAKE_NOT_READY" ]] ;;
    "-n prober get pods "*) ;;
    *) echo "fake oc: unexpected: $*" >&2; exit 3 ;;
esac
"""
PROBER_IMAGE = "registry.build.example/ci-op-1/pipeline@sha256:" + "ab" * 32
PROXY_IMAGE = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "cd" * 32


def _deploy(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    calls = tmp_path / "oc"
    (tmp_path / "bin").mkdir()
    calls.mkdir()
    oc = tmp_path / "bin" / "oc"
    oc.write_text(FAKE_OC)
    oc.chmod(0o755)
    shared = tmp_path / "shared"
    shared.mkdir()
    done = subprocess.run(
        ["bash", str(DEPLOY_SCRIPT)],
        cwd=ROOT,  # ci-operator runs `src` steps in the repository's checkout
        env={
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "TMPDIR": str(tmp_path),
            "KUBECTL": str(BIN / "kubectl"),
            "KUBECONFIG": str(tmp_path / "kubeconfig"),
            "SHARED_DIR": str(shared),
            "FAKE_OC_DIR": str(calls),
            "FAKE_PROXY_IMAGE": PROXY_IMAGE,
            "FAKE_NOT_READY": "",
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done, calls


def test_prober_deploy_applies_the_namespace_first_then_the_overlays_with_the_jobs_images(
    tmp_path: Path,
) -> None:
    done, calls = _deploy(
        tmp_path, PROBER_IMAGE=PROBER_IMAGE, FAKE_NOT_READY="daemonset/prober-host-network"
    )
    assert done.returncode == 0, done.stderr
    recorded_calls = (calls / "calls").read_text().splitlines()
    # The LB probers' DaemonSets select these: two workers, so that one reboot leaves one.
    labelled = [c for c in recorded_calls if c.startswith("label ")]
    assert labelled == [
        "label --overwrite node w-0 prober/node=true",
        "label --overwrite node w-1 prober/node=true",
    ]
    applies = [c for c in recorded_calls if c.startswith("apply")]
    assert applies[0] == "apply -k deploy/namespace"
    assert applies[1] == "apply -f -"  # the pod-network overlay's API URL
    assert applies[-1] == "apply -k deploy/prometheus/ci"
    assert len(applies) == 2 + len(OVERLAYS) + 1
    for index, overlay in enumerate(OVERLAYS, start=1):
        objects = [
            o for o in yaml.safe_load_all((calls / f"applied-{index}.yaml").read_text()) if o
        ]
        assert {o["metadata"]["name"] for o in objects if o["kind"] == "Service"} == {
            f"prober-{overlay}"
        }
        assert measuring(objects)["image"] == PROBER_IMAGE
        assert named(objects, "kube-rbac-proxy")["image"] == PROXY_IMAGE
        assert pod_spec(objects)["containers"]  # still the overlay's pod
        assert flags(named(objects, "kube-rbac-proxy"))["--tls-min-version"]
    recorded = (tmp_path / "shared" / "prober-deploy.env").read_text()
    assert "PROBER_DEPLOYED_OVERLAYS=pod-network\\ host-network\\ localhost\\ audit" in recorded
    # Not ready in time: reported, not fatal.
    assert "PROBER_NOT_READY=daemonset/prober-host-network" in recorded
    assert "daemonset/prober-host-network not ready" in done.stderr


def test_prober_deploy_labels_two_workers_of_a_cluster_with_many(tmp_path: Path) -> None:
    # More node names than a pipe holds: a reader that stops after two lines would make oc
    # die of SIGPIPE, and the step fail under pipefail.
    done, calls = _deploy(tmp_path, FAKE_WORKERS="20000", PROBER_OVERLAYS="localhost")
    assert done.returncode == 0, done.stderr
    labelled = [c for c in (calls / "calls").read_text().splitlines() if c.startswith("label ")]
    assert labelled == [
        "label --overwrite node w-0 prober/node=true",
        "label --overwrite node w-1 prober/node=true",
    ]


def test_prober_deploy_refuses_an_unknown_overlay_before_applying_anything(
    tmp_path: Path,
) -> None:
    done, calls = _deploy(tmp_path, PROBER_OVERLAYS="pod-network pod-netwrok")
    assert done.returncode == 1
    assert "no overlay pod-netwrok" in done.stderr
    assert not [c for c in (calls / "calls").read_text().splitlines() if c.startswith("apply")]


@pytest.fixture
async def pod_log(tls_server: TLSServer, certs: Certs, token_file: Path, tmp_path: Path) -> bytes:
    """What `oc logs` gives of a prober container (event_log_stdout compact, as the overlays
    run it):
    the real daemon's stdout over two apiserver shutdowns of the test server's rolling
    restart (each host ready for 2 s, then shutting down for 2 s of its 10 s delay: the LB
    moved on well within the delay and the NLB's 30 s budget), ended by SIGTERM."""
    tls_server.plan.header = cycling_header(4.0, delay=10.0)
    daemon = await DaemonProcess.start(
        f"--target=internal-lb={tls_server.url}",
        f"--ca-file={certs.ca_file}",
        f"--token-file={token_file}",
        "--interval=50ms",
        "--quiet-interval=0",
        "--listen=127.0.0.1:0",
        "--watches=false",
        f"--event-log={tmp_path / 'events.jsonl'}",
        "--event-log-stdout=compact",
        "--platform=aws",
    )
    try:
        await daemon.wait_for("ready")
        second = "apiserver-00000000000000000000000001"
        await daemon.wait_for(
            lambda line: (
                (line.get("event"), line.get("host")) == ("shutdown_window_opened", second)
            ),
            timeout=30,
        )
        await daemon.signal(signal.SIGTERM)
        assert await daemon.wait(timeout=15) == 0
    finally:
        await daemon.close()
    return b"".join(daemon.raw)


FAKE_OC_GATHER = r"""#!/bin/bash
# The `oc` prober-gather calls, offline: two prober pods, the pod-network one's `prober`
# container restarted once; its log is a real daemon's.
set -o nounset -o errexit -o pipefail
network=prober-pod-network-5d8f7-x2k4q audit=prober-audit-m7v2c
case "$*" in
    "-n prober get pods -o wide "* | "-n prober get events") echo "NAME" ;;
    "-n prober get pods -l app.kubernetes.io/name=prober -o jsonpath="*) echo "$network $audit" ;;
    "-n prober get pod $network "*) printf 'kube-rbac-proxy 0\nprober 1\n' ;;
    "-n prober get pod $audit "*) printf 'audit 0\nkube-rbac-proxy 0\n' ;;
    "-n prober logs $network -c prober") cat "$FAKE_POD_LOG" ;;
    "-n prober logs --previous $network -c prober") echo '{"event": "starting"}' ;;
    "-n prober logs "*) echo "I1201 10:00:00.000000 1 main.go:1] a log line" ;;
    *"{.status.desired.version}") echo "4.21.0-0.nightly-2026-11-30-101010" ;;
    *"{.status.history[*].version}") echo "4.21.0-0.nightly-2026-11-30-101010 4.20.5" ;;
    "get network.config cluster "*) echo "OVNKubernetes" ;;
    "get infrastructure cluster "*) echo "HighlyAvailable" ;;
    *) echo "fake oc: unexpected: $*" >&2; exit 3 ;;
esac
"""
JOB = {"JOB_NAME": "periodic-ci-e2e-aws-upgrade", "BUILD_ID": "1900000000000000001"}


def _judge(directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`prober-gather-commands.sh judge DIR`: the analysis alone, on what was collected."""
    return subprocess.run(
        ["bash", str(GATHER), "judge", str(directory)],
        env={"PATH": f"{BIN}:{os.environ['PATH']}", **JOB, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _collected(tmp_path: Path, log: bytes) -> Path:
    """DIR/pods/ as the collection leaves it: the daemon's log, the previous container's that
    died before its first record, and the logs of containers that hold no records."""
    pods = tmp_path / "artifacts" / "prober" / "pods"
    pods.mkdir(parents=True)
    (pods / "prober-pod-network-5d8f7-x2k4q_prober.log").write_bytes(log)
    (pods / "prober-pod-network-5d8f7-x2k4q_prober.previous.log").write_bytes(
        b'{"event": "starting", "level": "info"}\n'
    )
    (pods / "prober-pod-network-5d8f7-x2k4q_kube-rbac-proxy.log").write_bytes(
        b"I1201 10:00:00.000000       1 kube-rbac-proxy.go:233] Starting TCP socket\n"
    )
    (pods / "prober-audit-m7v2c_audit.log").write_bytes(b'{"event": "following"}\n')
    return pods.parent


def _thresholds(tmp_path: Path, p99: float) -> Path:
    """A history of 20 AWS runs whose P99 reaction is `p99` on every internal-LB stream."""
    entries = [
        {"platform": "aws", "lb": "internal-lb", "protocol": protocol, "connection": connection,
         "metric": metric, "p50": p99, "p75": p99, "p95": p99, "p99": p99, "runs": 20,
         "usable": True}
        for protocol in ("http1", "http2")
        for connection in ("new", "reused")
        for metric in ("reaction", "disruption")
    ]  # fmt: skip
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"v": 1, "entries": entries}))
    return path


@pytest.mark.slow
def test_prober_gather_collects_and_judges_a_real_daemons_pod_log(
    pod_log: bytes, tmp_path: Path
) -> None:
    """The whole step against a stand-in `oc` serving the real daemon's log, then its
    judgement alone on what it collected, against histories it fails and passes."""
    (tmp_path / "bin").mkdir()
    oc = tmp_path / "bin" / "oc"
    oc.write_text(FAKE_OC_GATHER)
    oc.chmod(0o755)
    (tmp_path / "pod.log").write_bytes(pod_log)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "prober-deploy.env").write_text("PROBER_DEPLOYED_OVERLAYS='pod-network audit'\n")
    done = subprocess.run(
        ["bash", str(GATHER)],
        env={
            "PATH": f"{tmp_path / 'bin'}:{BIN}:{os.environ['PATH']}",
            "ARTIFACT_DIR": str(tmp_path / "artifacts"),
            "SHARED_DIR": str(shared),
            "KUBECONFIG": str(tmp_path / "kubeconfig"),
            "FAKE_POD_LOG": str(tmp_path / "pod.log"),
            **JOB,
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "artifacts" / "prober"
    assert sorted(path.name for path in (directory / "pods").iterdir()) == [
        "prober-audit-m7v2c_audit.log",
        "prober-audit-m7v2c_kube-rbac-proxy.log",
        "prober-pod-network-5d8f7-x2k4q_kube-rbac-proxy.log",
        "prober-pod-network-5d8f7-x2k4q_prober.log",
        "prober-pod-network-5d8f7-x2k4q_prober.previous.log",
    ]
    assert (directory / "pods" / "prober-pod-network-5d8f7-x2k4q_prober.log").read_bytes() == (
        pod_log
    )
    assert (directory / "prober-deploy.env").exists()
    analyzed = (directory / "analyze.log").read_text()
    assert "previous.log: no event records (event_log_stdout off?): left out" in analyzed
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["platform"] == "aws"
    hosts = {window["host"] for window in summary["windows"]}
    assert {"apiserver-00000000000000000000000000"} <= hosts
    assert (directory / "junit.xml").exists()
    assert "wrote" in (directory / "analyze.log").read_text()
    rows = [json.loads(line) for line in (directory / "rows.jsonl").read_text().splitlines()]
    assert {row["run_id"] for row in rows} == {summary["run_id"]}
    labels = ("job_name", "job_run_id", "release", "upgrade", "network_type", "topology")
    assert {tuple(row[label] for label in labels) for row in rows} == {
        ("periodic-ci-e2e-aws-upgrade", "1900000000000000001", "4.21", True, "OVNKubernetes",
         "HighlyAvailable")
    }  # fmt: skip
    assert {row["row_type"] for row in rows} >= {"stream", "shutdown"}
    _holds_origins_files(tmp_path / "artifacts", summary)

    # Against a history whose LBs all reacted within a second: the ~2 s reactions fail.
    strict = _thresholds(tmp_path, 0.1)
    advisory = _judge(directory, PROBER_THRESHOLDS=str(strict))
    assert advisory.returncode == 0, advisory.stderr
    assert "<failure" in (directory / "junit.xml").read_text()
    gated = _judge(directory, PROBER_THRESHOLDS=str(strict), PROBER_GATE="true")
    assert gated.returncode == 1
    assert "a verdict failed, and PROBER_GATE is true" in gated.stderr
    lenient = _judge(
        directory, PROBER_THRESHOLDS=str(_thresholds(tmp_path, 30.0)), PROBER_GATE="true"
    )
    assert lenient.returncode == 0, lenient.stderr

    # The kubelet rotated the container's log: `oc logs` gives the newest file, which begins
    # with records whose run record went with an older one. Judged from the run record that
    # comes again before the summary, the lines before it left out.
    lines = pod_log.splitlines(keepends=True)
    record, run = b'{"v":1,"kind":"', b'{"v":1,"kind":"run"'
    inside = next(
        i for i, ln in enumerate(lines) if ln.startswith(record) and not ln.startswith(run)
    )
    rotated = _collected(tmp_path / "rotated", b"".join(lines[inside:]))
    done = _judge(rotated, PROBER_GATE="true")
    assert done.returncode == 0, done.stderr
    assert (
        "before its first run record (the log rotated): left out"
        in (rotated / "analyze.log").read_text()
    )
    assert json.loads((rotated / "summary.json").read_text())["run_id"] == summary["run_id"]
    assert (rotated / "rows.jsonl").stat().st_size > 0


def test_prober_gather_never_fails_on_a_prober_problem(tmp_path: Path) -> None:
    """No log with records, a corrupt record, a thresholds file that is not there: reported,
    and the step passes even when gating (only a failed verdict gates)."""
    empty = tmp_path / "empty"
    (empty / "pods").mkdir(parents=True)
    done = _judge(empty, PROBER_GATE="true")
    assert done.returncode == 0
    assert "nothing to judge" in done.stderr
    corrupt = tmp_path / "corrupt"
    (corrupt / "pods").mkdir(parents=True)
    (corrupt / "pods" / "prober-x_prober.log").write_text('{"v":1,"kind":"run","run_id":\n')
    done = _judge(corrupt, PROBER_GATE="true", PROBER_THRESHOLDS=str(tmp_path / "missing.json"))
    assert done.returncode == 0
    assert "no file" in done.stderr
    assert "prober analyze exited 2" in done.stderr
    assert not (corrupt / "rows.jsonl").exists()


def _holds_origins_files(artifacts: Path, summary: dict[str, Any]) -> None:
    """OpenShift CI's own files at the top of the artifacts, each fitting the schema written
    from origin's types (tests/report/origin/), stamped with the run's start."""
    stamp = summary["started"][:19].replace("-", "").replace(":", "").replace("T", "-")
    schemas = ROOT / "tests" / "report" / "origin"
    kinds = {
        f"e2e-timelines_prober_{stamp}.json": "intervals",
        f"backend-disruption_prober_{stamp}.json": "backend-disruption",
        f"prober-stream-{stamp}-autodl.json": "autodl",
        f"prober-shutdown-{stamp}-autodl.json": "autodl",
    }
    for name, kind in kinds.items():
        document = json.loads((artifacts / name).read_text())
        jsonschema.validate(document, json.loads((schemas / f"{kind}.schema.json").read_text()))
    disruptions = json.loads((artifacts / f"backend-disruption_prober_{stamp}.json").read_text())
    assert all(name.startswith("prober-") for name in disruptions["BackendDisruptions"])
    items = json.loads((artifacts / f"e2e-timelines_prober_{stamp}.json").read_text())["items"]
    assert "APIServer" in {item["locator"]["type"] for item in items}
