#!/bin/bash
# prober-deploy: the apiserver load-balancer prober on the cluster under test, before the
# test starts (deploy/README.md, "In a CI job"). Applies deploy/namespace, then each overlay
# of PROBER_OVERLAYS with this job's images, then deploy/prometheus/ci, and waits for the
# rollouts. A manifest the cluster refuses fails the step (it would in every job: rehearsals
# catch it); a prober not ready in time does not, since the prober must not fail the job it
# measures: it is reported here and in ${SHARED_DIR}/prober-deploy.env.
set -o nounset -o errexit -o pipefail

# oc talks to the cluster under test through the kubeconfig ci-operator provides.
export KUBECONFIG="${KUBECONFIG:?the kubeconfig of the cluster under test, which ci-operator sets}"
namespace=prober
deploy_dir=${PROBER_DEPLOY_DIR:-deploy}
overlays=${PROBER_OVERLAYS:-pod-network host-network localhost audit}

# `kustomize images:` fields for a pull spec: name@digest, or name:tag, or a bare name.
image_fields() {
    local spec=$1
    if [[ $spec == *@* ]]; then
        printf 'newName: %s\n    digest: %s\n' "${spec%@*}" "${spec#*@}"
    elif [[ ${spec##*/} == *:* ]]; then
        printf 'newName: %s\n    newTag: %s\n' "${spec%:*}" "${spec##*:}"
    else
        printf 'newName: %s\n' "$spec"
    fi
}

# A kustomization in $1 of overlay $2 with this job's images: the overlays name the released
# prober image and a placeholder kube-rbac-proxy (deploy/overlays/*/kustomization.yaml).
# kustomize takes no absolute path as a resource, hence the relative one.
write_kustomization() {
    local dir=$1 overlay=$2 prober_image=$3 proxy_image=$4 target
    target=$(realpath --relative-to="$dir" "$deploy_dir/overlays/$overlay")
    {
        printf 'resources:\n  - %s\nimages:\n' "$target"
        if [[ -n $prober_image ]]; then
            printf '  - name: ghcr.io/example/prober\n    %s\n' "$(image_fields "$prober_image")"
        fi
        printf '  - name: quay.io/openshift/origin-kube-rbac-proxy\n    %s\n' \
            "$(image_fields "$proxy_image")"
    } > "$dir/kustomization.yaml"
}

# The kube-rbac-proxy image of the cluster's own release, which node-exporter runs.
cluster_proxy_image() {
    oc -n openshift-monitoring get daemonset node-exporter \
        -o jsonpath='{.spec.template.spec.containers[?(@.name=="kube-rbac-proxy")].image}'
}

# The nodes the LB probers (DaemonSets with nodeSelector prober/node=true) run on: those of
# PROBER_NODES, or the first two workers (on a compact cluster the masters are workers too).
# Two nodes: while one reboots in the upgrade, the other measures.
label_nodes() {
    local nodes=${PROBER_NODES:-} workers
    if [[ -z $nodes ]]; then
        # All of oc's output, then the first two: `oc | head -n 2` would let head close the
        # pipe early, and under pipefail oc's SIGPIPE (141) fails the step on a big cluster.
        workers=$(oc get nodes -l node-role.kubernetes.io/worker -o name)
        nodes=$(sed -n '1,2p' <<< "$workers")
    fi
    [[ -n $nodes ]] || { echo "prober-deploy: no worker node to label prober/node=true" >&2; return; }
    local node
    for node in $nodes; do
        oc label --overwrite node "${node#node/}" prober/node=true
    done
}

main() {
    local prober_image=${PROBER_IMAGE:-} proxy_image=${KUBE_RBAC_PROXY_IMAGE:-}
    local overlay workload not_ready=()
    [[ -n $proxy_image ]] || proxy_image=$(cluster_proxy_image)
    [[ -n $proxy_image ]] || { echo "prober-deploy: no kube-rbac-proxy image found" >&2; exit 1; }
    for overlay in $overlays; do
        [[ -d $deploy_dir/overlays/$overlay ]] || {
            echo "prober-deploy: PROBER_OVERLAYS: no overlay $overlay in $deploy_dir/overlays" >&2
            exit 1
        }
    done

    # Once, on its own: no overlay creates or deletes the namespace.
    oc apply -k "$deploy_dir/namespace"
    label_nodes
    # The pod-network overlay's external API URL; harmless for the others.
    oc -n "$namespace" create configmap prober-cluster --dry-run=client -o yaml \
        --from-literal=api-url="$(oc get infrastructure cluster -o jsonpath='{.status.apiServerURL}')" |
        oc apply -f -
    work=$(mktemp -d)  # global: the trap runs after main has returned
    trap 'rm -rf "$work"' EXIT
    for overlay in $overlays; do
        mkdir "$work/$overlay"
        write_kustomization "$work/$overlay" "$overlay" "$prober_image" "$proxy_image"
        oc apply -k "$work/$overlay"
    done
    # Every alert at severity info: origin fails a job on new alerts above info.
    oc apply -k "$deploy_dir/prometheus/ci"

    for overlay in $overlays; do
        for workload in $(oc -n "$namespace" get deployment,daemonset -o name \
            -l "app.kubernetes.io/name=prober,app.kubernetes.io/component=$overlay"); do
            if ! oc -n "$namespace" rollout status "$workload" \
                --timeout="${PROBER_ROLLOUT_TIMEOUT:-10m}"; then
                echo "prober-deploy: $workload not ready; the analysis will miss what it missed" >&2
                oc -n "$namespace" get pods -o wide \
                    -l "app.kubernetes.io/component=$overlay" >&2 || true
                not_ready+=("$workload")
            fi
        done
    done

    # For prober-gather and whoever reads the job's shared directory.
    {
        printf 'PROBER_DEPLOYED_OVERLAYS=%q\n' "$overlays"
        printf 'PROBER_DEPLOYED_IMAGE=%q\n' "${prober_image:-released}"
        printf 'PROBER_DEPLOYED_PROXY_IMAGE=%q\n' "$proxy_image"
        printf 'PROBER_DEPLOYED_AT=%q\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        printf 'PROBER_NOT_READY=%q\n' "${not_ready[*]}"
    } > "${SHARED_DIR}/prober-deploy.env"
    cat "${SHARED_DIR}/prober-deploy.env"
}

main "$@"
