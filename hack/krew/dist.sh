#!/usr/bin/env bash
# Builds the kubectl-runbook release archives (one tar.gz per platform of
# hack/krew/runbook.yaml, reproducible: fixed times, owners and order) into
# DIR and renders DIR/runbook.yaml, the krew manifest, with their sha256.
# Usage: hack/krew/dist.sh VERSION DIR
set -euo pipefail
version=$1
out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
manifest=$(sed -e '/^#/d' -e "s/\${VERSION}/$version/g" "$root/hack/krew/runbook.yaml")
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64; do
  os=${platform%/*} arch=${platform#*/}
  exe=kubectl-runbook; [ "$os" = windows ] && exe=kubectl-runbook.exe
  stage=$(mktemp -d)
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags="-s -w" -o "$stage/$exe" ./cmd/kubectl-runbook)
  cp "$root/docs/plugin.md" "$stage/README.md"
  archive=$out/kubectl-runbook_${version}_${os}_${arch}.tar.gz
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$stage" -cf - "$exe" README.md | gzip -n > "$archive"
  rm -rf "$stage"
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  manifest=${manifest//\$\{SHA256_${os}_${arch}\}/$sum}
  echo "$archive $sum"
done
printf '%s\n' "$manifest" > "$out/runbook.yaml"
echo "wrote $out/runbook.yaml"
