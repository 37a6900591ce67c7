# shellcheck shell=bash
# Shared by the tests that run one conduitd on a net_ring port (no root): a work directory, a
# clean-up trap that kills the daemon and every background job, failure output with the
# daemon's log, and the daemon's start-up. Source it, then:
#
#   daemon_start TAG [NAME]   write $dir/NAME.yaml (NAME default c; control socket $sock,
#                             address $addr, then $extra_policy if set) and start conduitd
#                             on it; pid = its PID
#   fail MESSAGE              print it, the daemon log's and every $dir/*.out's tail; exit 1
#   now_ns / ms_since T0_NS   wall clock in ns / ms since T0_NS
#   clients_may_leak          for tests whose clients die on purpose: no LeakSanitizer report
#                             for them (conduitd's own exit is leak-checked by other tests)
#
# Set before sourcing: conduitd (the binary). fail_tail_lines (default 20) sets how much of
# each file fail prints.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../../../scripts/lib/dpdk_runtime.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib/dpdk_runtime.sh"
dir=$(mktemp -d)
pid=
addr=198.18.9.1
port=$((20000 + RANDOM % 20000))
sock=$dir/conduitd.sock
eal_tags=()

daemon_test_cleanup() {
  jobs -p | xargs -r kill -9 2>/dev/null || true
  if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
  # DPDK's runtime directories of the daemons started here (--file-prefix=TAG$$), which a
  # daemon killed on purpose leaves behind.
  local tag
  for tag in "${eal_tags[@]}"; do dpdk_runtime_dir_remove "$tag$$"; done
  return 0
}
trap daemon_test_cleanup EXIT

fail() {
  local f n=${fail_tail_lines:-20}
  echo "FAIL: $*"
  echo "--- conduitd log"
  tail -n "$n" "$dir/log" || true
  for f in "$dir"/*.out; do
    [[ -e $f ]] || continue
    echo "--- $f"
    tail -n "$n" "$f"
  done
  exit 1
}

now_ns() { date +%s%N; }
ms_since() { echo $((($(now_ns) - $1) / 1000000)); }

clients_may_leak() { export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"; }

daemon_start() {
  local tag=$1 name=${2:-c}
  eal_tags+=("$tag")
  cat >"$dir/$name.yaml" <<YAML
daemon:
  control_socket: $sock
  lcores: [0]
port:
  device: net_ring_$tag$((RANDOM % 1000))
  eal_args: [--no-huge, -m, "512", --no-pci, --no-shconf, --no-telemetry, --file-prefix=$tag$$]
  address: $addr/24
YAML
  if [[ -n ${extra_policy:-} ]]; then printf '%s\n' "$extra_policy" >>"$dir/$name.yaml"; fi
  rm -f "$sock"
  "$conduitd" --config "$dir/$name.yaml" >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
  [[ -S $sock ]] || fail "conduitd did not open its socket"
}
