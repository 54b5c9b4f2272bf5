#!/usr/bin/env bash
# Builds the binaries the tests, the sandbox and code generation need into bin/, from
# the Go module proxy at pinned versions. Nothing else can be fetched (no image pulls,
# no release downloads), so the control plane is compiled from source: a first run
# downloads about 155 MB of modules and compiles about 3,300 packages, some 9 CPU-minutes
# (about 4.5 minutes on 2 idle cores, two to five times that on a busy machine). A
# binary already built from the same pins is skipped, so a second run costs a second.
#
#   hack/tools.sh [NAME...]
#
# NAME is etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok (with its
# stage configs), controller-gen or eks-node-referee (the fake AWS's judge of whether
# a node would join: hack/eksnode) or karpenter-reference (the CRDs Karpenter's AWS
# provider publishes, the referee of Tailor's CRD validation: config/crd) or chromium
# (Debian's headless browser, which the console's test drives: cmd/tailor; not built,
# installed with apt-get when /usr/bin/chromium is missing); control-plane is the five
# the sandbox, `make demo` and the end-to-end tests run; all (the default) is every one
# of these.
# karpenter-kwok (Karpenter's kwok controller from hack/karpenter, with Karpenter's
# CRDs in bin/karpenter-crds, for the side-by-side benchmark: test/sidebyside) is
# built only when named: it is not in all, so neither `make tools` nor `make test`
# spends its build.
#
# The four control-plane binaries share most of their packages (2,442 in all, against
# 6,216 counted binary by binary); the missing ones are built by one `go build`, which
# compiles each shared package once. That measured as fast as four go builds one after
# another over the same build cache (which compile each once too), and it gives one
# count of packages to report. Go commands run one at a time: a go build already keeps
# both cores busy, and kwok's build beside it measured no faster (docs/development.md).
# While a build runs, the script says what it builds, how many of the packages it has
# to compile it has compiled, how long it has taken and how long that usually takes;
# on a terminal one line is redrawn in place, otherwise a line is printed every
# TAILOR_TOOLS_PROGRESS_EVERY seconds (30).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bin="$root/bin"
mkdir -p "$bin"

KWOK_VERSION=v0.8.0
# The Karpenter release docs/karpenter-compatibility.md is checked against.
KARPENTER_AWS_VERSION=v1.14.1
CONTROLLER_TOOLS_VERSION=v0.19.0

# How long a build usually takes on 2 cores with nothing else running, for the progress
# lines' estimate only (measured 2026-11-28, see docs/development.md): seconds to
# compile PACKAGES packages (an empty Go build cache, the modules already downloaded;
# kwok's and controller-gen's figures are for what is left after the control plane),
# and seconds when everything is cached (the link alone). A build with some packages
# cached is estimated by the share it compiles.
K8S_COLD_SECONDS=205 K8S_PACKAGES=2442 K8S_LINK_SECONDS=10
KWOK_COLD_SECONDS=56 KWOK_PACKAGES=719 KWOK_LINK_SECONDS=3
CONTROLLER_GEN_COLD_SECONDS=23 CONTROLLER_GEN_PACKAGES=155 CONTROLLER_GEN_LINK_SECONDS=3
REFEREE_COLD_SECONDS=150 REFEREE_PACKAGES=900 REFEREE_LINK_SECONDS=5
KARPENTER_COLD_SECONDS=170 KARPENTER_PACKAGES=1009 KARPENTER_LINK_SECONDS=5
# estimate COLD PACKAGES LINK TOTAL: the seconds a build compiling TOTAL packages takes.
estimate() { echo $(($3 + ($1 - $3) * $4 / $2)); }

every=${TAILOR_TOOLS_PROGRESS_EVERY:-30}
tty=false
if [ -t 1 ] && [ -z "${CI:-}" ] && [ "${TERM:-dumb}" != dumb ]; then tty=true; fi

k8s_tools="etcd kube-apiserver kube-scheduler kube-controller-manager"
k8s_pkg() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    *) echo "k8s.io/kubernetes/cmd/$1" ;;
  esac
}

want=" "
[ $# -gt 0 ] || set -- all
for arg in "$@"; do
  case $arg in
    all) want+="$k8s_tools kwok controller-gen eks-node-referee karpenter-reference chromium " ;;
    control-plane) want+="$k8s_tools kwok " ;;
    etcd | kube-apiserver | kube-scheduler | kube-controller-manager | kwok | controller-gen | eks-node-referee | karpenter-kwok | karpenter-reference | chromium) want+="$arg " ;;
    *) echo "tools: unknown tool $arg (want etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok, controller-gen, eks-node-referee, karpenter-kwok, karpenter-reference, chromium, control-plane or all)" >&2; exit 2 ;;
  esac
done
wants() { case $want in *" $1 "*) return 0 ;; esac; return 1; }

# The pin a binary was built from is kept beside it, so a changed pin rebuilds it.
up_to_date() { [ -x "$bin/$1" ] && [ -f "$bin/.$1.pin" ] && [ "$(cat "$bin/.$1.pin")" = "$2" ]; }
mark() { printf '%s' "$2" > "$bin/.$1.pin"; }
dur() { if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi; }
list() { local out="" n; for n in "$@"; do out+="${out:+, }$n"; done; printf '%s' "$out"; }

# Scratch space on the same file system as bin/, so finished binaries are moved in whole.
work=$(mktemp -d "$bin/.tools.XXXXXX")
job=""
cleanup() {
  if [ -n "$job" ]; then kill "$job" 2>/dev/null || true; wait "$job" 2>/dev/null || true; fi
  if $tty; then printf '\r\033[K'; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# watch WHAT LOG [COLD TOTAL]: waits for the background go command $job, whose output
# goes to LOG, saying what it does: downloading modules, or (with COLD and TOTAL, for a
# go build -v, which prints a line per package it compiles) compiling.
cols=""
if $tty; then cols=$( (stty size < /dev/tty) 2>/dev/null | awk '{print $2}' || true); fi
watch() {
  local what=$1 log=$2 cold=${3:-} total=${4:-} start=$SECONDS last=$SECONDS n status elapsed current
  while kill -0 "$job" 2>/dev/null; do
    sleep 1
    elapsed=$(dur $((SECONDS - start)))
    current=""
    if grep -q '^go: downloading' "$log" && ! grep -Eq '^[[:alnum:]._~/-]+$' "$log"; then
      status="downloading modules for $what ($elapsed elapsed, $(grep -c '^go: downloading' "$log") modules so far; a first run only)"
    elif [ -z "$cold" ]; then
      status="working out what $what needs ($elapsed elapsed)"
    elif n=$(grep -Ec '^[[:alnum:]._~/-]+$' "$log" || true); [ "$n" -ge "$total" ]; then
      status="linking $what ($elapsed elapsed, $total packages compiled; usually ~$(dur "$cold") in all on 2 idle cores)"
    elif [ $((n * 10)) -lt "$total" ]; then
      status="building $what ($elapsed elapsed, $n of $total packages compiled; usually ~$(dur "$cold") on 2 idle cores)"
    else # packages go at a fairly even pace (docs/development.md)
      status="building $what ($elapsed elapsed, $n of $total packages compiled, ~$(dur $(((SECONDS - start) * (total - n) / n))) left at this pace; usually ~$(dur "$cold") on 2 idle cores)"
      current=$(tail -n 1 "$log")
    fi
    if $tty; then
      status="tools: $status${current:+ $current}"
      printf '\r\033[K%s' "${status:0:${cols:-100}-1}"
    elif [ $((SECONDS - last)) -ge "$every" ]; then
      echo "tools: still $status"
      last=$SECONDS
    fi
  done
  if $tty; then printf '\r\033[K'; fi
  local rc=0
  wait "$job" || rc=$?
  job=""
  if [ "$rc" -ne 0 ]; then
    echo "tools: building $what failed:" >&2
    grep -Ev '^[[:alnum:]._~/-]+$' "$log" | tail -n 60 >&2
    exit "$rc"
  fi
}

# run LOG CMD...: starts a go command in the background, its output in LOG.
run() { local log=$1; shift; "$@" > "$log" 2>&1 & job=$!; }

# The control-plane binaries from hack/k8s, which pins k8s.io/kubernetes and etcd.
k8s_pin=$(cat hack/k8s/go.mod hack/k8s/go.sum | sha256sum | cut -c1-16)
todo_k8s="" pkgs=""
for name in $k8s_tools; do
  wants "$name" || continue
  if up_to_date "$name" "$k8s_pin"; then echo "tools: $name is up to date"; continue; fi
  todo_k8s+="$name "
  pkgs+="$(k8s_pkg "$name") "
done
todo_go=""
wants kwok && { up_to_date kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" && echo "tools: kwok is up to date" || todo_go+="kwok "; }
# The referee is our own code in its own module: its pin is its sources.
referee_pin=$(cat hack/eksnode/go.mod hack/eksnode/go.sum hack/eksnode/*.go hack/eksnode/internal/nocontainerd/go.mod | sha256sum | cut -c1-16)
wants eks-node-referee && { up_to_date eks-node-referee "$referee_pin" && echo "tools: eks-node-referee is up to date" || todo_go+="eks-node-referee "; }
# Karpenter's kwok controller: Karpenter at the version hack/karpenter pins, and our
# small main around it.
karpenter_pin=$(cat hack/karpenter/go.mod hack/karpenter/go.sum hack/karpenter/*.go | sha256sum | cut -c1-16)
wants karpenter-kwok && { up_to_date karpenter-kwok "$karpenter_pin" && [ -f "$bin/karpenter-crds/.pin" ] && [ "$(cat "$bin/karpenter-crds/.pin")" = "$karpenter_pin" ] && echo "tools: karpenter-kwok is up to date" || todo_go+="karpenter-kwok "; }
wants controller-gen && { up_to_date controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" && echo "tools: controller-gen is up to date" || todo_go+="controller-gen "; }

if [ -n "$todo_k8s$todo_go" ]; then
  # shellcheck disable=SC2086
  echo "tools: building $(list $todo_k8s $todo_go) from source (the Go module proxy is all this can fetch)"
  # An estimate of the whole when the four control-plane binaries are all missing, as on
  # a first run (otherwise each step says what it has to compile, and how long that takes).
  case $todo_k8s in "etcd kube-apiserver kube-scheduler kube-controller-manager ")
    cold=$K8S_COLD_SECONDS
    case $todo_go in *kwok*) cold=$((cold + KWOK_COLD_SECONDS)) ;; esac
    case $todo_go in *controller-gen*) cold=$((cold + CONTROLLER_GEN_COLD_SECONDS)) ;; esac
    case $todo_go in *eks-node-referee*) cold=$((cold + REFEREE_COLD_SECONDS)) ;; esac
    echo "tools: with an empty Go build cache that takes about $(dur "$cold") on 2 idle cores, longer on a busy machine, and a first run downloads the modules too"
    ;;
  esac
fi
total_start=$SECONDS

if [ -n "$todo_k8s" ]; then
  # shellcheck disable=SC2086
  set -- $todo_k8s
  what=$(list "$@")
  start=$SECONDS
  # What it would run, which downloads the modules on a first run: a compile per
  # package not in the Go build cache yet.
  # shellcheck disable=SC2086
  run "$work/k8s-n.log" bash -c "cd hack/k8s && CGO_ENABLED=0 exec go build -n -trimpath -ldflags=-s -o '$work/k8s/' $pkgs"
  watch "$what" "$work/k8s-n.log"
  total=$(grep -c '/compile -o ' "$work/k8s-n.log" || true)
  cold=$(estimate $K8S_COLD_SECONDS $K8S_PACKAGES $((K8S_LINK_SECONDS * $# / 4)) "$total")
  echo "tools: compiling $what (hack/k8s: k8s.io/kubernetes and etcd) in one go build: $total packages not in the Go build cache yet, usually ~$(dur "$cold") on 2 idle cores ..."
  mkdir -p "$work/k8s"
  # shellcheck disable=SC2086
  run "$work/k8s.log" bash -c "cd hack/k8s && CGO_ENABLED=0 exec go build -v -trimpath -ldflags=-s -o '$work/k8s/' $pkgs"
  watch "$what" "$work/k8s.log" "$cold" "$total"
  for name in $todo_k8s; do
    pkg=$(k8s_pkg "$name")
    out=${pkg##*/}
    case $out in v[0-9]*) pkg=${pkg%/*}; out=${pkg##*/} ;; esac # go.etcd.io/etcd/server/v3 builds "server"
    mv -f "$work/k8s/$out" "$bin/$name"
    mark "$name" "$k8s_pin"
  done
  echo "tools: built $what in $(dur $((SECONDS - start)))"
fi

# install_at NAME PACKAGE@VERSION COLD PACKAGES LINK: go install, outside any module of
# ours; COLD PACKAGES LINK as above.
install_at() {
  local name=$1 ref=$2 cold=$3 packages=$4 link=$5 start=$SECONDS total
  echo "tools: building $name from $ref ..."
  # What it would run, which downloads its modules: a compile per package not in the
  # Go build cache yet.
  run "$work/$name-n.log" env CGO_ENABLED=0 go install -n -trimpath -ldflags=-s "$ref"
  watch "$name" "$work/$name-n.log"
  total=$(grep -c '/compile -o ' "$work/$name-n.log" || true)
  cold=$(estimate "$cold" "$packages" "$link" "$total")
  echo "tools: compiling $name: $total packages not in the Go build cache yet, usually ~$(dur "$cold") on 2 idle cores ..."
  run "$work/$name.log" env GOBIN="$work/gobin" CGO_ENABLED=0 go install -v -trimpath -ldflags=-s "$ref"
  watch "$name" "$work/$name.log" "$cold" "$total"
  mv -f "$work/gobin/$name" "$bin/$name"
  mark "$name" "$ref"
  echo "tools: built $name in $(dur $((SECONDS - start)))"
}
case $todo_go in *kwok*) install_at kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" $KWOK_COLD_SECONDS $KWOK_PACKAGES $KWOK_LINK_SECONDS ;; esac
if case $todo_go in *eks-node-referee*) true ;; *) false ;; esac; then
  start=$SECONDS
  echo "tools: building eks-node-referee from hack/eksnode (nodeadm's API, the kubelet's config packages) ..."
  run "$work/referee-n.log" bash -c "cd hack/eksnode && CGO_ENABLED=0 exec go build -n -trimpath -ldflags=-s -o '$work/eks-node-referee' ."
  watch eks-node-referee "$work/referee-n.log"
  total=$(grep -c '/compile -o ' "$work/referee-n.log" || true)
  cold=$(estimate $REFEREE_COLD_SECONDS $REFEREE_PACKAGES $REFEREE_LINK_SECONDS "$total")
  echo "tools: compiling eks-node-referee: $total packages not in the Go build cache yet, usually ~$(dur "$cold") on 2 idle cores ..."
  run "$work/referee.log" bash -c "cd hack/eksnode && CGO_ENABLED=0 exec go build -v -trimpath -ldflags=-s -o '$work/eks-node-referee' ."
  watch eks-node-referee "$work/referee.log" "$cold" "$total"
  mv -f "$work/eks-node-referee" "$bin/eks-node-referee"
  mark eks-node-referee "$referee_pin"
  echo "tools: built eks-node-referee in $(dur $((SECONDS - start)))"
fi
if case $todo_go in *karpenter-kwok*) true ;; *) false ;; esac; then
  start=$SECONDS
  echo "tools: building karpenter-kwok from hack/karpenter (sigs.k8s.io/karpenter's operator, controllers and kwok cloud provider) ..."
  run "$work/karpenter-n.log" bash -c "cd hack/karpenter && CGO_ENABLED=0 exec go build -n -trimpath -ldflags=-s -o '$work/karpenter-kwok' ."
  watch karpenter-kwok "$work/karpenter-n.log"
  total=$(grep -c '/compile -o ' "$work/karpenter-n.log" || true)
  cold=$(estimate $KARPENTER_COLD_SECONDS $KARPENTER_PACKAGES $KARPENTER_LINK_SECONDS "$total")
  echo "tools: compiling karpenter-kwok: $total packages not in the Go build cache yet, usually ~$(dur "$cold") on 2 idle cores ..."
  run "$work/karpenter.log" bash -c "cd hack/karpenter && CGO_ENABLED=0 exec go build -v -trimpath -ldflags=-s -o '$work/karpenter-kwok' ."
  watch karpenter-kwok "$work/karpenter.log" "$cold" "$total"
  # Karpenter's CRDs (karpenter.sh NodePool, NodeClaim, NodeOverlay) and kwok's
  # KWOKNodeClass, from the same module version.
  dir=$(cd hack/karpenter && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
  [ -n "$dir" ] || { echo "tools: cannot locate sigs.k8s.io/karpenter in the module cache" >&2; exit 1; }
  rm -rf "$bin/karpenter-crds"; mkdir -p "$bin/karpenter-crds"
  cp "$dir"/pkg/apis/crds/karpenter.sh_*.yaml "$dir"/kwok/apis/crds/*.yaml "$bin/karpenter-crds/"
  chmod -R u+w "$bin/karpenter-crds"
  printf '%s' "$karpenter_pin" > "$bin/karpenter-crds/.pin"
  mv -f "$work/karpenter-kwok" "$bin/karpenter-kwok"
  mark karpenter-kwok "$karpenter_pin"
  echo "tools: built karpenter-kwok in $(dur $((SECONDS - start)))"
fi
case $todo_go in *controller-gen*) install_at controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" $CONTROLLER_GEN_COLD_SECONDS $CONTROLLER_GEN_PACKAGES $CONTROLLER_GEN_LINK_SECONDS ;; esac

# kwok's stage configs ship in its module: nodes turn Ready at once and keep a lease
# (so the node lifecycle controller never marks them unreachable), pods run at once.
stages="$bin/kwok-stages"
if wants kwok && { [ ! -f "$stages/.pin" ] || [ "$(cat "$stages/.pin")" != "$KWOK_VERSION-2" ]; }; then
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
# Karpenter's published CRDs (NodePool, NodeClaim, EC2NodeClass), as its AWS
# provider's module ships them: a download of about 3 MB, nothing built.
reference="$bin/karpenter-reference"
if wants karpenter-reference && { [ ! -f "$reference/.pin" ] || [ "$(cat "$reference/.pin")" != "$KARPENTER_AWS_VERSION" ]; }; then
  dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/aws/karpenter-provider-aws@$KARPENTER_AWS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "tools: cannot locate github.com/aws/karpenter-provider-aws@$KARPENTER_AWS_VERSION in the module cache" >&2; exit 1; }
  rm -rf "$reference"; mkdir -p "$reference"
  cp "$dir"/pkg/apis/crds/karpenter.sh_nodepools.yaml "$dir"/pkg/apis/crds/karpenter.sh_nodeclaims.yaml "$dir"/pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml "$reference/"
  chmod -R u+w "$reference"
  printf '%s' "$KARPENTER_AWS_VERSION" > "$reference/.pin"
  echo "tools: Karpenter's CRDs ($KARPENTER_AWS_VERSION) in $reference"
fi
# Debian's Chromium, which the console's browser test drives headless
# (cmd/tailor TestConsoleInBrowser): the one thing here that is not built from the Go
# module proxy. When /usr/bin/chromium is missing it is installed with apt-get (as
# root, as CI runs; the package lists are fetched first when apt knows no candidate
# for it). An install that fails is reported and the rest goes on: the browser test
# then fails saying chromium is missing, rather than skipping.
if wants chromium; then
  if [ -x /usr/bin/chromium ]; then
    echo "tools: chromium is installed ($(/usr/bin/chromium --version 2>/dev/null || echo '/usr/bin/chromium'))"
  elif ! command -v apt-get > /dev/null; then
    echo "tools: chromium: /usr/bin/chromium is missing and there is no apt-get to install it; the console's browser test (cmd/tailor) will fail until it is installed" >&2
  else
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo > /dev/null; then sudo="sudo"; else
        echo "tools: chromium: /usr/bin/chromium is missing and installing it needs root (apt-get install -y chromium); the console's browser test (cmd/tailor) will fail until it is installed" >&2
        sudo="none"
      fi
    fi
    if [ "$sudo" != none ]; then
      echo "tools: installing Debian's chromium with apt-get (for the console's browser test; about 100 MB, a first run only) ..."
      start=$SECONDS
      if ! apt-cache policy chromium 2> /dev/null | grep -q 'Candidate: [0-9]'; then
        $sudo apt-get update -qq > "$work/apt-update.log" 2>&1 || tail -n 20 "$work/apt-update.log" >&2
      fi
      if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium > "$work/apt-chromium.log" 2>&1; then
        echo "tools: installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium) in $(dur $((SECONDS - start)))"
      else
        tail -n 30 "$work/apt-chromium.log" >&2
        echo "tools: chromium: apt-get install -y chromium failed (above); the console's browser test (cmd/tailor) will fail until it is installed" >&2
      fi
    fi
  fi
fi
if [ -n "$todo_k8s$todo_go" ]; then
  echo "tools: built in $(dur $((SECONDS - total_start))); $(list $want) in $bin"
else
  echo "tools: $(list $want) up to date in $bin"
fi
