#!/usr/bin/env bash
# Builds the local Kubernetes control plane from Go modules into bin/k8s/.
# Why from source: these machines reach only the Go module proxy, so envtest's
# and kind's binary downloads cannot work. Each binary is rebuilt only when it
# is missing or its pinned version changed (a .version stamp sits beside it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${K8S_BIN_DIR:-$root/bin/k8s}
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
mkdir -p "$out"

# One line per step: what, why, roughly how long (2 cores, cold Go cache).
step() { printf '==> %-26s %s\n' "$1" "$2"; }

current() { # name version -> 0 if bin/k8s/name exists and was built at version
  [ -x "$out/$1" ] && [ "$(cat "$out/$1.version" 2>/dev/null)" = "$2" ]
}
stamp() { echo "$2" >"$out/$1.version"; }

build_date=$(date -u -d @0 +%Y-%m-%dT%H:%M:%SZ)
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

declare -A eta=([kube-apiserver]="~5-6 min cold" [kube-controller-manager]="~3-4 min (shares the apiserver's build cache)"
  [kube-scheduler]="~30 s" [kubectl]="~30 s")
for name in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  if current "$name" "$K8S_VERSION"; then step "$name $K8S_VERSION" "cached"; continue; fi
  step "$name $K8S_VERSION" "building (control plane for envtest and the simulated cluster, ${eta[$name]})"
  (cd "$root/hack/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name" "k8s.io/kubernetes/cmd/$name")
  stamp "$name" "$K8S_VERSION"
done

if current etcd "$ETCD_VERSION"; then step "etcd $ETCD_VERSION" "cached"; else
  step "etcd $ETCD_VERSION" "building (the apiserver's storage, ~40 s)"
  (cd "$root/hack/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  stamp etcd "$ETCD_VERSION"
fi

for name in kwok kwokctl; do
  if current "$name" "$KWOK_VERSION"; then step "$name $KWOK_VERSION" "cached"; continue; fi
  step "$name $KWOK_VERSION" "building (fake nodes whose pods go Running, ~1 min)"
  CGO_ENABLED=0 GOBIN="$out" GOFLAGS= go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/$name@$KWOK_VERSION"
  stamp "$name" "$KWOK_VERSION"
done
step "done" "binaries in $out"
