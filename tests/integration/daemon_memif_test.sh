#!/usr/bin/env bash
# Two conduitd joined by a DPDK memif (shared-memory Ethernet between processes, the daemons'
# userspace wire; no kernel in the data path), driven by conduit-perf:
#   1. SEND, WRITE and READ from 1 B to 16 MiB arrive byte-exact (conduit-perf --check), the
#      same sizes as the veth test (daemon_two_hosts_test.sh);
#   2. 16 and 256 QPs in parallel, WRITE and SEND, byte-exact;
#   3. a bandwidth and a latency run, printed for BENCHMARKS.md (never asserted).
# Hosts a (memif server, 198.18.0.11) and b (client, .12) are namespaces for the daemons and
# the out-of-band TCP of conduit-perf (198.19.0.0/24 veth); the memif socket is a file in the
# test's directory. Root only (exit 77 otherwise); everything is removed on exit.
#
#   daemon_memif_test.sh [BUILD_DIR]
. "$(dirname "$0")/common.sh"
netns_require_root
daemon_test_init mf "${1:-}"
PERF_SERVER_HOST=b PERF_SERVER_ADDR=198.18.0.12
PERF_CLIENT_HOST=a PERF_CLIENT_ADDR=198.18.0.11 PERF_OOB_ADDR=198.19.0.2

netns_add a b
netns_link a mgmt0 198.19.0.1/24 b mgmt0 198.19.0.2/24
# rsize 10: 1024-slot rings. A full ring holds the sender back (the engine keeps what the
# device refuses), so a receiving engine that naps or is descheduled costs no frames.
memif="socket=$work/memif.sock,socket-abstract=no,rsize=10"
conduitd_config "$work/a.yaml" "$work/a.sock" "net_memif0,role=server,$memif" 198.18.0.11/24 0 \
  "cdtmf$$a"
conduitd_config "$work/b.yaml" "$work/b.sock" "net_memif0,role=client,$memif" 198.18.0.12/24 1 \
  "cdtmf$$b"
conduitd_start a "$work/a.yaml" "$work/conduitd-a.log" || fail "conduitd a did not start"
conduitd_start b "$work/b.yaml" "$work/conduitd-b.log" || fail "conduitd b did not start"

# The daemons' port and drop counters, for a failure report.
show_counters() {
  local h
  for h in a b; do
    echo "--- conduitd $h counters (non-zero)"
    "$build/tools/conduitctl/conduitctl" --socket "$work/$h.sock" stats | awk '$NF != 0' | head -60
  done
}

sizes=1,2,3,63,64,1023,1024,1025,4096,65535,65536,1M,4M,16M
for t in send_bw write_bw read_bw; do
  echo "== $t --check over memif, sizes $sizes"
  perf_pair 240 "$t" -s "$sizes" -n 8 --check -W 20 || { show_counters; fail "$t --check failed"; }
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 14 ]] || fail "$t: not every size checked OK"
done

for q in 16 256; do
  echo "== $q QPs in parallel over memif: write_bw and send_bw --check"
  perf_pair 180 write_bw -q "$q" -s 1,4096 -n 8 --check -W 30 ||
    { show_counters; fail "write_bw -q $q failed"; }
  perf_pair 180 send_bw -q "$q" -s 1,4096 -n 8 --check -W 30 ||
    { show_counters; fail "send_bw -q $q failed"; }
done

echo "== measured (not asserted): write_bw 64 B and 64 KiB for 2 s each, send_lat 64 B"
perf_pair 60 write_bw -s 64,65536 -D 2 -W 20 || fail "write_bw measurement run failed"
perf_pair 60 send_lat -s 64 -n 2000 -W 20 || fail "send_lat measurement run failed"
# Both stop cleanly (exit 0), memif peers together (scripts/lib/conduitd.sh says why).
conduitd_stop_all || fail "a conduitd did not stop cleanly"
echo "PASS"
