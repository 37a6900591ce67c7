"""Wire-format conformance: our frames against tshark and scapy, and
scapy-built frames against our parser.

Usage: wire_conformance.py TOOL WORKDIR   (TOOL = wire_frames_tool)
Exit status: 0 pass, 1 fail, 77 when tshark or scapy is missing.
"""
import os
import shutil
import subprocess
import sys

SKIP = 77


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    tshark = shutil.which("tshark")
    if tshark is None:
        print("SKIP: tshark not installed (apt-get install tshark)")
        return SKIP
    try:
        from scapy.all import Ether, Dot1Q, IP, UDP, Raw, raw, rdpcap, wrpcap
        from scapy.contrib.roce import BTH, AETH, cnp
    except ImportError as e:
        print(f"SKIP: scapy with scapy.contrib.roce not available ({e})")
        return SKIP
    os.makedirs(workdir, exist_ok=True)
    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL:", msg)

    # 1. Every frame kind we emit, decoded by tshark.
    ours = os.path.join(workdir, "conduit-frames.pcap")
    emitted = subprocess.run([tool, "emit", ours], check=True, capture_output=True,
                             text=True).stdout.split("\n")
    expected = [line.split() for line in emitted if line.strip()]
    fields = ["frame.number", "frame.protocols", "infiniband.bth.opcode",
              "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.aeth.syndrome",
              "infiniband.aeth.msn"]
    cmd = [tshark, "-r", ours, "-T", "fields", "-E", "separator=;", "-o",
           "infiniband.dissect_eoib:FALSE"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        # Older/newer tshark may not know the preference; retry without it.
        cmd = [c for c in cmd if c not in ("-o", "infiniband.dissect_eoib:FALSE")]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = [line.split(";") for line in out.stdout.splitlines()]
    if len(rows) != len(expected):
        fail(f"tshark saw {len(rows)} frames, we wrote {len(expected)}")
    for exp, row in zip(expected, rows):
        idx, opcode, destqp, psn, syndrome, msn, name = exp
        protos = row[1]
        if "infiniband" not in protos:
            fail(f"{name}: tshark did not decode RRoCE (protocols {protos})")
            continue
        if int(row[2], 0) != int(opcode):
            fail(f"{name}: tshark opcode {row[2]} != {opcode}")
        if int(row[3], 0) != int(destqp):
            fail(f"{name}: tshark destqp {row[3]} != {destqp}")
        if int(row[4], 0) != int(psn):
            fail(f"{name}: tshark psn {row[4]} != {psn}")
        if row[5]:  # AETH present: syndrome and MSN must match
            if int(row[5], 0) != int(syndrome) or int(row[6], 0) != int(msn):
                fail(f"{name}: tshark AETH {row[5]}/{row[6]} != {syndrome}/{msn}")
        elif int(opcode) in (0x0D, 0x0F, 0x10, 0x11, 0x12):
            fail(f"{name}: tshark shows no AETH")
    print(f"tshark: {len(rows)} frames decoded as RRoCE with the expected opcode/QP/PSN")

    # 2. scapy recomputes every ICRC to the bytes we wrote.
    for exp, pkt in zip(expected, rdpcap(ours)):
        name = exp[-1]
        original = raw(pkt)
        if BTH not in pkt:
            fail(f"{name}: scapy did not dissect a BTH")
            continue
        again = Ether(original)
        again[BTH].icrc = None
        if raw(again) != original:
            fail(f"{name}: scapy computes a different ICRC")
    print(f"scapy: {len(expected)} ICRCs valid")

    # 3. scapy-built frames through our parser.
    def l2(vlan=False):
        e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        return e / Dot1Q(vlan=100, prio=3) if vlan else e

    def ip(**kw):
        base = dict(src="198.18.0.1", dst="198.18.0.2", flags="DF", ttl=64, id=0, tos=0x6A)
        base.update(kw)
        return IP(**base)

    def udp(**kw):
        base = dict(sport=0xC123, dport=4791, chksum=0)
        base.update(kw)
        return UDP(**base)

    cases = []  # (name, frame bytes, expected "accept" or "drop REASON")

    def add(name, frame, want):
        cases.append((name, frame if isinstance(frame, bytes) else raw(frame), want))

    cnp_vec = (l2() / IP(src="10.0.17.1", dst="10.0.18.1", tos=0xC2, id=0x718C, flags="DF",
                         ttl=64) / UDP(sport=0, dport=4791, chksum=0) / cnp(0x118))
    add("brief_cnp", cnp_vec, "accept")
    cnp_bytes = raw(cnp_vec)
    if cnp_bytes[-4:] != bytes.fromhex("82fd002a"):
        fail(f"scapy's CNP ICRC {cnp_bytes[-4:].hex()} != brief's 82fd002a")
    uc_vec = (l2() / IP(src="192.168.0.7", dst="192.168.0.7", tos=1, id=1144, flags="DF", ttl=64)
              / UDP(sport=49152, dport=4791, chksum=0xACA2)
              / BTH(opcode=0x24, migreq=1, padcount=2, dqpn=211, psn=13571856)
              / Raw(bytes.fromhex("4630818be28935d90e9a95505401be885e500000")))
    if raw(uc_vec)[-4:] != bytes.fromhex("78f353f3"):
        fail(f"scapy's UC vector ICRC {raw(uc_vec)[-4:].hex()} != brief's 78f353f3")
    # A valid ICRC but an Unreliable Connected opcode: ours is RC only.
    add("brief_uc_send_only", uc_vec, "drop opcode")

    payload = bytes(range(1, 65))
    send = l2() / ip() / udp() / BTH(opcode=4, dqpn=0xABC, psn=5, ackreq=1) / Raw(payload)
    add("rc_send_only", send, "accept")
    send_pad = (l2() / ip() / udp() / BTH(opcode=4, padcount=1, dqpn=0xABC, psn=6)
                / Raw(payload[:7] + b"\x00"))
    add("rc_send_only_pad1", send_pad, "accept")
    add("rc_send_only_vlan", l2(True) / ip() / udp() / BTH(opcode=4, dqpn=1) / Raw(payload),
        "accept")
    ack = l2() / ip() / udp() / BTH(opcode=0x11, dqpn=0x11, psn=5) / AETH(syndrome=0x1F, msn=1)
    add("rc_ack", ack, "accept")
    nak = l2() / ip() / udp() / BTH(opcode=0x11, dqpn=0x11, psn=5) / AETH(syndrome=0x60, msn=1)
    add("rc_nak_seq", nak, "accept")
    reth = (0x7F0012345000).to_bytes(8, "big") + (0x1234).to_bytes(4, "big") + (64).to_bytes(4, "big")
    add("rc_write_only", l2() / ip() / udp() / BTH(opcode=0x0A, dqpn=2) / Raw(reth + payload),
        "accept")
    add("rc_read_request", l2() / ip() / udp() / BTH(opcode=0x0C, dqpn=2) / Raw(reth), "accept")
    atomic = bytes(28)
    add("rc_fetch_add", l2() / ip() / udp() / BTH(opcode=0x14, dqpn=2) / Raw(atomic), "accept")

    # CE-marked copies (scapy recomputes the IP checksum; the ICRC is untouched).
    for name, pkt in (("rc_send_only", send), ("brief_cnp", cnp_vec), ("rc_ack", ack)):
        marked = Ether(raw(pkt))
        marked[IP].tos |= 3
        marked[IP].ttl -= 1
        del marked[IP].chksum
        add(name + "_ce", marked, "accept")
    fecn = Ether(raw(send))
    fecn[BTH].fecn = 1
    add("rc_send_only_fecn", fecn, "accept")  # BTH byte 4 is masked in the ICRC

    # Truncated copies.
    s = raw(send)
    add("truncated_in_payload", s[:-10], "drop ip_total_length")
    add("truncated_in_bth", s[:14 + 28 + 6], "drop ip_total_length")
    add("truncated_in_ip", s[:20], "drop truncated")
    short = Ether(s)
    short[Raw].load = payload[:-8]
    del short[IP].len, short[IP].chksum, short[UDP].len
    add("truncated_lengths_fixed", short, "drop icrc")  # stale ICRC kept

    # Corrupted copies.
    for off, name in ((60, "payload"), (14 + 28 + 7, "bth_destqp"), (14 + 16, "ip_dst"),
                      (14 + 20, "udp_sport"), (len(s) - 1, "icrc")):
        c = bytearray(s)
        c[off] ^= 0x04
        want = "drop ip_checksum" if name == "ip_dst" else "drop icrc"
        add("corrupt_" + name, bytes(c), want)
    bth_only = bytes.fromhex("0400ffff0000000100000001")
    bad_port = l2() / ip() / UDP(sport=0xC123, dport=4792) / Raw(bth_only + payload + bytes(4))
    add("udp_port_4792", bad_port, "drop udp_port")
    add("ip_options", l2() / ip(options=b"\x01\x01\x01\x01") / udp() / BTH(opcode=4)
        / Raw(payload), "drop ip_options")
    add("ip_fragment", l2() / ip(flags="MF") / udp() / BTH(opcode=4) / Raw(payload),
        "drop ip_fragment")
    add("bad_pkey", l2() / ip() / udp() / BTH(opcode=4, pkey=0x1234) / Raw(payload), "drop pkey")
    add("ud_opcode", l2() / ip() / udp() / BTH(opcode=0x64) / Raw(bytes(8) + payload),
        "drop opcode")
    add("ack_with_payload", l2() / ip() / udp() / BTH(opcode=0x11) / AETH() / Raw(bytes(4)),
        "drop length")

    built = os.path.join(workdir, "scapy-frames.pcap")
    wrpcap(built, [Ether(c[1]) for c in cases])
    verdicts = subprocess.run([tool, "parse", built], check=True, capture_output=True,
                              text=True).stdout.splitlines()
    if len(verdicts) != len(cases):
        fail(f"parser gave {len(verdicts)} verdicts for {len(cases)} frames")
    for (name, _, want), line in zip(cases, verdicts):
        got = line.split(" ", 1)[1]
        if got != want:
            fail(f"scapy frame {name}: parser says '{got}', expected '{want}'")
    print(f"parser: {len(cases)} scapy-built frames accepted/rejected as expected")

    # Our parser also accepts every frame we emitted.
    for line in subprocess.run([tool, "parse", ours, "256"], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        if not line.endswith("accept"):
            fail(f"our own frame {line}")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("wire conformance: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
