#!/bin/bash
# prober-gather: after the test, whatever its outcome, before the cluster is torn down
# (deploy/README.md, "In a CI job"). Two parts:
#   collect DIR   every prober pod's container logs, and the previous container's where one
#                 restarted, into DIR/pods/ (oc logs: the cluster under test);
#   judge DIR     `prober analyze --pod-logs` over the probers' logs in DIR/pods/ into DIR,
#                 `prober export` of the summaries into DIR/rows.jsonl (no cluster needed).
# Run with no arguments (as ci-operator does) it does both into ${ARTIFACT_DIR}/prober;
# `prober-gather-commands.sh judge DIR` runs the second part alone (tests/deploy/test_ci.py).
# Best effort: nothing the prober or the cluster gets wrong fails the step, but for a failed
# verdict of the analysis when PROBER_GATE is "true".
set -o nounset -o errexit -o pipefail

namespace=prober

warn() {
    echo "prober-gather: $*" >&2
}

# The run labels `prober export` takes, from the cluster where the job did not set them.
cluster_labels() {
    local version history=()
    if [[ -z ${PROBER_RELEASE:-} ]]; then
        version=$(oc get clusterversion version -o jsonpath='{.status.desired.version}') || true
        if [[ $version =~ ^([0-9]+\.[0-9]+) ]]; then
            PROBER_RELEASE=${BASH_REMATCH[1]}
        fi
    fi
    if [[ -z ${PROBER_UPGRADE:-} ]]; then
        read -r -a history < <(oc get clusterversion version \
            -o jsonpath='{.status.history[*].version}' || true) || true
        if [[ ${#history[@]} -gt 0 ]]; then
            PROBER_UPGRADE=false
            [[ ${#history[@]} -eq 1 ]] || PROBER_UPGRADE=true
        fi
    fi
    if [[ -z ${PROBER_NETWORK_TYPE:-} ]]; then
        PROBER_NETWORK_TYPE=$(oc get network.config cluster -o jsonpath='{.status.networkType}') ||
            true
    fi
    if [[ -z ${PROBER_TOPOLOGY:-} ]]; then
        PROBER_TOPOLOGY=$(oc get infrastructure cluster \
            -o jsonpath='{.status.controlPlaneTopology}') || true
    fi
}

collect() {
    local dir=$1 pods=$1/pods pod container restarts
    mkdir -p "$pods"
    if [[ -f ${SHARED_DIR:-}/prober-deploy.env ]]; then
        cp "${SHARED_DIR}/prober-deploy.env" "$dir/"  # what prober-deploy deployed
    fi
    oc -n "$namespace" get pods -o wide -l app.kubernetes.io/name=prober > "$dir/pods.txt" ||
        warn "could not list the prober pods"
    oc -n "$namespace" get events > "$dir/events.txt" || warn "could not list the events"
    # Pods evicted and deleted during the test (a drained node's) are gone with their logs.
    for pod in $(oc -n "$namespace" get pods -l app.kubernetes.io/name=prober \
        -o jsonpath='{.items[*].metadata.name}'); do
        while read -r container restarts; do
            oc -n "$namespace" logs "$pod" -c "$container" > "$pods/${pod}_${container}.log" ||
                warn "no log of $pod/$container"
            if [[ $restarts -gt 0 ]]; then
                oc -n "$namespace" logs --previous "$pod" -c "$container" \
                    > "$pods/${pod}_${container}.previous.log" ||
                    warn "no previous log of $pod/$container"
            fi
        done < <(oc -n "$namespace" get pod "$pod" -o \
            jsonpath='{range .status.containerStatuses[*]}{.name}{" "}{.restartCount}{"\n"}{end}')
    done
    cluster_labels
}

# 0: analysed, every verdict passed (or nothing to judge); 1: a verdict failed; 2: the
# prober could not analyse or export what was collected.
judge() {
    local dir=$1 logs=() log status=0
    local analyze=(prober analyze --pod-logs --out "$dir") labels=()
    # The daemon containers' logs (`prober`, in every `prober run` overlay): the audit
    # follower's and the kube-rbac-proxy's hold no event records. A log the kubelet rotated
    # begins inside a run, and one of a container that died early holds none: `prober analyze
    # --pod-logs` skips and counts those parts itself.
    for log in "$dir"/pods/*_prober.log "$dir"/pods/*_prober.previous.log; do
        if [[ -f $log ]]; then logs+=("$log"); fi
    done
    if [[ ${#logs[@]} -eq 0 ]]; then
        warn "no prober pod log with event records in $dir/pods: nothing to judge"
        return 0
    fi
    if [[ -n ${PROBER_THRESHOLDS:-} ]]; then
        if [[ -f $PROBER_THRESHOLDS ]]; then
            analyze+=(--thresholds "$PROBER_THRESHOLDS")
        else
            warn "PROBER_THRESHOLDS: no file $PROBER_THRESHOLDS; judging without thresholds"
        fi
    fi
    "${analyze[@]}" "${logs[@]}" 2>&1 | tee "$dir/analyze.log" || status=$?
    if [[ $status -gt 1 ]]; then
        warn "prober analyze exited $status (see analyze.log)"
        return 2
    fi
    [[ -z ${JOB_NAME:-} ]] || labels+=(--label "job_name=$JOB_NAME")
    [[ -z ${BUILD_ID:-} ]] || labels+=(--label "job_run_id=$BUILD_ID")
    [[ -z ${PROBER_RELEASE:-} ]] || labels+=(--label "release=$PROBER_RELEASE")
    [[ -z ${PROBER_UPGRADE:-} ]] || labels+=(--label "upgrade=$PROBER_UPGRADE")
    [[ -z ${PROBER_NETWORK_TYPE:-} ]] || labels+=(--label "network_type=$PROBER_NETWORK_TYPE")
    [[ -z ${PROBER_TOPOLOGY:-} ]] || labels+=(--label "topology=$PROBER_TOPOLOGY")
    if ! prober export "$dir" "${labels[@]}" -o "$dir/rows.jsonl"; then
        warn "prober export failed"
        return 2
    fi
    # OpenShift CI's own files, where its tools look (docs/ci-formats.md): the monitor
    # intervals (Sippy), backend-disruption (ci-tools' BackendDisruption table) and autodl
    # (ci-data-loader), at the top of the artifacts, beside origin's.
    if ! prober origin "$dir" "${labels[@]}" --out "$(dirname "$dir")"; then
        warn "prober origin failed"
        return 2
    fi
    return "$status"
}

# The step's exit status from judge's: only a failed verdict, and only when gating.
verdict() {
    local status=$1
    if [[ $status -eq 1 && ${PROBER_GATE:-false} == true ]]; then
        warn "a verdict failed, and PROBER_GATE is true"
        return 1
    fi
    return 0
}

main() {
    local dir=${ARTIFACT_DIR}/prober status=0
    mkdir -p "$dir"
    if [[ -n ${KUBECONFIG:-} ]]; then
        collect "$dir" || warn "collection incomplete"
    else
        warn "no KUBECONFIG: nothing collected"
    fi
    judge "$dir" || status=$?
    verdict "$status"
}

case ${1:-} in
    "") main ;;
    judge)
        status=0
        judge "${2:?judge DIR: the directory holding pods/}" || status=$?
        verdict "$status"
        ;;
    *)
        warn "usage: $0 [judge DIR]"
        exit 2
        ;;
esac
