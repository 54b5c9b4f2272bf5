#!/usr/bin/env bash
# Regenerates deepcopy functions and CRDs in a scratch copy of the module and fails,
# showing the difference, when the committed files are stale. Fix with `make generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp go.mod go.sum "$scratch/"
mkdir -p "$scratch/hack" "$scratch/config/crd"
cp -r api "$scratch/"
cp hack/boilerplate.go.txt "$scratch/hack/"
(cd "$scratch" && "$root/bin/controller-gen" object:headerFile=hack/boilerplate.go.txt paths=./api/... \
  && "$root/bin/controller-gen" crd paths=./api/... output:crd:artifacts:config=config/crd)
go run ./hack/crdpatch "$scratch/config/crd"
stale=0
diff -ru api "$scratch/api" || stale=1
for f in config/crd/*.yaml "$scratch"/config/crd/*.yaml; do
  name=$(basename "$f")
  diff -u "config/crd/$name" "$scratch/config/crd/$name" || stale=1
done
# The chart ships the CRDs as they are.
for f in config/crd/*.yaml; do
  diff -u "$f" "charts/tailor-crd/templates/$(basename "$f")" || stale=1
done
[ "$(ls charts/tailor-crd/templates/*.yaml | wc -l)" = "$(ls config/crd/*.yaml | wc -l)" ] || { echo "charts/tailor-crd/templates holds other files than config/crd's CRDs" >&2; stale=1; }
# The chart's RBAC, from the +kubebuilder:rbac markers.
CONTROLLER_GEN="$root/bin/controller-gen" bash hack/generate-rbac.sh "$scratch/rbac"
diff -ru charts/tailor/rbac "$scratch/rbac" || stale=1
if [ "$stale" = 1 ]; then
  echo "generated files are stale: run \`make generate\` and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
