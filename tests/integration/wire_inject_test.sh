#!/usr/bin/env bash
# Bad input from the wire while a transfer is in flight. Hosts a -- r -- b (a router namespace,
# daemons in a and b routed through it, af_packet). conduit-perf send_bw --check runs a -> b;
# meanwhile a sender in r (raw socket on r's interface to b: a third position on the path)
# injects at b's daemon, N frames of each kind, built with scapy before the transfer starts (on a
# loaded machine building them took longer than the transfer) and given the live QPN as sent:
#   icrc        a well-formed SEND to the live QP from the right peer, ICRC wrong
#   truncated   RDMA WRITE only whose RETH is cut short (valid ICRC over what is there)
#   opcode      reserved RC opcode 0x1F                    (counted as opcode_unsupported, then
#               the QP's: far from its ePSN, so no NAK Invalid Request)
#   bth_version BTH TVer 1                                 (malformed)
#   pkey        P_Key 0x1234                               (malformed)
#   pad_count   SEND only with pad count 3 and a 1-byte payload (malformed: length)
#   unknown_qp  a valid SEND to a QPN nobody has
#   wrong_peer  a valid SEND to the live QP from an address that is not its peer
#   window      a valid SEND to the live QP from its peer, PSN 2^23 - 1 away from anything
#               the QP expects (out of window: counted as out of sequence or duplicate)
#   gsi_icrc    a UD SEND_ONLY to QP 1 (the IB CM's GSI) with a CM MAD, ICRC wrong
#   gsi_qkey    the same with a valid ICRC and another Q_Key than the GSI's
#   gsi_short   the same cut to 100 bytes of MAD
#   gsi_method  a valid GSI packet whose CM MAD has method 0x99      (malformed MAD)
#   gsi_req     a valid rdma_cm REQ for a port nobody listens on at b (answered with REJ)
# and over IPv6 (b's daemon also owns fe80::c0:b1, port.address6; the live QP is IPv4):
#   v6_icrc       an IPv6 SEND to the live QP, ICRC wrong
#   v6_wrong_peer an IPv6 SEND to the live QP with a valid ICRC: the QP's peer is an IPv4
#                 address, so no IPv6 sender is its peer
#   v6_ext_header the same behind a hop-by-hop options header, and behind a fragment header
#                 (conduit walks no extension headers)
#   v6_truncated  an IPv6 header whose payload length runs past the frame
#   v6_ndp_hops   a Neighbor Solicitation for b's address with hop limit 64 (RFC 4861: 255)
#   v6_gsi        a valid rdma_cm REQ over IPv6 for a port nobody listens on (answered with
#                 REJ, over IPv6)
#   v6_gsi_icrc   the same with a wrong ICRC
# Asserted: the transfer completes byte-exact ("check: OK"), and conduitctl stats --json on b
# counts each kind (delta over the injection >= N in the counter for that kind). The window
# kind is a lower bound only: transport.rx_out_of_sequence also counts the transfer's own
# go-back-N events when b's af_packet ring overflows on a loaded machine.
#
#   wire_inject_test.sh [BUILD_DIR]
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
# shellcheck disable=SC2119  # no tools beyond ip and tc to require
netns_require_root
if ! /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no scapy (apt-get install python3-scapy)"
  exit 77
fi
daemon_test_init wi "${1:-}"
export CONDUITD_IDLE_MODE=adaptive
n=${INJECT_N:-20}

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
    "198.18.$net.11/24" "$lcore" "cdwi$$$h"
  sed -i "/^  address:/a\\  gateway: 198.18.$net.254" "$work/$h.yaml"
  [[ $h == a ]] || sed -i "/^  address:/a\\  address6: fe80::c0:b1/64" "$work/$h.yaml"
  conduitd_start "$h" "$work/$h.yaml" "$work/conduitd-$h.log"
}
start_daemon a || fail "conduitd a did not start"
start_daemon b || fail "conduitd b did not start"
ctl_b() { netns_exec b "$ctl" --socket "$work/b.sock" "$@"; }

echo "== building the bad frames (scapy)"
b_mac=$(netns_exec b cat /sys/class/net/eth0/address)
netns_exec r /usr/bin/python3 - "$b_mac" "$n" "$work/frames.json" >"$work/build.out" 2>&1 <<'PY' ||
import json
import sys
import zlib
from scapy.all import Ether, IP, IPv6, IPv6ExtHdrHopByHop, IPv6ExtHdrFragment, UDP, Raw, sendp, \
    raw, conf
from scapy.layers.inet6 import ICMPv6ND_NS
from scapy.contrib.roce import BTH

# Built before the transfer (scapy is slow to load and to build with, the more so on a loaded
# machine), for a placeholder QPN the sender replaces with the live one.
b_mac, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
qpn = 0
conf.verb = 0
PEER, DAEMON, STRANGER = "198.18.0.11", "198.18.1.11", "198.18.0.99"
SEND_ONLY, WRITE_ONLY = 0x04, 0x0A

def frame(bth, payload=b"", src=PEER):
    # As conduit and rxe send: DF, IP ID 0 (the ICRC covers it), UDP checksum 0.
    return (Ether(dst=b_mac) / IP(src=src, dst=DAEMON, flags="DF", id=0, tos=0x6A, ttl=63) /
            UDP(sport=0xC0DE, dport=4791, chksum=0) / bth / Raw(payload))

far_psn = lambda i: (0x7FFFFF + i * 7919) & 0xFFFFFF
DAEMON6, STRANGER6 = "fe80::c0:b1", "fe80::99"

def frame6(bth, payload=b"", ext=None, valid_icrc=False):
    # scapy computes no ICRC over IPv6 (it writes 0): with valid_icrc the frame gets the one
    # scapy's IPv4 recipe (compute_icrc) gives over IPv6, its pseudo-header built by scapy with
    # the variant fields set to ones by name (traffic class, flow label, hop limit; UDP
    # checksum; FECN, BECN, reserved): like scapy's IPv4 ICRCs, independent of
    # tests/common/roce_icrc.py, which the sender checks against it.
    ip = IPv6(src=STRANGER6, dst=DAEMON6, tc=0x6A, hlim=64)
    if ext is not None:
        ip = ip / ext
    pkt = Ether(dst=b_mac) / ip / UDP(sport=0xC0DE, dport=4791, chksum=0) / bth / Raw(payload)
    b = bytearray(raw(pkt))
    if valid_icrc:
        ps = pkt[IPv6].copy()
        ps.tc, ps.fl, ps.hlim = 0xFF, 0xFFFFF, 0xFF
        ps[UDP].chksum = 0xFFFF
        ps[BTH].fecn, ps[BTH].becn, ps[BTH].resv6 = 1, 1, 0x3F
        b[-4:] = struct.pack("<I", zlib.crc32(b"\xff" * 8 + raw(ps)[:-4]) & 0xFFFFFFFF)
    return Ether(bytes(b))

def truncated6(i):
    b = bytearray(raw(frame6(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"t" * 64)))
    b[18:20] = struct.pack(">H", 2000)  # payload length: far past the frame
    return Ether(bytes(b))
UD_SEND_ONLY, GSI_QKEY = 0x64, 0x80010000
import struct
def mad(i, method=0x03):
    # A CM REQ (attribute 0x0010) for rdma_cm's TCP port 9 from QPN 0x100 + i: a real request.
    hdr = struct.pack(">BBBBHHQHHI", 1, 0x07, 2, method, 0, 0, 0x5000 + i, 0x0010, 0, 0)
    body = struct.pack(">I4xQQ4xIII", 0x1000 + i, 0x01060009, 0x1122, 0, (0x100 + i) << 8 | 1, 1)
    body += struct.pack(">II", 0xA0, 0x123456 << 8 | 0xA7)
    body += struct.pack(">HBBHH", 0xFFFF, 0x37, 0xF0, 0xFFFF, 0xFFFF)
    body += bytes(10) + b"\xff\xff" + bytes([198, 18, 0, 11]) + bytes(10) + b"\xff\xff"
    body += bytes([198, 18, 1, 11]) + bytes([0, 0, 0, 0, 0, 64, 0, 19 << 3]) + bytes(44)
    body += bytes([0, 0x40, 0x12, 0x34]) + bytes(12) + bytes([198, 18, 0, 11])
    body += bytes(12) + bytes([198, 18, 1, 11])
    m = hdr + body
    return m + bytes(256 - len(m))
deth = lambda qkey=GSI_QKEY: struct.pack(">IBBH", qkey, 0, 0, 1)  # source QP 1
kinds = {
    "icrc": lambda i: frame(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i), icrc=0xDEADBEEF),
                            b"x" * 64),
    # RETH is 16 bytes (VA, R_Key, length); only 8 are there.
    "truncated": lambda i: frame(BTH(opcode=WRITE_ONLY, dqpn=qpn, psn=far_psn(i)), b"\0" * 8),
    "opcode": lambda i: frame(BTH(opcode=0x1F, dqpn=qpn, psn=far_psn(i)), b"y" * 64),
    "bth_version": lambda i: frame(BTH(opcode=SEND_ONLY, version=1, dqpn=qpn, psn=far_psn(i)),
                                   b"y" * 64),
    "pkey": lambda i: frame(BTH(opcode=SEND_ONLY, pkey=0x1234, dqpn=qpn, psn=far_psn(i)),
                            b"y" * 64),
    "pad_count": lambda i: frame(BTH(opcode=SEND_ONLY, padcount=3, dqpn=qpn, psn=far_psn(i)),
                                 b"z"),
    "unknown_qp": lambda i: frame(BTH(opcode=SEND_ONLY, dqpn=(qpn ^ 0x5A5A5A) or 3,
                                      psn=far_psn(i)), b"y" * 64),
    "wrong_peer": lambda i: frame(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"y" * 64,
                                  src=STRANGER),
    "window": lambda i: frame(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"w" * 64),
    "gsi_icrc": lambda i: frame(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i, icrc=0xDEADBEEF),
                                deth() + mad(i)),
    "gsi_qkey": lambda i: frame(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i), deth(0x1234) + mad(i)),
    "gsi_short": lambda i: frame(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i), deth() + mad(i)[:100]),
    "gsi_method": lambda i: frame(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i),
                                  deth() + mad(i, method=0x99)),
    "gsi_req": lambda i: frame(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i), deth() + mad(i)),
    "v6_icrc": lambda i: frame6(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"6" * 64),
    "v6_wrong_peer": lambda i: frame6(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"6" * 64,
                                      valid_icrc=True),
    "v6_ext_header": lambda i: frame6(BTH(opcode=SEND_ONLY, dqpn=qpn, psn=far_psn(i)), b"6" * 64,
                                      ext=IPv6ExtHdrHopByHop() if i % 2 else
                                      IPv6ExtHdrFragment(offset=0, m=0, id=i),
                                      valid_icrc=False),
    "v6_truncated": truncated6,
    "v6_ndp_hops": lambda i: Ether(dst="33:33:ff:c0:00:b1") /
                             IPv6(src=STRANGER6, dst="ff02::1:ffc0:b1", hlim=64) /
                             ICMPv6ND_NS(tgt=DAEMON6),
    "v6_gsi": lambda i: frame6(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i), deth() + mad(i),
                               valid_icrc=True),
    "v6_gsi_icrc": lambda i: frame6(BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=i), deth() + mad(i),
                                    valid_icrc=False),
}
# Which kinds carry the live QP's number (the rest keep theirs), and which were built with a valid
# ICRC (the sender checks that its own ICRC agrees with scapy's on these before it patches them,
# and disagrees on the others).
live = {"icrc", "truncated", "opcode", "bth_version", "pkey", "pad_count", "wrong_peer", "window",
        "v6_icrc", "v6_wrong_peer", "v6_ext_header", "v6_truncated"}
bad_icrc = {"icrc", "gsi_icrc", "v6_icrc", "v6_ext_header", "v6_truncated", "v6_ndp_hops",
            "v6_gsi_icrc"}
json.dump([{"kind": kind, "qpn": "live" if kind in live else "other" if kind == "unknown_qp"
            else None, "valid_icrc": kind not in bad_icrc,
            "frames": [raw(make(i)).hex() for i in range(n)]} for kind, make in kinds.items()],
          open(out, "w"))
PY
  fail "building the frames failed: $(cat "$work/build.out")"

echo "== send_bw a -> b with --check, 15 s"
netns_exec b timeout 60 "$perf" send_bw --socket "$work/b.sock" -x 198.18.1.11 -W 30 -e \
  >"$work/server.out" 2>"$work/server.err" &
spid=$!
sleep 0.3
netns_exec a timeout 60 "$perf" send_bw 198.18.1.1 -s 4096 -D 15 --check -W 30 -e \
  --socket "$work/a.sock" -x 198.18.0.11 >"$work/client.out" 2>"$work/client.err" &
cpid=$!

# Wait until b's QP receives, then take its QPN.
qp=""
for _ in $(seq 100); do
  qp=$(ctl_b qps --json | /usr/bin/python3 -c '
import json, sys
q = [q for q in json.load(sys.stdin) if q["state"] == "RTS" and q["rx_bytes"] > 0]
print(q[0]["qpn"] if q else "")')
  [[ -z $qp ]] || break
  sleep 0.1
done
[[ -n $qp ]] || fail "no QP in b received data within 10 s"
echo "b's QP $qp is receiving; injecting $n frames of each kind from r"

before=$(ctl_b stats --json)
# No scapy here: the frames are built; this puts the live QPN in them, renews each ICRC that was
# valid (tests/common/roce_icrc.py, checked first against the ICRC scapy gave each frame), and
# sends them from r's interface to b with a raw socket.
netns_exec r env PYTHONPATH="$src/tests/common" /usr/bin/python3 - "$work/frames.json" "$qp" \
  >"$work/inject.out" 2>&1 <<'PY' ||
import json, socket, sys, time
from roce_icrc import bth_offset, icrc
kinds, qpn = json.load(open(sys.argv[1])), int(sys.argv[2])

s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("tob", 0))
for k in kinds:
    for h in k["frames"]:
        f = bytearray.fromhex(h)
        # The ICRC in the frame's last 4 bytes (some kinds' IP lengths disagree on purpose).
        if bth_offset(f) and k["valid_icrc"] != (icrc(f, True) == bytes(f[-4:])):
            sys.exit(f"{k['kind']}: scapy's ICRC and this one disagree; the test is broken")
        if k["qpn"]:
            dqpn = qpn if k["qpn"] == "live" else (qpn ^ 0x5A5A5A) or 3
            o = bth_offset(f)
            f[o + 5:o + 8] = dqpn.to_bytes(3, "big")
            if k["valid_icrc"]:
                f[-4:] = icrc(f, True)
        s.send(f)
        time.sleep(0.002)
    print(f"sent {len(k['frames'])} x {k['kind']}", flush=True)
PY
  fail "the injector failed: $(cat "$work/inject.out")"
cat "$work/inject.out"
sleep 0.5
after=$(ctl_b stats --json)
# The injection (and the counters) must fall inside the transfer, or it proves nothing.
kill -0 "$cpid" 2>/dev/null || fail "the transfer ended before the injection did"

crc=0
wait "$cpid" || crc=$?
wait "$spid" || crc=$((crc == 0 ? 1 : crc))
cat "$work/client.out"
[[ $crc -eq 0 ]] || fail "the transfer failed (exit $crc)"
grep -q 'check: OK' "$work/client.out" || fail "the transfer did not check OK"

verdict=0
/usr/bin/python3 - "$before" "$after" "$n" <<'PY' || verdict=$?
import json, sys
before, after, n = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
delta = lambda k: after.get(k, 0) - before.get(k, 0)
ok = True
def expect(kind, keys):
    global ok
    got = sum(delta(k) for k in keys)
    good = got >= n
    print(f"{'ok  ' if good else 'FAIL'} {kind:12s} {' + '.join(keys)}: +{got} (sent {n})")
    ok &= good
expect("icrc", ["engine.rx_drop.icrc"])
expect("truncated", ["engine.rx_drop.truncated"])
expect("opcode", ["engine.rx_drop.opcode", "engine.rx_drop.opcode_unsupported"])
expect("bth_version", ["engine.rx_drop.bth_version"])
expect("pkey", ["engine.rx_drop.pkey"])
expect("pad_count", ["engine.rx_drop.pad_count", "engine.rx_drop.length"])
expect("unknown_qp", ["engine.rx_unknown_qp"])
expect("wrong_peer", ["engine.rx_wrong_peer"])
expect("window", ["transport.rx_out_of_sequence", "transport.rx_duplicates"])
# gsi_icrc, gsi_qkey, gsi_short, v6_gsi_icrc: the GSI framing refuses them; gsi_method: the
# CM codec.
got = delta("cm.gsi_rx_dropped")
print(f"{'ok  ' if got >= 4 * n else 'FAIL'} gsi framing+v6 cm.gsi_rx_dropped: +{got} (sent {4 * n})")
ok &= got >= 4 * n
expect("gsi_method", ["cm.rx_malformed"])
# IPv6: the ICRC and wrong-peer counters also hold the IPv4 kinds' n each.
got = delta("engine.rx_drop.icrc")
print(f"{'ok  ' if got >= 2 * n else 'FAIL'} icrc+v6_icrc engine.rx_drop.icrc: +{got} (sent {2 * n})")
ok &= got >= 2 * n
got = delta("engine.rx_wrong_peer")
print(f"{'ok  ' if got >= 2 * n else 'FAIL'} wrong_peer+v6 engine.rx_wrong_peer: +{got} (sent {2 * n})")
ok &= got >= 2 * n
expect("v6_ext_header", ["net.rx_drop.ipv6_ext_header"])
expect("v6_truncated", ["net.rx_drop.ipv6_truncated"])
expect("v6_ndp_hops", ["net.rx_drop.ndp_bad_hop_limit"])
got = delta("cm.rejects_sent")
print(f"{'ok  ' if got >= 2 * n else 'FAIL'} gsi_req+v6_gsi cm.rejects_sent: +{got} (sent {2 * n})")
ok &= got >= 2 * n
print("every non-zero drop counter that moved:",
      {k: delta(k) for k in sorted(after) if isinstance(after[k], int) and delta(k) and
       ("drop" in k or "unknown" in k or "wrong" in k or "out_of_seq" in k or "dupl" in k)})
sys.exit(0 if ok else 1)
PY
[[ $verdict -eq 0 ]] || fail "a kind of bad frame was not counted"
echo "PASS"
