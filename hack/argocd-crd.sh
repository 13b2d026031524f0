#!/usr/bin/env bash
# Writes Argo CD's Application CRD into test/testdata/crds/, taken from the
# pinned Argo CD module's source (manifests/crds/application-crd.yaml, which
# Argo CD itself generates with controller-gen from those types).
# It is not generated here: the types of pkg/apis/application/v1alpha1 import
# github.com/argoproj/argo-cd/gitops-engine, which the Argo CD module resolves
# only through a replace directive to its own subdirectory; a replace in a
# dependency is ignored, and no version of gitops-engine the module proxy
# serves builds with Go 1.26.8 (see the first lines of
# /work/.library/env/packages/go-partial.tsv), so the types cannot be
# type-checked outside Argo CD's own repository.
# Usage: hack/argocd-crd.sh VERSION
set -euo pipefail
version=$1
root=$(cd "$(dirname "$0")/.." && pwd)
module=github.com/argoproj/argo-cd/v3
out=$root/test/testdata/crds/argoproj.io_applications.yaml
dir=$(cd "$root" && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ]; then
  echo "argocd-crd: could not download $module@$version" >&2
  exit 1
fi
{
  echo "# Copied by hack/argocd-crd.sh from $module@$version (manifests/crds/application-crd.yaml); do not edit."
  cat "$dir/manifests/crds/application-crd.yaml"
} > "$out"
echo "wrote $out"
