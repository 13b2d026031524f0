#!/usr/bin/env bash
# Builds the kubectl-runbook release archives (one tar.gz per platform,
# reproducible: fixed times, owners and order) into DIR and renders
# DIR/runbook.yaml, the krew manifest, with their sha256.
# Usage: [PLATFORMS="os/arch ..."] hack/krew/dist.sh VERSION DIR
# PLATFORMS defaults to every platform of hack/krew/runbook.yaml (a release);
# with a subset (the tests build the host's only) the rendered manifest lists
# exactly the platforms whose archives were built.
set -euo pipefail
version=$1
out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
template=$root/hack/krew/runbook.yaml
all=$(sed -n 's/.*matchLabels: {os: \([a-z0-9]*\), arch: \([a-z0-9]*\)}.*/\1\/\2/p' "$template")
platforms=${PLATFORMS:-$all}
for platform in $platforms; do
  grep -qx "$platform" <<<"$all" || { echo "dist.sh: $platform is not a platform of $template (one of: $(echo $all))" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
# The template without its comments and without the platform entries
# (a "  - selector:" line and the lines indented under it) not built.
manifest=$(sed -e '/^#/d' -e "s/\${VERSION}/$version/g" "$template" | awk -v keep="$platforms" '
  function flush() { if (inblock && (plat in want)) printf "%s", block; inblock = 0; block = ""; plat = "" }
  BEGIN { n = split(keep, k, /[ \n]+/); for (i = 1; i <= n; i++) if (k[i] != "") want[k[i]] = 1 }
  /^  - selector:/ { flush(); inblock = 1; block = $0 "\n"; next }
  inblock && /^    / {
    block = block $0 "\n"
    if (match($0, /os: [a-z0-9]+, arch: [a-z0-9]+/)) { s = substr($0, RSTART + 4, RLENGTH - 4); sub(/, arch: /, "/", s); plat = s }
    next
  }
  { flush(); print }
  END { flush() }')
for platform in $platforms; do
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
