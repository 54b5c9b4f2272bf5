#!/usr/bin/env bash
# Builds the binaries the tests, the sandbox and code generation need into bin/, from
# the Go module proxy at pinned versions. A binary already built from the same pins is
# skipped, so a second run costs a second.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/bin"
mkdir -p "$bin"

KWOK_VERSION=v0.8.0
CONTROLLER_TOOLS_VERSION=v0.19.0

# stamp NAME PIN: the pin a binary was built from, so a changed pin rebuilds it.
up_to_date() { [ -x "$bin/$1" ] && [ -f "$bin/.$1.pin" ] && [ "$(cat "$bin/.$1.pin")" = "$2" ]; }
mark() { printf '%s' "$2" > "$bin/.$1.pin"; }

k8s_pin=$(cat hack/k8s/go.mod hack/k8s/go.sum | sha256sum | cut -c1-16)
build_k8s() { # NAME PACKAGE
  local name=$1 pkg=$2
  if up_to_date "$name" "$k8s_pin"; then echo "tools: $name is up to date"; return; fi
  echo "tools: building $name from $pkg (hack/k8s) ..."
  local start=$SECONDS
  (cd hack/k8s && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$bin/$name" "$pkg")
  mark "$name" "$k8s_pin"
  echo "tools: built $name in $((SECONDS - start))s"
}
install_at() { # NAME PACKAGE@VERSION
  local name=$1 ref=$2
  if up_to_date "$name" "$ref"; then echo "tools: $name is up to date"; return; fi
  echo "tools: building $name from $ref ..."
  local start=$SECONDS
  GOBIN="$bin" CGO_ENABLED=0 go install -trimpath -ldflags=-s "$ref"
  mark "$name" "$ref"
  echo "tools: built $name in $((SECONDS - start))s"
}

build_k8s etcd go.etcd.io/etcd/server/v3
build_k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build_k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build_k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
install_at kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
install_at controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"

# kwok's stage configs ship in its module: nodes turn Ready at once and keep a lease
# (so the node lifecycle controller never marks them unreachable), pods run at once.
stages="$bin/kwok-stages"
if [ ! -f "$stages/.pin" ] || [ "$(cat "$stages/.pin")" != "$KWOK_VERSION-2" ]; then
  dir=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "tools: cannot locate sigs.k8s.io/kwok@$KWOK_VERSION in the module cache" >&2; exit 1; }
  rm -rf "$stages"; mkdir -p "$stages"
  for set in node/fast node/heartbeat-with-lease pod/fast; do
    for f in "$dir/kustomize/stage/$set"/*.yaml; do
      case "$(basename "$f")" in kustomization.yaml) continue ;; esac
      cp "$f" "$stages/$(basename "$f")"
    done
  done
  chmod -R u+w "$stages"
  printf '%s' "$KWOK_VERSION-2" > "$stages/.pin"
fi
echo "tools: all built in $bin"
