#!/usr/bin/env bash
# The RED/ECN marker on a dumbbell's bottleneck: kernel UDP traffic from two senders through a
# router whose egress to the receiver is shaped by tbf and marked by red_ecn.o.
#   1. light ECT(0) load (well under the bottleneck): the virtual queue stays below Kmin and
#      nothing is marked;
#   2. two ECT(0) senders together above the bottleneck rate: CE marks arrive at the receiver
#      (counted by tcpdump, with valid IP checksums) and the marker's counters agree;
#   3. the same load not ECN-capable: nothing is marked (RED would drop; tbf does).
# Usage: ecn_marking_test.sh RED_ECN_OBJ
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root iperf3 tcpdump bpftool
obj=${1:-}
need_obj "$obj"

rate=100mbit            # bottleneck; small so that kernel UDP senders can overload it here
rate_bps=100000000
kmin=50000 kmax=150000 pmax_ppm=200000 limit=400000

netns_init
netns_dumbbell "$rate"
tcbpf_attach r tod egress "$obj"
red_ecn_config r tod "$rate_bps" "$kmin" "$kmax" "$pmax_ppm" "$limit"

netns_exec d iperf3 -s -D -p 5201 --logfile /dev/null
netns_exec d iperf3 -s -D -p 5202 --logfile /dev/null
sleep 0.5

# run_load TOS BW_PER_SENDER SECONDS: both senders at once, bounded.
run_load() {
  local tos=$1 bw=$2 secs=$3
  timeout $((secs + 15)) ip netns exec "$(netns_name s1)" \
    iperf3 -u -c 198.18.3.1 -p 5201 --tos "$tos" -b "$bw" -l 1200 -t "$secs" >/dev/null &
  local p1=$!
  timeout $((secs + 15)) ip netns exec "$(netns_name s2)" \
    iperf3 -u -c 198.18.3.1 -p 5202 --tos "$tos" -b "$bw" -l 1200 -t "$secs" >/dev/null &
  local p2=$!
  wait "$p1" || fail "iperf3 from s1 failed"
  wait "$p2" || fail "iperf3 from s2 failed"
}

stat() { tcbpf_stat "$(red_ecn_stats r tod)" "$1"; }

echo "phase 1: 2 x 5 Mbit/s ECT(0) through $rate"
run_load 2 5M 2
s=$(red_ecn_stats r tod); echo "$s" | tr '\n' ' '; echo
[[ $(tcbpf_stat "$s" ect) -gt 500 ]] || fail "marker saw too few ECT packets"
[[ $(tcbpf_stat "$s" marked) -eq 0 ]] || fail "marks below Kmin"
marked0=0

echo "phase 2: 2 x 80 Mbit/s ECT(0) through $rate, tcpdump on the receiver"
cap=$(mktemp /tmp/ecn.XXXXXX.txt)
trap 'rm -f "$cap"; netns_cleanup' EXIT
timeout 30 ip netns exec "$(netns_name d)" tcpdump -i eth0 -n -v -l 'udp and dst port (5201 or 5202)' \
  >"$cap" 2>/dev/null &
tpid=$!
sleep 1
run_load 2 80M 3
sleep 0.5
kill "$tpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true
s=$(red_ecn_stats r tod); echo "$s" | tr '\n' ' '; echo
marked=$(($(tcbpf_stat "$s" marked) - marked0))
ce_seen=$(grep -c 'tos 0x3,CE' "$cap" || true)
bad=$(grep -c 'bad cksum' "$cap" || true)
qmax=$(tcbpf_stat "$s" queue_max_bytes)
echo "marked by the program: $marked; CE at the receiver (tcpdump): $ce_seen; bad IP checksums: $bad;" \
  "virtual queue max: $qmax bytes"
[[ $marked -gt 100 ]] || fail "too few marks under overload ($marked)"
[[ $ce_seen -gt 100 ]] || fail "the receiver saw too few CE packets ($ce_seen)"
[[ $bad -eq 0 ]] || fail "$bad packets with a bad IP checksum"
[[ $ce_seen -le $marked ]] || fail "more CE packets received ($ce_seen) than marked ($marked)"
[[ $qmax -ge $kmax ]] || fail "queue never reached Kmax ($qmax)"
[[ $qmax -le $limit ]] || fail "queue above its limit ($qmax)"

echo "phase 3: 2 x 80 Mbit/s not-ECT through $rate"
marked1=$(stat marked)
over1=$(stat not_ect_over)
run_load 0 80M 2
marked2=$(stat marked)
over2=$(stat not_ect_over)
echo "marks: $((marked2 - marked1)); not-ECT packets over Kmin: $((over2 - over1))"
[[ $marked2 -eq $marked1 ]] || fail "not-ECT packets were marked"
[[ $((over2 - over1)) -gt 100 ]] || fail "the queue model saw no overload for not-ECT traffic"
echo "PASS"
