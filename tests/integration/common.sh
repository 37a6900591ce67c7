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

# ---- tests that run conduitd in their hosts -----------------------------------------------
#
# daemon_test_init TAG [BUILD_DIR]: exits 77 unless conduitd, conduitctl and conduit-perf are
# built; sets build, perf, ctl and work (a fresh /tmp/TAG.XXXXXX); loads scripts/lib/conduitd.sh;
# netns_init with a per-run prefix; and traps EXIT with daemon_test_cleanup. A test may define
# daemon_test_on_exit RC (extra clean-up or diagnostics, run first).
daemon_test_init() {
  local tag=$1 b
  build=${2:-${CONDUIT_BUILD:-$src/build}}
  export CONDUIT_BUILD=$build
  perf=$build/tools/conduit-perf/conduit-perf
  ctl=$build/tools/conduitctl/conduitctl
  for b in "$build/daemon/conduitd" "$ctl" "$perf"; do
    if [[ ! -x $b ]]; then
      echo "SKIP: $b not built (needs the daemon shell: DPDK, Boost, spdlog)"
      exit 77
    fi
  done
  # shellcheck source=../../scripts/lib/conduitd.sh
  . "$src/scripts/lib/conduitd.sh"
  work=$(mktemp -d "/tmp/$tag.XXXXXX")
  netns_init "cd$tag$$-"
  trap daemon_test_cleanup EXIT
}

# Stops every capture and every daemon conduitd_start started, removes the hosts, shows the
# tail of each log when the test failed, removes $work; keeps the test's exit status.
daemon_test_cleanup() {
  local rc=$? h f
  if declare -F daemon_test_on_exit >/dev/null; then daemon_test_on_exit "$rc" || true; fi
  capture_stop
  conduitd_stop_all 2>/dev/null || true
  netns_cleanup
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    for f in "$work"/*.log "$work"/*.err "$work"/*.out; do
      [[ -s $f ]] || continue
      echo "--- $f (last 15 lines)"
      tail -n 15 "$f"
    done
  fi
  rm -rf "$work"
  return "$rc"
}

# two_daemon_hosts PREFIX [KIND]: hosts a and b joined by a data veth 198.18.0.0/24 (kernel
# addresses .1 and .2; the daemons get .11 and .12) and an out-of-band veth 198.19.0.0/24, with
# perf_pair's variables set (server in b, client in a). start_daemon HOST then starts (or
# restarts) HOST's conduitd over port KIND (af_packet, the default, or af_xdp; a on lcore 0, b
# on lcore 1, DPDK file prefix PREFIX<pid><host>).
two_daemon_hosts() {
  DAEMON_FILE_PREFIX=$1
  DAEMON_PORT_KIND=${2:-af_packet}
  PERF_SERVER_HOST=b PERF_SERVER_ADDR=198.18.0.12
  PERF_CLIENT_HOST=a PERF_CLIENT_ADDR=198.18.0.11 PERF_OOB_ADDR=198.19.0.2
  netns_add a b
  netns_link a eth0 198.18.0.1/24 b eth0 198.18.0.2/24
  netns_link a mgmt0 198.19.0.1/24 b mgmt0 198.19.0.2/24
}
start_daemon() {
  local h=$1 addr lcore
  if [[ $h == a ]]; then addr=198.18.0.11/24 lcore=0; else addr=198.18.0.12/24 lcore=1; fi
  # DAEMON_IPV6=1: port.address6 too, fe80::c0:11 (a) / fe80::c0:12 (b) (RoCEv2 over IPv6).
  local CONDUITD_ADDRESS6=
  [[ -z ${DAEMON_IPV6:-} ]] || CONDUITD_ADDRESS6=fe80::c0:${addr:9:2}/64
  conduitd_config "$work/$h.yaml" "$work/$h.sock" "$(conduitd_vdev "$DAEMON_PORT_KIND" eth0)" \
    "$addr" "$lcore" "$DAEMON_FILE_PREFIX$$$h"
  conduitd_start "$h" "$work/$h.yaml" "$work/conduitd-$h.log"
}

# perf_pair LIMIT_S TEST ARGS...: conduit-perf server in $PERF_SERVER_HOST (our address
# $PERF_SERVER_ADDR), client in $PERF_CLIENT_HOST ($PERF_CLIENT_ADDR) connecting to the server's
# out-of-band address $PERF_OOB_ADDR. Prints the client's output; non-zero if either side fails.
perf_pair() {
  local limit=$1 test=$2 spid rc=0
  shift 2
  netns_exec "$PERF_SERVER_HOST" timeout "$limit" "$perf" "$test" "$@" \
    --socket "$work/$PERF_SERVER_HOST.sock" -x "$PERF_SERVER_ADDR" \
    >"$work/server.out" 2>"$work/server.err" &
  spid=$!
  sleep 0.3  # the client retries its connect anyway; this saves a retry round
  netns_exec "$PERF_CLIENT_HOST" timeout "$limit" "$perf" "$test" "$PERF_OOB_ADDR" "$@" \
    --socket "$work/$PERF_CLIENT_HOST.sock" -x "$PERF_CLIENT_ADDR" \
    >"$work/client.out" 2>"$work/client.err" || rc=$?
  wait "$spid" || rc=$((rc == 0 ? 1 : rc))
  cat "$work/client.out"
  return "$rc"
}

# ---- packet captures ------------------------------------------------------------------------
#
# capture_start HOST IFACE PCAP [TCPDUMP_ARGS...]: tcpdump in HOST on IFACE writing whole frames
# (-s 0) to PCAP, each as it is taken (--immediate-mode -U: stopping it loses nothing; libpcap
# otherwise hands over a buffer block at a time), its messages in PCAP.err. Waits until it
# listens (5 s); non-zero if it did not. capture_stop (daemon_test_cleanup calls it) stops them.
CAPTURE_PIDS=
capture_start() {
  local host=$1 iface=$2 pcap=$3
  shift 3
  # Not through netns_exec: ip netns exec execs tcpdump, so $! is tcpdump itself.
  ip netns exec "$(netns_name "$host")" tcpdump -i "$iface" -s 0 --immediate-mode -U -n \
    -w "$pcap" "$@" 2>"$pcap.err" &
  CAPTURE_PIDS+=" $!"
  for _ in $(seq 50); do
    grep -q 'listening on' "$pcap.err" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# capture_stop: SIGINT to every capture capture_start started (tcpdump closes its file), and
# waits for each.
capture_stop() {
  local p
  for p in $CAPTURE_PIDS; do
    kill -INT "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  CAPTURE_PIDS=
}
