#!/usr/bin/env bash
# Two conduitd over a veth pair, driven by conduit-perf; the port kind is the second argument
# (af_packet, the default, or af_xdp):
#   1. SEND, WRITE and READ from 1 B to 16 MiB arrive byte-exact (conduit-perf --check);
#   2. 16, then 256 QPs in parallel, byte-exact;
#   3. restarting one daemon makes the peer's QPs fail with an error within the retry budget
#      (no hang), and new connections work after the restart;
#   4. RoCEv2 over IPv6 (the daemons also own fe80::c0:11 and fe80::c0:12, port.address6):
#      a's kernel pings b's conduitd over IPv6 (neighbour discovery, ICMPv6 echo), and SEND,
#      WRITE and READ with IPv6 GIDs arrive byte-exact, also on QPs connected through the
#      native connection manager and through the IB CM (rdma_cm's dialect) over IPv6, and
#      conduit-perf's perftest -R mode (exchange and QP through rdma_cm) over IPv6;
#   5. a Router Advertisement from b's side of the link (a router at fe80::c0:fe with an on-link
#      prefix and an MTU option) reaches conduitd a and a's kernel alike: over af_packet both
#      receive the frame, over af_xdp the XDP program leaves it to the kernel and conduitd reads
#      a copy through its packet socket (engine.kernel_frames);
#   0. first, b runs with port.line_rate and a with the veth's nominal 10 Gbit/s (and warns about
#      it), as the logs and conduitctl status show; the daemons share the interface with the kernel: a's kernel pings b's conduitd
#      (ICMP echo answered by conduitd) and b's kernel (kernel to kernel over the same veth:
#      with af_xdp, conduit's XDP program must leave the kernel its traffic).
# Hosts a and b: data veth 198.18.0.0/24 (daemons at .11 and .12), out-of-band TCP over a
# second veth 198.19.0.0/24. Root only (exit 77 otherwise); everything is removed on exit.
#
#   daemon_two_hosts_test.sh [BUILD_DIR [KIND]]  (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
. "$(dirname "$0")/common.sh"
netns_require_root
kind=${2:-af_packet}
daemon_test_init "2h$kind" "${1:-}"
echo "port kind: $kind"
two_daemon_hosts cdt2h "$kind"
export DAEMON_IPV6=1
start_daemon a || fail "conduitd a did not start"
CONDUITD_LINE_RATE=40gbit start_daemon b || fail "conduitd b did not start"

echo "== the line rate: the veth's nominal speed (a, with a warning) or port.line_rate (b)"
grep -q "kernel interface eth0, driver veth" "$work/conduitd-a.log" ||
  fail "conduitd a did not name its kernel interface and driver"
grep -q "eth0 is a veth, whose 10000 Mb/s is nominal" "$work/conduitd-a.log" ||
  fail "conduitd a did not warn about the veth's nominal speed"
! grep -q "is a veth" "$work/conduitd-b.log" || fail "conduitd b warned although port.line_rate is set"
for h in a b; do
  st=$(netns_exec "$h" "$ctl" --socket "$work/$h.sock" status) || fail "conduitctl status on $h"
  grep "^engine:" <<<"$st"
  want="line rate 10gbit (the port's speed)"
  [[ $h == b ]] && want="line rate 40gbit (port.line_rate)"
  [[ $st == *"$want"* && $st == *"link up"* ]] || fail "conduitctl status on $h lacks '$want'"
done

echo "== the kernel and conduitd share the interface"
netns_exec a ping -c 3 -i 0.2 -W 2 198.18.0.12 >"$work/ping-conduitd.out" ||
  { cat "$work/ping-conduitd.out"; fail "a's kernel got no echo reply from conduitd b"; }
netns_exec a ping -c 3 -i 0.2 -W 2 198.18.0.2 >"$work/ping-kernel.out" ||
  { cat "$work/ping-kernel.out"; fail "a's kernel got no echo reply from b's kernel"; }
grep -h "packets transmitted" "$work/ping-conduitd.out" "$work/ping-kernel.out"

sizes=1,2,3,63,64,1023,1024,1025,4096,65535,65536,1M,4M,16M
for t in send_bw write_bw read_bw; do
  echo "== $t --check, sizes $sizes"
  perf_pair 240 "$t" -s "$sizes" -n 8 --check -W 20 || fail "$t --check failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 14 ]] || fail "$t: not every size checked OK"
done

echo "== send_bw -b --check (both directions at once)"
perf_pair 120 send_bw -b -s 1,4097,1M -n 20 --check -W 20 || fail "bidirectional send_bw failed"

echo "== the RoCE receive fast path took the established QPs' frames"
# engine.rx_roce_fast counts the frames the per-QP expectation matched (NetStack::on_rx_expected);
# each QP's first frame and any frame unlike its peer's usual ones take the full path. The
# stack's counters include both paths.
for h in a b; do
  stats=$(netns_exec "$h" "$ctl" --socket "$work/$h.sock" stats --json) ||
    fail "conduitctl stats on $h failed"
  /usr/bin/python3 - "$h" "$stats" <<'PY' || fail "daemon $h: the receive fast path was not used"
import json, sys
h, s = sys.argv[1], json.loads(sys.argv[2])
roce, fast = s["engine.rx_roce"], s["engine.rx_roce_fast"]
print(f"{h}: engine.rx_roce {roce}, engine.rx_roce_fast {fast}, "
      f"net.rx_udp_delivered {s['net.rx_udp_delivered']}")
sys.exit(0 if roce > 0 and fast * 2 > roce and s["net.rx_udp_delivered"] >= roce else 1)
PY
done

for q in 16 256; do
  echo "== $q QPs in parallel: write_bw and send_bw --check"
  perf_pair 180 write_bw -q "$q" -s 1,4096 -n 8 --check -W 30 || fail "write_bw -q $q failed"
  perf_pair 180 send_bw -q "$q" -s 1,4096 -n 8 --check -W 30 || fail "send_bw -q $q failed"
done

echo "== restart of conduitd b during a write_bw: a's QP must fail, not hang"
# The QPs' budget: local ACK timeout 4.096 us * 2^14 = 67 ms, retry_cnt 7: 8 tries ~ 0.54 s.
netns_exec b timeout 60 "$perf" write_bw --socket "$work/b.sock" -x 198.18.0.12 -W 60 \
  >"$work/server.out" 2>"$work/server.err" &
spid=$!
netns_exec a timeout 60 "$perf" write_bw 198.19.0.2 -s 64K -D 30 -W 60 --socket "$work/a.sock" \
  -x 198.18.0.11 >"$work/client.out" 2>"$work/client.err" &
cpid=$!
sleep 3
kill -0 "$cpid" 2>/dev/null || fail "write_bw ended before the restart"
conduitd_stop b
t_stop=$(date +%s%N)
CONDUITD_LINE_RATE=40gbit start_daemon b || fail "conduitd b did not restart"
crc=0
timeout 20 tail --pid="$cpid" -f /dev/null || fail "client still running 20 s after the restart"
t_fail=$(date +%s%N)
wait "$cpid" || crc=$?
wait "$spid" || true
[[ $crc -ne 0 && $crc -ne 124 ]] || fail "client exit $crc: expected an error, not success/timeout"
cat "$work/client.err"
grep -q "work request on QP" "$work/client.err" ||
  fail "the client did not fail with a work-request error (see client.err above)"
ms=$(((t_fail - t_stop) / 1000000))
echo "client failed ${ms} ms after conduitd b stopped"
# Budget 0.54 s, plus the daemon's restart and a loaded two-core machine.
((ms < 10000)) || fail "QP error took ${ms} ms (budget ~540 ms)"
# conduitd a says which QP failed and why, with its retry state (the operator's first clue).
grep -E "qp 0x[0-9a-f]+ \(client [0-9]+, pid [0-9]+, '[^']*'\): error state: retry exceeded talking to peer QP 0x[0-9a-f]+; last acknowledgement [0-9]+ ms before \(ACK timeout 67 ms, retry_cnt 7\).* [1-9][0-9]* timeouts" \
  "$work/conduitd-a.log" || fail "conduitd a did not log the QP's failure and its cause"

echo "== after the restart, new connections work"
perf_pair 60 send_lat -n 200 --check -W 20 || fail "send_lat after the restart failed"
perf_pair 60 write_bw -s 4096 -n 100 --check -W 20 || fail "write_bw after the restart failed"

echo "== RoCEv2 over IPv6: a's kernel pings conduitd b, then SEND, WRITE and READ"
for _ in $(seq 50); do  # a's link-local address must have left DAD to send from it
  netns_exec a ip -6 addr show dev eth0 | grep -q tentative || break
  sleep 0.2
done
netns_exec a ping -6 -c 3 -i 0.2 -W 2 fe80::c0:12%eth0 >"$work/ping6.out" ||
  { cat "$work/ping6.out"; fail "a's kernel got no ICMPv6 echo reply from conduitd b"; }
grep -h "packets transmitted" "$work/ping6.out"
PERF_SERVER_ADDR=fe80::c0:12 PERF_CLIENT_ADDR=fe80::c0:11
for t in send_bw write_bw read_bw; do
  perf_pair 120 "$t" -s 1,4097,1M -n 8 --check -W 20 || fail "$t over IPv6 failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 3 ]] || fail "$t over IPv6: not every size OK"
done
echo "== connection setup over IPv6: the native CM (conduit-perf --cm), then the IB CM"
perf_pair 60 write_bw --cm 7 -s 1,65537 -n 8 --check -W 20 || fail "write_bw --cm over IPv6 failed"
grep -q "connected through the CM (service 7, peer fe80::c0:12" "$work/client.out" ||
  fail "the --cm client did not connect to fe80::c0:12"
[[ $(grep -c 'check: OK' "$work/client.out") -eq 2 ]] || fail "write_bw --cm over IPv6: not every size OK"
netns_exec b timeout 60 "$build/lib/examples/conduit-rping" -s -p 7175 -C 10 -S 4000 \
  --socket "$work/b.sock" >"$work/rping-server.out" 2>&1 &
rping_server=$!
for _ in $(seq 200); do grep -q listening "$work/rping-server.out" 2>/dev/null && break; sleep 0.05; done
netns_exec a timeout 60 "$build/lib/examples/conduit-rping" -c -a fe80::c0:12 -p 7175 -C 10 -S 4000 \
  --socket "$work/a.sock" >"$work/rping-client.out" 2>&1 || {
  cat "$work/rping-client.out"
  fail "conduit-rping over IPv6 (IB CM) failed"
}
wait "$rping_server" || { cat "$work/rping-server.out"; fail "the conduit-rping server failed"; }
grep -h "connected to" "$work/rping-client.out" "$work/rping-server.out"
grep -q "connected to fe80::c0:12 .*(IB CM)" "$work/rping-client.out" ||
  fail "conduit-rping did not connect to fe80::c0:12 through the IB CM"
echo "== perftest's -R over IPv6: the exchange and the test QP on rdma_cm connections"
PERF_OOB_ADDR=$PERF_SERVER_ADDR perf_pair 60 write_bw --perftest -R -s 4096 -n 20 -W 20 ||
  { cat "$work/client.err" "$work/server.err"; fail "write_bw --perftest -R over IPv6 failed"; }
grep -E '^ *4096 +20 ' "$work/client.out" >/dev/null ||
  fail "write_bw --perftest -R over IPv6: no result line for 4096 B x 20"
for h in a b; do
  stats=$(netns_exec "$h" "$ctl" --socket "$work/$h.sock" stats)
  grep -E '^cm\.(gsi_rx|gsi_tx|gsi_rx_dropped|rx_datagrams|tx_datagrams|established) ' <<<"$stats" |
    sed "s/^/$h: /"
  gsi=$(awk '$1 == "cm.gsi_rx" {print $2}' <<<"$stats")
  ((${gsi:-0} >= 2)) || fail "conduitd $h received ${gsi:-0} IB CM MADs"
  grep -E '^net\.(rx_ns|rx_na|tx_na|tx_ns|rx_udp6_delivered|tx_icmp6_echo_replies) ' <<<"$stats" |
    sed "s/^/$h: /"
  udp6=$(awk '$1 == "net.rx_udp6_delivered" {print $2}' <<<"$stats")
  ((${udp6:-0} > 100)) || fail "conduitd $h delivered ${udp6:-0} IPv6 datagrams"
done

echo "== a Router Advertisement on the link reaches conduitd a and a's kernel"
# RFC 5180's benchmarking prefix, on-link (L) but not for address configuration (A off), and a
# link MTU below the veth's 1500 that the kernel and conduitd both take.
netns_exec b /usr/bin/python3 - <<'PY' || fail "scapy could not send the Router Advertisement"
from scapy.all import Ether, get_if_hwaddr, sendp
from scapy.layers.inet6 import (IPv6, ICMPv6ND_RA, ICMPv6NDOptMTU, ICMPv6NDOptPrefixInfo,
                                ICMPv6NDOptSrcLLAddr)
mac = get_if_hwaddr("eth0")
sendp(Ether(dst="33:33:00:00:00:01", src=mac) / IPv6(src="fe80::c0:fe", dst="ff02::1", hlim=255) /
      ICMPv6ND_RA(routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=mac) /
      ICMPv6NDOptMTU(mtu=1400) /
      ICMPv6NDOptPrefixInfo(prefix="2001:2:0:77::", prefixlen=64, L=1, A=0,
                            validlifetime=3600, preferredlifetime=1800),
      iface="eth0", verbose=False)
PY
for _ in $(seq 50); do
  stats=$(netns_exec a "$ctl" --socket "$work/a.sock" stats)
  [[ $(awk '$1 == "net.rx_ra" {v = $2} END {print v + 0}' <<<"$stats") -ge 1 ]] && break
  sleep 0.1
done
grep -E '^(net\.(rx_ra|ra_prefixes|link_mtu6|ra_options_ignored)|engine\.kernel_frames(_ignored)?|control\.kernel_frames(_dropped)?) ' <<<"$stats" | sed "s/^/a: /"
counter() { awk -v k="$1" '$1 == k {v = $2} END {print v + 0}' <<<"$stats"; }
(($(counter net.rx_ra) >= 1)) || fail "conduitd a took no Router Advertisement"
(($(counter net.ra_prefixes) >= 1)) || fail "conduitd a did not take the advertised on-link prefix"
[[ $(counter net.link_mtu6) == 1400 ]] || fail "conduitd a did not take the advertised MTU 1400"
if [[ $kind == af_xdp ]]; then
  (($(counter engine.kernel_frames) >= 1)) ||
    fail "conduitd a read no Router Advertisement through its packet socket"
  grep -q "reads the Router Advertisements the kernel receives on eth0" "$work/conduitd-a.log" ||
    fail "conduitd a did not say it reads the kernel's Router Advertisements"
fi
for _ in $(seq 30); do  # the kernel of a: its default route names the router
  netns_exec a ip -6 route show default | grep -q "via fe80::c0:fe" && break
  sleep 0.1
done
netns_exec a ip -6 route show default | grep "via fe80::c0:fe" ||
  fail "a's kernel did not take the Router Advertisement (it must keep its own)"
echo "PASS"
