#!/usr/bin/env bash
# make demo: bring up the sandbox, run the seed example on it, and stop it again,
# whatever happens in between. CLOUD=aws runs it on the fake AWS account instead of
# the simulated cloud.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${TAILOR_SANDBOX_DIR:-${TMPDIR:-/tmp}/tailor-demo}"
cloud="${CLOUD:-sim}"
bin/tailor sandbox down --dir "$dir" >/dev/null 2>&1 || true
trap 'bin/tailor sandbox down --dir "$dir"' EXIT
bin/tailor sandbox up --dir "$dir" --cloud "$cloud"
bin/tailor sandbox demo --dir "$dir"
