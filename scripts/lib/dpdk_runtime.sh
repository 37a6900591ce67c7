# shellcheck shell=bash
# dpdk_runtime_dir_remove PREFIX: DPDK's EAL keeps a runtime directory per --file-prefix (under
# /run/dpdk as root, else $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk). conduitd removes its own when it
# exits; this removes what a daemon killed on purpose or by a failure left behind. Sourced by
# conduitd.sh and by the unit tests' tests/unit/daemon/common.sh.
dpdk_runtime_dir_remove() {
  local prefix=$1 parent
  [[ -n $prefix && $prefix != */* ]] || return 0
  for parent in /run/dpdk "${XDG_RUNTIME_DIR:-/nonexistent}/dpdk" /tmp/dpdk; do
    [[ -d $parent/$prefix ]] && rm -rf "${parent:?}/$prefix"
  done
  return 0
}
