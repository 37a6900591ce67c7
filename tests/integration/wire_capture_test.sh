#!/usr/bin/env bash
# What two conduitd put on the wire, checked by independent decoders: tcpdump inside a router
# namespace r between hosts a and b captures the RoCE traffic of SEND, WRITE and READ
# transfers (conduit-perf --check; SEND and WRITE once more under selective repeat) between
# daemons in a and b (af_packet, routed through r as their gateway), and then
#   - tshark decodes every captured frame as RRoCE (InfiniBand over UDP 4791), and the
#     capture holds the expected opcodes: SEND, RDMA WRITE (first/middle/last/only), RDMA
#     READ request and responses, ACK, NAK (sequence error), and CNP (0x81);
#   - scapy (scapy.contrib.roce) recomputes every frame's ICRC to the bytes on the wire.
# To make NAKs and CNPs happen, r's egress towards b drops 1 % of RoCE frames
# (tests/integration/bpf drop.o: go-back-N NAKs) and r's egress towards a carries the RED/ECN
# marker with a 50 Mbit/s virtual queue (red_ecn.o: CE marks on READ responses, so a's
# notification point sends CNPs). Why a router: DPDK's af_packet PMD sends with
# PACKET_QDISC_BYPASS, and on a plain veth pair neither the sender's tc egress nor the
# receiver's tc ingress program saw a single conduit frame (measured: counters stayed 0), and
# tcpdump on a daemon's interface misses that daemon's own frames. Frames the kernel forwards
# in r take the normal path through tc and the packet taps.
# Hosts: a 198.18.0.0/24 (daemon .11) -- r (.254 on both) -- b 198.18.1.0/24 (daemon .11);
# the out-of-band TCP of conduit-perf goes between the kernels' .1 addresses through r.
#
#   wire_capture_test.sh RED_ECN_OBJ DROP_OBJ [BUILD_DIR]
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root tcpdump tshark bpftool
red_obj=${1:-}
drop_obj=${2:-}
need_obj "$red_obj"
need_obj "$drop_obj"
if ! /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no scapy (apt-get install python3-scapy)"
  exit 77
fi
daemon_test_init wc "${3:-}"
export CONDUITD_IDLE_MODE=adaptive
PERF_SERVER_HOST=b PERF_SERVER_ADDR=198.18.1.11
PERF_CLIENT_HOST=a PERF_CLIENT_ADDR=198.18.0.11 PERF_OOB_ADDR=198.18.1.1

netns_add a r b
netns_link a eth0 198.18.0.1/24 r toa 198.18.0.254/24
netns_link b eth0 198.18.1.1/24 r tob 198.18.1.254/24
netns_forward r
netns_route a default 198.18.0.254
netns_route b default 198.18.1.254

start_daemon() {
  local h=$1 net lcore
  if [[ $h == a ]]; then net=0 lcore=0; else net=1 lcore=1; fi
  conduitd_config "$work/$h.yaml" "$work/$h.sock" "$(conduitd_vdev af_packet eth0)" \
    "198.18.$net.11/24" "$lcore" "cdwc$$$h"
  sed -i "/^  address:/a\\  gateway: 198.18.$net.254" "$work/$h.yaml"
  conduitd_start "$h" "$work/$h.yaml" "$work/conduitd-$h.log"
}
start_daemon a || fail "conduitd a did not start"
start_daemon b || fail "conduitd b did not start"

tcbpf_attach r tob egress "$drop_obj"
drop_config r tob egress 10000 4791
tcbpf_attach r toa egress "$red_obj"
red_ecn_config r toa 50000000 10000 40000 500000 200000

for h in a b; do
  capture_start r "to$h" "$work/$h.pcap" -Q out 'udp port 4791' ||
    fail "tcpdump on r's to$h did not start"
done

for t in send_bw write_bw read_bw; do
  echo "== $t --check through 1 % loss and the ECN marker"
  perf_pair 60 "$t" -s 1,4096,200000 -n 10 --check -W 30 || fail "$t failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 3 ]] || fail "$t: not every size checked OK"
done
# The same loss under selective repeat (negotiated through the connection manager).
for t in send_bw write_bw; do
  echo "== $t --cm --sr --check through 1 % loss (selective repeat)"
  perf_pair 60 "$t" --cm 5 --sr -s 1,4096,200000 -n 10 --check -W 30 || fail "$t --sr failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 3 ]] || fail "$t --sr: not every size OK"
done
stats_a=$(netns_exec a "$ctl" --socket "$work/a.sock" stats --json)
sleep 0.5
capture_stop
echo "drop.o on r's egress to b: $(drop_stats r tob egress | tr '\n' ' ')"
echo "red_ecn.o on r's egress to a: $(red_ecn_stats r toa | tr '\n' ' ')"

verdict=0
/usr/bin/python3 - "$work/a.pcap" "$work/b.pcap" "$stats_a" <<'PY' || verdict=$?
import json, subprocess, sys
from collections import Counter
from scapy.all import Ether, raw, rdpcap
from scapy.contrib.roce import BTH

caps, stats_a = sys.argv[1:3], json.loads(sys.argv[3])
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

fields = ["frame.number", "frame.protocols", "infiniband.bth.opcode", "infiniband.aeth.syndrome"]
cmd = ["tshark", "-T", "fields", "-E", "separator=;"]
for f in fields:
    cmd += ["-e", f]
rows, frames = [], []
for cap in caps:  # r's interface to a: what b sent; to b: what a sent
    rows += [l.split(";") for l in subprocess.run(cmd + ["-r", cap], check=True,
                                                 capture_output=True, text=True).stdout.splitlines()]
    frames += list(rdpcap(cap))
check(len(rows) == len(frames) and len(frames) > 0,
      f"tshark read {len(rows)} frames, scapy {len(frames)}")
not_roce = [r[0] for r in rows if "infiniband" not in r[1]]
check(not not_roce, f"every frame decodes as RRoCE ({len(not_roce)} do not: {not_roce[:5]})")
ops = Counter(int(r[2], 0) for r in rows if r[2])
naks = Counter(int(r[3], 0) for r in rows if r[3] and int(r[3], 0) & 0x60 == 0x60)
names = {0x00: "SEND first", 0x01: "SEND middle", 0x02: "SEND last", 0x04: "SEND only",
         0x06: "WRITE first", 0x07: "WRITE middle", 0x08: "WRITE last", 0x0A: "WRITE only",
         0x0C: "READ request", 0x0D: "READ response first", 0x0E: "READ response middle",
         0x0F: "READ response last", 0x10: "READ response only", 0x11: "ACK", 0x81: "CNP"}
for op, n in sorted(ops.items()):
    print(f"  opcode 0x{op:02x} {names.get(op, '?'):22s} {n}")
for syn, n in sorted(naks.items()):
    print(f"  NAK syndrome 0x{syn:02x} {n}")
for op in names:
    check(ops[op] > 0, f"opcode 0x{op:02x} ({names[op]}) present")
check(naks[0x60] > 0, "NAK sequence error (AETH 0x60) present")
check(stats_a.get("engine.tx_cnps", 0) > 0,
      f"a's engine counted {stats_a.get('engine.tx_cnps', 0)} CNPs sent")

bad = []
for i, pkt in enumerate(frames, 1):
    original = raw(pkt)
    if BTH not in pkt:
        bad.append((i, "no BTH"))
        continue
    again = Ether(original)
    again[BTH].icrc = None
    if raw(again) != original:
        bad.append((i, f"opcode 0x{pkt[BTH].opcode:02x}"))
check(not bad, f"scapy: {len(frames) - len(bad)} of {len(frames)} ICRCs valid {bad[:5]}")
sys.exit(0 if ok else 1)
PY
[[ $verdict -eq 0 ]] || fail "the capture does not check out"
echo "PASS"
