#!/usr/bin/env bash
# Prints the main module's packages whose tests need no control plane and no tool
# from bin/: neither they nor their test files depend, even indirectly, on
# internal/testenv or internal/localcluster (which start kube-apiserver and etcd, or
# find bin/). `make test-unit` runs these.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... |
  awk -F'|' '
    { split($1, a, " "); pkg = a[1]; sub(/_test$/, "", pkg); sub(/\.test$/, "", pkg)
      if (!(pkg in needs)) needs[pkg] = 0
      if ($2 ~ /nodetailor\/tailor\/internal\/(testenv|localcluster)( |$)/ || pkg ~ /internal\/(testenv|localcluster)$/) needs[pkg] = 1 }
    END { for (p in needs) if (!needs[p]) print p }' |
  sort
