#!/usr/bin/env bash
# Two conduitd on VLAN 100 (port.vlan) over one veth pair, conduitd a over af_xdp and b over
# af_packet. This kernel has no 802.1Q devices (CONFIG_VLAN_8021Q is off), so tagged traffic
# from the hosts' side comes from scapy:
#   1. scapy in each host resolves the other host's daemon with a tagged ARP request and pings
#      it (ICMP echo): the replies come back tagged VLAN 100, PCP 0; the kernels still ping each
#      other untagged over the same veth (a's XDP program leaves them their traffic);
#   2. SEND, WRITE and READ from 1 B to 1 MiB arrive byte-exact (conduit-perf --check);
#   3. the same ARP and ping on VLAN 200 get no answer: conduitd b (af_packet) drops and counts
#      the frames (net.rx_drop.vlan_mismatch); a's XDP program leaves them to a's kernel
#      (conduitd a counts none);
#   4. Router Advertisements from b's side, one on VLAN 200 and one on VLAN 100: conduitd a
#      (with port.address6) reads the VLAN 100 one through its packet socket (the kernel takes
#      the tag out of the frame; conduitd puts it back) and not the other;
#   5. tcpdump on the bridge between the hosts: every RoCE frame decodes in
#      tshark with the expected opcodes and a valid ICRC per scapy (tests/interop's
#      check_capture.py), all carry VLAN 100 with PCP 3 (the default class's priority), and
#      the daemons' ARP and ICMP frames PCP 0; no untagged frame from a daemon;
#   6. both daemons again without a VLAN and with port.priority_tagging: send_bw and write_bw
#      --check pass (a's XDP program hands it the priority-tagged frames) and in a new capture
#      every RoCE frame carries VID 0 with PCP 3 and valid ICRCs, the daemons' ARP untagged.
# Hosts: eth0 198.18.0.0/24 (kernels .1 and .2, untagged), joined by a bridge in namespace s;
# VLAN 100 198.18.2.0/24
# (daemons .11 and .12; scapy speaks as .1 and .2); out-of-band TCP over mgmt0 198.19.0.0/24.
# Root only (exit 77 otherwise); everything is removed on exit.
#
#   daemon_vlan_test.sh [BUILD_DIR]   (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
. "$(dirname "$0")/common.sh"
netns_require_root tcpdump tshark mergecap ethtool
if ! /usr/bin/python3 -c 'import scapy.all' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no scapy (apt-get install python3-scapy)"
  exit 77
fi
daemon_test_init vlan "${1:-}"
PERF_SERVER_HOST=b PERF_SERVER_ADDR=198.18.2.12
PERF_CLIENT_HOST=a PERF_CLIENT_ADDR=198.18.2.11 PERF_OOB_ADDR=198.19.0.2
# A bridge in s joins a and b (it forwards tagged frames as they are) and is where the capture
# runs: a daemon's own frames reach no packet tap of its host (af_packet sends around them), and
# an af_xdp daemon's received frames none either (XDP takes them first).
netns_add a s b
netns_link a eth0 198.18.0.1/24 s toa ""
netns_link b eth0 198.18.0.2/24 s tob ""
netns_exec s ip link add br0 type bridge
# The bridge keeps a tag it forwards beside the frame, and a veth port would carry it that way
# (TX VLAN offload): a's XDP program would see the frame untagged. A NIC puts it on the wire.
for p in toa tob; do
  netns_exec s ethtool -K "$p" txvlan off >/dev/null
  netns_exec s ip link set "$p" master br0
done
netns_exec s ip link set br0 up
netns_link a mgmt0 198.19.0.1/24 b mgmt0 198.19.0.2/24
PORT_TAG="vlan: 100"
start_daemon() { # HOST KIND ADDR LCORE
  conduitd_config "$work/$1.yaml" "$work/$1.sock" "$(conduitd_vdev "$2" eth0)" "$3" "$4" \
    "cdvl$$$1"
  sed -i "/^  address:/a\\  $PORT_TAG" "$work/$1.yaml"
  conduitd_start "$1" "$work/$1.yaml" "$work/conduitd-$1.log"
}
# a also has an IPv6 address, so that it reads the kernel's Router Advertisements (step 5).
CONDUITD_ADDRESS6=fe80::c0:11/64 start_daemon a af_xdp 198.18.2.11/24 0 ||
  fail "conduitd a did not start"
start_daemon b af_packet 198.18.2.12/24 1 || fail "conduitd b did not start"
for h in a b; do
  grep -q "VLAN 100 (802.1Q tags" "$work/conduitd-$h.log" || fail "conduitd $h did not log its VLAN"
done

# What each host sends into the bridge.
for h in a b; do
  capture_start s "to$h" "$work/$h.pcap" -Q in || fail "tcpdump on s's to$h did not start"
done

# probe HOST VID TARGET: scapy in HOST resolves TARGET with a tagged ARP request on VLAN VID,
# then pings it; prints what came back. Non-zero when no ARP or echo reply came.
probe() {
  local me=198.18.2.1
  [[ $1 == b ]] && me=198.18.2.2
  netns_exec "$1" /usr/bin/python3 - "$2" "$3" "$me" <<'PY'
import sys
from scapy.all import ARP, Dot1Q, Ether, ICMP, IP, conf, get_if_hwaddr, srp1
conf.verb = 0
vid, target, me = int(sys.argv[1]), sys.argv[2], sys.argv[3]
mac = get_if_hwaddr("eth0")
def tag(p):
    return f"VLAN {p[Dot1Q].vlan} PCP {p[Dot1Q].prio}" if Dot1Q in p else "untagged"
arp = srp1(Ether(dst="ff:ff:ff:ff:ff:ff", src=mac) / Dot1Q(vlan=vid) /
           ARP(op=1, hwsrc=mac, psrc=me, pdst=target), iface="eth0", timeout=2)
if arp is None or ARP not in arp or arp[ARP].op != 2:
    print(f"{target}: no ARP reply on VLAN {vid}")
    sys.exit(1)
echo = srp1(Ether(dst=arp[ARP].hwsrc, src=mac) / Dot1Q(vlan=vid) / IP(src=me, dst=target) /
            ICMP(id=7, seq=1) / (b"v" * 32), iface="eth0", timeout=2)
if echo is None or ICMP not in echo or echo[ICMP].type != 0:
    print(f"{target}: ARP reply ({tag(arp)}) but no echo reply on VLAN {vid}")
    sys.exit(1)
print(f"{target} is at {arp[ARP].hwsrc}: ARP reply {tag(arp)}, echo reply {tag(echo)}")
sys.exit(0 if tag(arp) == tag(echo) == f"VLAN {vid} PCP 0" else 2)
PY
}
echo "== tagged ARP and ping on VLAN 100 reach both daemons; the kernels still talk untagged"
probe a 100 198.18.2.12 || fail "conduitd b did not answer on VLAN 100 as expected"
probe b 100 198.18.2.11 || fail "conduitd a did not answer on VLAN 100 as expected"
netns_exec b ping -c 3 -i 0.2 -W 2 198.18.0.1 >"$work/ping.out" ||
  { cat "$work/ping.out"; fail "b's kernel got no echo reply from a's kernel (untagged)"; }
grep -h "packets transmitted" "$work/ping.out"

for t in send_bw write_bw read_bw; do
  echo "== $t --check on VLAN 100"
  perf_pair 120 "$t" -s 1,1023,4097,65536,1M -n 8 --check -W 20 || fail "$t --check failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 5 ]] || fail "$t: not every size checked OK"
done

echo "== the same on VLAN 200: no answer; conduitd b counts the frames, a's XDP program passes them"
mismatch() {
  netns_exec "$1" "$ctl" --socket "$work/$1.sock" stats --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["net.rx_drop.vlan_mismatch"])'
}
before_b=$(mismatch b) before_a=$(mismatch a)
! probe a 200 198.18.2.12 || fail "conduitd b answered on VLAN 200"
! probe b 200 198.18.2.11 || fail "conduitd a answered on VLAN 200"
after_b=$(mismatch b) after_a=$(mismatch a)
echo "net.rx_drop.vlan_mismatch: conduitd b $before_b -> $after_b, conduitd a $before_a -> $after_a"
((after_b > before_b)) || fail "conduitd b did not count the VLAN 200 frames"
((after_a == before_a)) || fail "VLAN 200 frames reached conduitd a past its XDP program"

echo "== Router Advertisements on VLAN 100 and VLAN 200: conduitd a takes only the first"
counter() { # HOST KEY
  netns_exec "$1" "$ctl" --socket "$work/$1.sock" stats --json |
    /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin).get('$2', 0))"
}
netns_exec b /usr/bin/python3 - <<'PY' || fail "scapy could not send the Router Advertisements"
from scapy.all import Dot1Q, Ether, get_if_hwaddr, sendp
from scapy.layers.inet6 import IPv6, ICMPv6ND_RA, ICMPv6NDOptSrcLLAddr
mac = get_if_hwaddr("eth0")
for vid in (200, 100):
    sendp(Ether(dst="33:33:00:00:00:01", src=mac) / Dot1Q(vlan=vid) /
          IPv6(src="fe80::c0:fe", dst="ff02::1", hlim=255) /
          ICMPv6ND_RA(routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=mac),
          iface="eth0", verbose=False)
PY
for _ in $(seq 30); do
  [[ $(counter a net.rx_ra) -ge 1 ]] && break
  sleep 0.1
done
sleep 0.5 # and time for a second one, which must not come
kf=$(counter a engine.kernel_frames) ra=$(counter a net.rx_ra)
echo "conduitd a: engine.kernel_frames $kf, net.rx_ra $ra"
[[ $kf == 1 && $ra == 1 ]] ||
  fail "conduitd a took $kf frames and $ra Router Advertisements (expected the VLAN 100 one only)"

echo "== the capture: tags, priorities, RRoCE and ICRCs"
capture_stop
mergecap -w "$work/all.pcap" "$work/a.pcap" "$work/b.pcap"
# Every RoCE frame decodes, both ways, with the opcodes these transfers carry, and its ICRC is
# what scapy computes (the tag is outside what the ICRC covers).
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/all.pcap" 198.18.2.11 198.18.2.12 \
  --need-opcodes 4,10,12,16,17 || fail "the capture does not check out (above)"
for h in a b; do
  peer=$([[ $h == a ]] && echo 198.18.2.11 || echo 198.18.2.12) # host h's daemon
  count() { tshark -r "$work/$h.pcap" -Y "$1" -T fields -e frame.number 2>/dev/null | wc -l; }
  total=$(count "ip.src == $peer && udp.dstport == 4791")
  good=$(count "ip.src == $peer && udp.dstport == 4791 && vlan.id == 100 && vlan.priority == 3")
  ctl_frames=$(count "(arp.src.proto_ipv4 == $peer || (icmp && ip.src == $peer)) && vlan.id == 100 && vlan.priority == 0")
  untagged=$(count "(ip.src == $peer || arp.src.proto_ipv4 == $peer) && !vlan")
  echo "$h: $total RoCE frames from conduitd $peer, $good of them VLAN 100 PCP 3;" \
    "$ctl_frames ARP/ICMP frames at VLAN 100 PCP 0; $untagged untagged"
  ((total > 100)) || fail "$h captured only $total RoCE frames from $peer"
  ((good == total)) || fail "$h: $((total - good)) RoCE frames from $peer lack VLAN 100 PCP 3"
  ((ctl_frames >= 1)) || fail "$h captured no ARP/ICMP frame of conduitd $peer at PCP 0"
  ((untagged == 0)) || fail "$h: $untagged untagged frames from conduitd $peer"
done

echo "== priority tags without a VLAN (port.priority_tagging): VID 0, PCP 3 on RoCE frames"
conduitd_stop_all || fail "a daemon did not stop cleanly"
PORT_TAG="priority_tagging: true"
start_daemon a af_xdp 198.18.2.11/24 0 || fail "conduitd a did not start (priority tags)"
start_daemon b af_packet 198.18.2.12/24 1 || fail "conduitd b did not start (priority tags)"
for h in a b; do
  capture_start s "to$h" "$work/$h-prio.pcap" -Q in || fail "tcpdump on s's to$h did not start"
done
for t in send_bw write_bw; do
  echo "== $t --check with priority tags"
  perf_pair 120 "$t" -s 1,4097,65536 -n 8 --check -W 20 || fail "$t --check failed (priority tags)"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 3 ]] || fail "$t: not every size checked OK"
done
capture_stop
mergecap -w "$work/all-prio.pcap" "$work/a-prio.pcap" "$work/b-prio.pcap"
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/all-prio.pcap" 198.18.2.11 \
  198.18.2.12 --need-opcodes 4,10,17 || fail "the priority-tagged capture does not check out"
for h in a b; do
  peer=$([[ $h == a ]] && echo 198.18.2.11 || echo 198.18.2.12)
  count() { tshark -r "$work/$h-prio.pcap" -Y "$1" -T fields -e frame.number 2>/dev/null | wc -l; }
  total=$(count "ip.src == $peer && udp.dstport == 4791")
  good=$(count "ip.src == $peer && udp.dstport == 4791 && vlan.id == 0 && vlan.priority == 3")
  arp_plain=$(count "arp.src.proto_ipv4 == $peer && !vlan")
  arp_tagged=$(count "arp.src.proto_ipv4 == $peer && vlan")
  echo "$h: $total RoCE frames from conduitd $peer, $good of them VID 0 PCP 3;" \
    "ARP: $arp_plain untagged, $arp_tagged tagged"
  least=1 # b only ACKs, coalesced
  [[ $h == a ]] && least=100
  ((total >= least)) || fail "$h captured only $total RoCE frames from $peer"
  ((good == total)) || fail "$h: $((total - good)) RoCE frames from $peer lack a VID 0 PCP 3 tag"
  ((arp_tagged == 0)) || fail "$h: conduitd $peer tagged its ARP frames"
done
echo "PASS"
