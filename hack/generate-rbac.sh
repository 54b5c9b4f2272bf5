#!/usr/bin/env bash
# Generates the chart's RBAC from the +kubebuilder:rbac markers next to the code that
# needs each permission, into DIR (default charts/tailor/rbac): core/ (the
# controllers, every install), and one directory per cloud provider, which the chart
# adds for the provider it runs. Cluster-wide rules become the chart's ClusterRole,
# rules with namespace=tailor its Role in the release's namespace.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-charts/tailor/rbac}
gen=${CONTROLLER_GEN:-bin/controller-gen}
"$gen" rbac:roleName=tailor paths=./pkg/controllers/... paths=./pkg/operator/... paths=./pkg/state/... \
  output:rbac:artifacts:config="$out/core"
for p in sim aws; do
  "$gen" rbac:roleName="tailor-$p" paths="./pkg/cloudprovider/$p/..." output:rbac:artifacts:config="$out/$p"
done
