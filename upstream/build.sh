#!/usr/bin/env bash
# Build upstream's binaries for the lab into upstream/bin/:
#   kube-apiserver  k8s.io/kubernetes v1.37.2 (cmd/kube-apiserver/app) + our hooks
#   etcd            go.etcd.io/etcd/server/v3 v3.7.0 (its root package is the main)
#   informer        reference client-go v0.37.2 Lease informer with JSON lines
# Go's build cache makes a warm run with no change take a few seconds.
# Env: GO (default: go), BIN (default: upstream/bin), GOFLAGS passes through.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${BIN:-$here/bin}"
GO="${GO:-go}"
export GOTOOLCHAIN=local # never fetch another toolchain: go.mod says go 1.26.0

die() { echo "upstream/build.sh: $*" >&2; exit 1; }

command -v "$GO" >/dev/null 2>&1 || die "no Go toolchain found ('$GO'); install Go >= 1.26"
gover="$("$GO" env GOVERSION 2>/dev/null)" || die "'$GO env GOVERSION' failed"
if [[ ! "$gover" =~ ^go([0-9]+)\.([0-9]+) ]] || (( BASH_REMATCH[1] < 1 || (BASH_REMATCH[1] == 1 && BASH_REMATCH[2] < 26) )); then
	die "Go >= 1.26 needed (k8s.io/kubernetes v1.37.2 declares go 1.26.0), found ${gover:-unknown}"
fi

cd "$here"
# Modules: a no-op when all are in the module cache, else fetched from GOPROXY.
if ! "$GO" mod download 2>/dev/null; then
	die "cannot download the Go modules from GOPROXY=$("$GO" env GOPROXY) (proxy unreachable or module missing); 'cd upstream && GOTOOLCHAIN=local go mod download' shows why"
fi

mkdir -p "$bin"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

build() { # name package [ldflags]
	local name="$1" pkg="$2" flags="${3:-}"
	local t0=$SECONDS
	"$GO" build -trimpath -buildvcs=false -ldflags "$flags" -o "$bin/$name" "$pkg"
	printf 'built %-15s %s (%s, %ds)\n' "$name" "$bin/$name" "$(du -h "$bin/$name" | cut -f1)" $((SECONDS - t0))
}

build kube-apiserver ./cmd/kube-apiserver "$ldflags"
build etcd go.etcd.io/etcd/server/v3 "-s -w"
build informer ./cmd/informer "-s -w"
"$bin/kube-apiserver" --version
