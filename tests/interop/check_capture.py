"""Checks a capture of conduit <-> rxe RoCEv2 traffic with independent decoders.

Usage: check_capture.py PCAP CONDUIT_IP PEER_IP [--need-opcodes N,N,...] [--want-retransmit]
                         [--conduit-ip6 ADDR]

- tshark decodes every UDP 4791 frame as RRoCE (InfiniBand BTH) and reports its opcode;
- every opcode is one this exchange may carry (RC SEND/WRITE/READ/ACK/atomics, and UD
  SEND_ONLY to QP 1: the IB CM);
- both directions carry RoCE frames; every opcode in --need-opcodes (decimal) appears;
- atomics ran once each: resent requests get the same original value, and fetch-and-adds
  on one word step by the addend in PSN order;
- scapy recomputes the ICRC (scapy.contrib.roce) of up to 30 frames per direction and opcode,
  spread over the capture, to the bytes on the wire;
- with --conduit-ip6, RoCEv2 over IPv6 too: frames between that address and one IPv6 peer
  (rxe's GID, e.g. its link-local one) are accepted, IPv6 frames must go both ways, and their
  ICRCs (which scapy does not compute for IPv6) are recomputed with tests/common/roce_icrc.py
  (zlib's CRC-32 over the masked pseudo-header: traffic class, flow label, hop limit, UDP
  checksum, BTH byte 4);
- per direction: retransmitted request packets (a destination QP and PSN seen before) and NAKs;
  with --want-retransmit both directions must have retransmitted (go-back-N exercised).
Prints a summary per direction and opcode. Exit 0 pass, 1 fail, 77 when tshark/scapy is missing.
"""
import collections
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import roce_icrc  # noqa: E402

SKIP = 77
SAMPLE_PER_CLASS = 30
RC_OPCODES = {
    0: "SEND_FIRST", 1: "SEND_MIDDLE", 2: "SEND_LAST", 3: "SEND_LAST_IMM", 4: "SEND_ONLY",
    5: "SEND_ONLY_IMM", 6: "WRITE_FIRST", 7: "WRITE_MIDDLE", 8: "WRITE_LAST",
    9: "WRITE_LAST_IMM", 10: "WRITE_ONLY", 11: "WRITE_ONLY_IMM", 12: "READ_REQUEST",
    13: "READ_RESP_FIRST", 14: "READ_RESP_MIDDLE", 15: "READ_RESP_LAST", 16: "READ_RESP_ONLY",
    17: "ACK", 18: "ATOMIC_ACK", 19: "COMPARE_SWAP", 20: "FETCH_ADD", 0x81: "CNP",
    0x64: "UD_SEND_ONLY",  # the GSI (QP 1): connection-manager MADs
}


def udp_payloads(pcap, reader):
    """(src, dst, RoCE bytes from the BTH on) of every IPv4 UDP 4791 frame, read raw."""
    for data, _meta in reader(pcap):
        if len(data) < 14 + 20 + 8 + 12 or data[12:14] != b"\x08\x00" or data[23] != 17:
            continue
        ihl = (data[14] & 0x0F) * 4
        udp = 14 + ihl
        if int.from_bytes(data[udp + 2:udp + 4], "big") != 4791:
            continue
        src = ".".join(str(b) for b in data[26:30])
        dst = ".".join(str(b) for b in data[30:34])
        yield src, dst, data[udp + 8:]


def check_atomics(pcap, reader, fail):
    """Atomics ran once each, whichever side answered: every copy of an ATOMIC_ACKNOWLEDGE
    for one request carries the same original value (a resent request is answered from the
    responder's saved result, not run again), and a QP's fetch-and-adds on one word return
    values that step by the addend in PSN order (each ran exactly once, in order)."""
    M = 1 << 24
    requests = collections.defaultdict(set)  # (requester, responder, psn) -> {(qpn, op, va, add)}
    acks = collections.defaultdict(set)      # (requester, responder, psn) -> {orig}
    for src, dst, b in udp_payloads(pcap, reader):
        op = b[0]
        psn = int.from_bytes(b[9:12], "big") & 0xFFFFFF
        if op in (19, 20) and len(b) >= 40:
            qpn = int.from_bytes(b[5:8], "big")
            va = int.from_bytes(b[12:20], "big")
            add = int.from_bytes(b[24:32], "big")
            requests[(src, dst, psn)].add((qpn, op, va, add))
        elif op == 18 and len(b) >= 24:
            acks[(dst, src, psn)].add(int.from_bytes(b[16:24], "big"))
    if not requests:
        return
    replays = 0
    for key, origs in acks.items():
        if len(origs) > 1:
            fail(f"atomic {key[1]} -> {key[0]} PSN {key[2]}: answered with different "
                 f"original values {sorted(origs)} (run more than once?)")
        replays += 1
    # Per responder QP: its fetch-and-adds (one addend), word by word in PSN order.
    by_qp = collections.defaultdict(list)
    for (req, resp, psn), kinds in requests.items():
        if len(kinds) != 1:
            continue  # two QPs' PSNs collided: ambiguous, not checked
        (qpn, op, va, add), = kinds
        by_qp[(req, resp, qpn)].append((psn, op, va, add))
    sequences = 0
    for (req, resp, qpn), reqs in by_qp.items():
        if {r[1] for r in reqs} != {20} or len({r[3] for r in reqs}) != 1:
            continue
        add = reqs[0][3]
        p0 = min(reqs, key=lambda r: r[0])[0]
        if max(r[0] for r in reqs) - p0 > M // 2:  # the PSNs wrapped: order from the top half
            p0 = min((r for r in reqs if r[0] >= M // 2), key=lambda r: r[0])[0]
        words = collections.defaultdict(list)
        for psn, _op, va, _add in reqs:
            words[va].append((psn - p0) % M)
        for va, offsets in words.items():
            base = set()
            for k, off in enumerate(sorted(offsets)):
                origs = acks.get((req, resp, (p0 + off) % M))
                if origs and len(origs) == 1:
                    base.add((next(iter(origs)) - k * add) % (1 << 64))
            if len(base) > 1:
                fail(f"fetch-and-add {req} -> {resp} QP {qpn:#x} word {va:#x}: the original "
                     f"values do not step by {add} in PSN order (ran twice or out of order)")
            sequences += 1
    print(f"atomics: {len(acks)} answered requests agree across resends, "
          f"{sequences} word(s) of fetch-and-adds step by their addend")


def main():
    args = sys.argv[1:]
    need = set()
    want_retransmit = "--want-retransmit" in args
    conduit_ip6 = None
    if "--conduit-ip6" in args:
        i = args.index("--conduit-ip6")
        conduit_ip6 = args[i + 1]
        del args[i:i + 2]
    if want_retransmit:
        args.remove("--want-retransmit")
    if "--need-opcodes" in args:
        i = args.index("--need-opcodes")
        need = {int(x) for x in args[i + 1].split(",") if x}
        del args[i:i + 2]
    pcap, conduit_ip, peer_ip = args
    tshark = shutil.which("tshark")
    if tshark is None:
        print("SKIP: tshark not installed")
        return SKIP
    try:
        from scapy.all import IP, Ether, RawPcapReader, raw
        from scapy.contrib.roce import BTH
    except ImportError as e:
        print(f"SKIP: scapy.contrib.roce not available ({e})")
        return SKIP

    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL:", msg)

    out = subprocess.run(
        [tshark, "-r", pcap, "-Y", "udp.dstport == 4791", "-T", "fields", "-E", "separator=;",
         "-e", "frame.number", "-e", "frame.protocols", "-e", "ip.src", "-e", "ip.dst",
         "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn",
         "-e", "infiniband.bth.destqp", "-e", "infiniband.aeth.syndrome",
         "-e", "ipv6.src", "-e", "ipv6.dst"],
        capture_output=True, text=True, check=True).stdout
    peers6 = set()  # the IPv6 addresses conduit talked to
    frames6 = collections.Counter()
    counts = collections.Counter()
    seen_psn = set()
    retransmits = collections.Counter()
    naks = collections.Counter()
    frames = 0
    for line in out.splitlines():
        number, protos, src, dst, opcode, psn, destqp, syndrome, src6, dst6 = line.split(";")
        frames += 1
        if src6:  # RoCEv2 over IPv6
            if conduit_ip6 is None or conduit_ip6 not in (src6, dst6):
                fail(f"frame {number}: IPv6 {src6} -> {dst6} does not involve conduit's "
                     f"{conduit_ip6}")
            else:
                peers6.add(dst6 if src6 == conduit_ip6 else src6)
                frames6["conduit->rxe" if src6 == conduit_ip6 else "rxe->conduit"] += 1
            src, dst = (conduit_ip, peer_ip) if src6 == conduit_ip6 else (peer_ip, conduit_ip)
        if "infiniband" not in protos or not opcode:
            fail(f"frame {number}: tshark did not decode RRoCE ({protos})")
            continue
        op = int(opcode, 0)
        if op not in RC_OPCODES:
            fail(f"frame {number}: unexpected opcode {op}")
        if {src, dst} != {conduit_ip, peer_ip}:
            fail(f"frame {number}: {src} -> {dst} is not between {conduit_ip} and {peer_ip}")
        way = "conduit->rxe" if src == conduit_ip else "rxe->conduit"
        counts[(way, op)] += 1
        if op == 17:
            if syndrome and 0x60 <= int(syndrome, 0) <= 0x7F:
                naks[way] += 1
        elif op in RC_OPCODES and op != 0x81:
            key = (way, int(destqp, 0), int(psn, 0))
            if key in seen_psn:
                retransmits[way] += 1
            seen_psn.add(key)
    if frames == 0:
        fail("no RoCEv2 frames in the capture")
    if conduit_ip6 is not None:
        print(f"IPv6: {frames6['conduit->rxe']} frames conduit->rxe, {frames6['rxe->conduit']} "
              f"rxe->conduit, peer(s) {sorted(peers6)}")
        if len(peers6) > 1:
            fail(f"conduit's IPv6 frames went to more than one peer: {sorted(peers6)}")
        for way in ("conduit->rxe", "rxe->conduit"):
            if frames6[way] == 0:
                fail(f"no RoCEv2-over-IPv6 frames {way}")
    for way in ("conduit->rxe", "rxe->conduit"):
        summary = ", ".join(f"{RC_OPCODES.get(op, op)} {n}"
                            for (w, op), n in sorted(counts.items()) if w == way)
        print(f"tshark {way}: {summary or 'nothing'}")
        if not summary:
            fail(f"no RoCE frames {way}")
        print(f"  {way}: {retransmits[way]} retransmitted request packets, {naks[way]} NAKs")
        if want_retransmit and retransmits[way] == 0:
            fail(f"no retransmission {way}: go-back-N was not exercised")
    seen = {op for (_, op) in counts}
    for op in sorted(need - seen):
        fail(f"opcode {RC_OPCODES.get(op, op)} never seen")

    # scapy dissects slowly (~10 ms a frame on a busy machine): it recomputes the ICRC of up to
    # SAMPLE_PER_CLASS frames of each (direction, opcode), spread over the capture.
    by_class = collections.defaultdict(list)
    for line in out.splitlines():
        number, _protos, src, _dst, opcode, *_ = line.split(";")
        if opcode:
            by_class[(src, int(opcode, 0))].append(int(number))
    sample = set()
    for numbers in by_class.values():
        step = max(1, len(numbers) // SAMPLE_PER_CLASS)
        sample.update(numbers[::step][:SAMPLE_PER_CLASS])
    checked = 0
    checked6 = 0
    for i, (data, _meta) in enumerate(RawPcapReader(pcap), 1):
        if i not in sample:
            continue
        ip = roce_icrc.ip_offset(data)  # past a VLAN tag too
        if ip is not None and data[ip - 2:ip] == roce_icrc.ETH_IPV6:
            if roce_icrc.bth_offset(data) is None or roce_icrc.datagram_end(data) is None:
                fail(f"frame {i}: IPv6 frame without a UDP datagram to port 4791 in it")
            elif not roce_icrc.icrc_valid(data):
                o = roce_icrc.icrc_offset(data)
                fail(f"frame {i}: IPv6 ICRC {data[o:o + 4].hex()} != "
                     f"{roce_icrc.icrc(data).hex()} recomputed")
            checked6 += 1
            continue
        pkt = Ether(data)
        if BTH not in pkt:
            fail(f"frame {i}: scapy did not dissect a BTH")
            continue
        again = Ether(data)
        again[BTH].icrc = None
        if raw(again) != data:
            fail(f"frame {i} ({pkt[IP].src} -> {pkt[IP].dst}): ICRC does not match scapy's")
        checked += 1
    print(f"scapy: {checked} ICRCs checked (up to {SAMPLE_PER_CLASS} per direction and opcode)")
    if conduit_ip6 is not None:
        print(f"zlib: {checked6} IPv6 ICRCs recomputed (both directions: rxe's frames check the "
              "recipe, conduit's frames against it)")
        if checked6 == 0:
            fail("no IPv6 ICRC checked")
    check_atomics(pcap, RawPcapReader, fail)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"capture OK: {frames} RoCEv2 frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
