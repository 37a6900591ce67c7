#!/usr/bin/env bash
# The RED/ECN marker on a dumbbell's bottleneck: kernel UDP traffic from two senders through a
# router whose egress to the receiver is shaped by tbf and marked by red_ecn.o.
#   1. light ECT(0) load (well under the bottleneck): the virtual queue stays below Kmin and
#      nothing is marked;
#   2. two ECT(0) senders together above the bottleneck rate: CE marks arrive at the receiver
#      (counted by tcpdump, with valid IP checksums) and the marker's counters agree;
#   3. the same load not ECN-capable: nothing is marked (RED would drop; tbf does);
#   4. the overload of phase 2 over IPv6 (RFC 5180's benchmarking prefix 2001:2::/48 on the
#      same links): CE is set in the IPv6 traffic class, and the receiver sees it.
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

# IPv6 on the same links for phase 4 (nodad: usable at once), the router forwarding.
for l in "s1 eth0 1 1" "r tos1 1 fe" "s2 eth0 2 1" "r tos2 2 fe" "d eth0 3 1" "r tod 3 fe"; do
  read -r h dev net host <<<"$l"
  netns_exec "$h" ip -6 addr add "2001:2:0:$net::$host/64" dev "$dev" nodad ||
    fail "IPv6 address on $h/$dev"
done
netns_exec r sysctl -qw net.ipv6.conf.all.forwarding=1 || fail "IPv6 forwarding on r"
for l in "s1 1" "s2 2" "d 3"; do
  read -r h net <<<"$l"
  netns_exec "$h" ip -6 route add default via "2001:2:0:$net::fe" || fail "IPv6 route on $h"
done

netns_exec d iperf3 -s -D -p 5201 --logfile /dev/null
netns_exec d iperf3 -s -D -p 5202 --logfile /dev/null
sleep 0.5

# run_load TOS BW_PER_SENDER SECONDS [DEST]: both senders at once, bounded (DEST: the
# receiver's address, 198.18.3.1 by default).
run_load() {
  local tos=$1 bw=$2 secs=$3 dest=${4:-198.18.3.1}
  timeout $((secs + 15)) ip netns exec "$(netns_name s1)" \
    iperf3 -u -c "$dest" -p 5201 --tos "$tos" -b "$bw" -l 1200 -t "$secs" >/dev/null &
  local p1=$!
  timeout $((secs + 15)) ip netns exec "$(netns_name s2)" \
    iperf3 -u -c "$dest" -p 5202 --tos "$tos" -b "$bw" -l 1200 -t "$secs" >/dev/null &
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

echo "phase 4: 2 x 80 Mbit/s ECT(0) over IPv6 through $rate, tcpdump on the receiver"
marked3=$(stat marked)
timeout 30 ip netns exec "$(netns_name d)" tcpdump -i eth0 -n -v -l 'ip6 and udp and dst port (5201 or 5202)' \
  >"$cap" 2>/dev/null &
tpid=$!
sleep 1
run_load 2 80M 3 2001:2:0:3::1
sleep 0.5
kill "$tpid" 2>/dev/null || true
wait "$tpid" 2>/dev/null || true
marked4=$(stat marked)
ce6=$(grep -c 'class 0x03,' "$cap" || true)
ect6=$(grep -c 'class 0x02,' "$cap" || true)
echo "marked by the program: $((marked4 - marked3)); at the receiver: CE $ce6, ECT(0) $ect6"
[[ $((marked4 - marked3)) -gt 100 ]] || fail "too few IPv6 packets marked ($((marked4 - marked3)))"
[[ $ce6 -gt 100 ]] || fail "the receiver saw too few CE IPv6 packets ($ce6)"
[[ $ect6 -gt 100 ]] || fail "the receiver saw too few unmarked ECT(0) IPv6 packets ($ect6)"
[[ $ce6 -le $((marked4 - marked3)) ]] || fail "more CE IPv6 packets received than marked"
echo "PASS"
