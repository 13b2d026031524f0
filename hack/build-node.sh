#!/usr/bin/env bash
# Builds what the local cluster's real node runs into bin/node/: kubelet and
# kube-proxy (the control plane's Kubernetes module, hack/k8s), containerd, its
# runc shim and ctr (hack/containerd), crictl (cri-tools), CoreDNS (hack/coredns). runc (built with
# seccomp), the CNI plugins, iptables and conntrack come from Debian: a runc
# built by `go install` has no seccomp, and Debian's plugins are the ones the
# node was measured with. Each binary is rebuilt only when it is missing or its
# pinned version changed (a .version stamp sits beside it).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${NODE_BIN_DIR:-$root/bin/node}
modversion() { # module-dir module-path -> the version its go.mod requires
  awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { print $NF; exit }' "$root/$1/go.mod"
}
K8S_VERSION=$(modversion hack/k8s k8s.io/kubernetes)
CONTAINERD_VERSION=$(modversion hack/containerd github.com/containerd/containerd/v2)
COREDNS_VERSION=$(modversion hack/coredns github.com/coredns/coredns)
CRI_TOOLS_VERSION=v1.37.0
DEBIAN_PACKAGES=(runc containernetworking-plugins iptables conntrack)
mkdir -p "$out"

step() { printf '==> %-34s %s\n' "$1" "$2"; }
current() { [ -x "$out/$1" ] && [ "$(cat "$out/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$out/$1.version"; }
timed() { # name command... : runs the build and says how long it took
  local t0=$SECONDS
  "${@:2}"
  step "$1" "built in $((SECONDS - t0)) s"
}

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "apt: ${missing[*]}" "installing (the node's runtime and network tools)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing Debian packages for the real node: ${missing[*]} (apt-get install them as root)" >&2
    exit 1
  fi
fi

build_date=$(date -u -d @0 +%Y-%m-%dT%H:%M:%SZ)
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
ctr_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
for name in containerd containerd-shim-runc-v2 ctr; do
  if current "$name" "$CONTAINERD_VERSION"; then step "$name $CONTAINERD_VERSION" "cached"; continue; fi
  step "$name $CONTAINERD_VERSION" "building (the node's container runtime)"
  timed "$name" bash -c "cd '$root/hack/containerd' && CGO_ENABLED=0 go build -trimpath -ldflags '$ctr_ldflags' -o '$out/$name' github.com/containerd/containerd/v2/cmd/$name"
  stamp "$name" "$CONTAINERD_VERSION"
done

if current crictl "$CRI_TOOLS_VERSION"; then step "crictl $CRI_TOOLS_VERSION" "cached"; else
  step "crictl $CRI_TOOLS_VERSION" "building (inspects the node's containers)"
  timed crictl env CGO_ENABLED=0 GOBIN="$out" GOFLAGS= go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"
  stamp crictl "$CRI_TOOLS_VERSION"
fi
if current coredns "$COREDNS_VERSION"; then step "coredns $COREDNS_VERSION" "cached"; else
  step "coredns $COREDNS_VERSION" "building (the cluster DNS of the real node's pods)"
  timed coredns bash -c "cd '$root/hack/coredns' && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$out/coredns' github.com/coredns/coredns"
  stamp coredns "$COREDNS_VERSION"
fi

# CGO_ENABLED=0 like the control plane, so the kubelet reuses its build cache.
for name in kubelet kube-proxy; do
  if current "$name" "$K8S_VERSION"; then step "$name $K8S_VERSION" "cached"; continue; fi
  step "$name $K8S_VERSION" "building (the real node's agent; minutes cold, less after the control plane)"
  timed "$name" bash -c "cd '$root/hack/k8s' && CGO_ENABLED=0 go build -trimpath -ldflags '$k8s_ldflags' -o '$out/$name' k8s.io/kubernetes/cmd/$name"
  stamp "$name" "$K8S_VERSION"
done

step "done" "binaries in $out; runc and CNI plugins from Debian"
