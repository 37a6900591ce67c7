# shellcheck shell=bash
# Shared set-up for the integration test scripts: locate the repository, load the libraries,
# skip (exit 77) when not root or a tool is missing.
set -euo pipefail
src=${CONDUIT_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# shellcheck source=../../scripts/lib/netns.sh
. "$src/scripts/lib/netns.sh"
# shellcheck source=../../scripts/lib/tcbpf.sh
. "$src/scripts/lib/tcbpf.sh"

fail() { echo "FAIL: $*"; exit 1; }

# need_obj PATH: the BPF object built by meson (empty when clang-14 was not found).
need_obj() {
  if [[ -z ${1:-} || ! -f $1 ]]; then
    echo "SKIP: BPF object '${1:-}' not built (clang-14 not found at configure time)"
    exit 77
  fi
}
