#!/usr/bin/env bash
# Two conduitd joined by a DPDK memif (shared-memory Ethernet between processes, the daemons'
# userspace wire; no kernel in the data path), driven by conduit-perf:
#   1. SEND, WRITE and READ from 1 B to 4 MiB arrive byte-exact (conduit-perf --check);
#   2. 16 QPs in parallel, byte-exact;
#   3. a bandwidth and a latency run, printed for BENCHMARKS.md (never asserted).
# Hosts a (memif server, 198.18.0.11) and b (client, .12) are namespaces for the daemons and
# the out-of-band TCP of conduit-perf (198.19.0.0/24 veth); the memif socket is a file in the
# test's directory. Root only (exit 77 otherwise); everything is removed on exit.
#
#   daemon_memif_test.sh [BUILD_DIR]
. "$(dirname "$0")/common.sh"
netns_require_root
build=${1:-${CONDUIT_BUILD:-$src/build}}
export CONDUIT_BUILD=$build
perf=$build/tools/conduit-perf/conduit-perf
for b in "$build/daemon/conduitd" "$build/tools/conduitctl/conduitctl" "$perf"; do
  if [[ ! -x $b ]]; then
    echo "SKIP: $b not built (needs the daemon shell: DPDK, Boost, spdlog)"
    exit 77
  fi
done
# shellcheck source=../../scripts/lib/conduitd.sh
. "$src/scripts/lib/conduitd.sh"

work=$(mktemp -d /tmp/memif.XXXXXX)
netns_init "cdtmf$$-"
test_cleanup() {
  local rc=$?
  conduitd_stop a 2>/dev/null || true
  conduitd_stop b 2>/dev/null || true
  netns_cleanup
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    for f in "$work"/*.log "$work"/*.err; do
      [[ -s $f ]] || continue
      echo "--- $f (last 15 lines)"
      tail -n 15 "$f"
    done
  fi
  rm -rf "$work"
  return "$rc"
}
trap test_cleanup EXIT

netns_add a b
netns_link a mgmt0 198.19.0.1/24 b mgmt0 198.19.0.2/24
# rsize 12: 4096-slot rings, so that a burst of a few MiB in flight fits while the
# receiving engine naps (adaptive idle) on this shared two-core machine.
memif="socket=$work/memif.sock,socket-abstract=no,rsize=12"
conduitd_config "$work/a.yaml" "$work/a.sock" "net_memif0,role=server,$memif" 198.18.0.11/24 0 \
  "cdtmf$$a"
conduitd_config "$work/b.yaml" "$work/b.sock" "net_memif0,role=client,$memif" 198.18.0.12/24 1 \
  "cdtmf$$b"
conduitd_start a "$work/a.yaml" "$work/conduitd-a.log" || fail "conduitd a did not start"
conduitd_start b "$work/b.yaml" "$work/conduitd-b.log" || fail "conduitd b did not start"

# perf LIMIT_S TEST ARGS...: server in b, client in a; non-zero if either side fails.
perf() {
  local limit=$1 test=$2; shift 2
  netns_exec b timeout "$limit" "$perf" "$test" "$@" --socket "$work/b.sock" -x 198.18.0.12 \
    >"$work/server.out" 2>"$work/server.err" &
  local spid=$! rc=0
  netns_exec a timeout "$limit" "$perf" "$test" 198.19.0.2 "$@" --socket "$work/a.sock" \
    -x 198.18.0.11 >"$work/client.out" 2>"$work/client.err" || rc=$?
  wait "$spid" || rc=$((rc == 0 ? 1 : rc))
  cat "$work/client.out"
  return "$rc"
}

# The daemons' port and drop counters, for a failure report.
show_counters() {
  local h
  for h in a b; do
    echo "--- conduitd $h counters (non-zero)"
    "$build/tools/conduitctl/conduitctl" --socket "$work/$h.sock" stats | awk '$NF != 0' | head -60
  done
}

sizes=1,63,1024,1025,4096,65536,1M,4M
for t in send_bw write_bw read_bw; do
  echo "== $t --check over memif, sizes $sizes"
  perf 120 "$t" -s "$sizes" -n 8 --check -W 20 || { show_counters; fail "$t --check failed"; }
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 8 ]] || fail "$t: not every size checked OK"
done

echo "== 16 QPs in parallel: send_bw --check"
perf 120 send_bw -q 16 -s 1,4096 -n 8 --check -W 30 || fail "send_bw -q 16 failed"

echo "== measured (not asserted): write_bw 64 B and 64 KiB for 2 s each, send_lat 64 B"
perf 60 write_bw -s 64,65536 -D 2 -W 20 || fail "write_bw measurement run failed"
perf 60 send_lat -s 64 -n 2000 -W 20 || fail "send_lat measurement run failed"
echo "PASS"
