#!/usr/bin/python3
"""Checks tests/common/roce_icrc.py (the test scripts' RoCEv2 ICRC) against references that do
not use it: the brief's two known answers (a ConnectX-4 Lx CNP, scapy's UC SEND_ONLY), every
RoCE frame of the rxe captures (Linux's ICRCs), frames built here field by field whose ICRC a
bitwise CRC-32 (no zlib) computes over a pseudo-header built with the variant fields as ones
(IPv4 and IPv6, untagged and tagged), conduit's IPv6 SEND (wire/icrc_test.cc's vector) and,
where scapy is installed, frames scapy builds (IPv4: its own ICRC; IPv6: its fields masked by
name). Each check can fail: a flipped covered byte must change the verdict, a changed masked
field must not.

  roce_icrc_test.py [CAPTURE_DIR]   (default: tests/unit/wire/data, rxe's captures)
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import roce_icrc  # noqa: E402

failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def crc32_bitwise(data):
    """CRC-32 (reflected 0xEDB88320, init and final XOR all ones) one bit at a time."""
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def ether(ethertype, vlan=None):
    tag = struct.pack(">HH", 0x8100, vlan) if vlan is not None else b""
    return bytes.fromhex("02000000000102000000000b") + tag + struct.pack(">H", ethertype)


def bth(opcode, dqpn, psn, fecn_becn=0, ackreq=0, pad=0):
    return struct.pack(">BBHBBHBBH", opcode, pad << 4, 0xFFFF, fecn_becn, dqpn >> 16,
                       dqpn & 0xFFFF, ackreq << 7, psn >> 16, psn & 0xFFFF)


def udp(sport, length, csum):
    return struct.pack(">HHHH", sport, 4791, length, csum)


def ipv4(tos, ident, ttl, csum, src, dst, length):
    return struct.pack(">BBHHHBBH4s4s", 0x45, tos, length, ident, 0x4000, ttl, 17, csum,
                       bytes(src), bytes(dst))


def ipv6(tc, fl, hlim, src, dst, plen):
    return struct.pack(">IHBB16s16s", 6 << 28 | tc << 20 | fl, plen, 17, hlim, bytes(src),
                       bytes(dst))


def built_v4(tos, ttl, csum, ucsum, byte4, payload, vlan=None):
    """(frame, expected ICRC): the frame with these values, the ICRC over the same headers
    built with the variant fields as ones."""
    n = 12 + len(payload) + 4
    def dgram(tos, ttl, csum, ucsum, byte4):
        return (ipv4(tos, 0x1234, ttl, csum, [10, 0, 0, 1], [10, 0, 0, 2], 20 + 8 + n) +
                udp(0xC123, 8 + n, ucsum) + bth(0x04, 0xABCDE, 0x123456, byte4, 1) + payload)
    want = struct.pack("<I", crc32_bitwise(b"\xff" * 8 + dgram(0xFF, 0xFF, 0xFFFF, 0xFFFF,
                                                                0xFF)))
    return ether(0x0800, vlan) + dgram(tos, ttl, csum, ucsum, byte4) + b"\0" * 4, want


def built_v6(tc, fl, hlim, ucsum, byte4, payload, vlan=None):
    """As built_v4, over IPv6 (no extension header)."""
    n = 12 + len(payload) + 4
    src = bytes.fromhex("fe80" + "00" * 13 + "01")
    dst = bytes.fromhex("20010db8" + "00" * 11 + "07")
    def dgram(tc, fl, hlim, ucsum, byte4):
        return (ipv6(tc, fl, hlim, src, dst, 8 + n) + udp(0xD00D, 8 + n, ucsum) +
                bth(0x0A, 0x11, 0xFFFFFF, byte4, 0) + payload)
    want = struct.pack("<I", crc32_bitwise(b"\xff" * 8 + dgram(0xFF, 0xFFFFF, 0xFF, 0xFFFF, 0xFF)))
    return ether(0x86DD, vlan) + dgram(tc, fl, hlim, ucsum, byte4) + b"\0" * 4, want


def read_pcap(path):
    """The frames of a classic little- or big-endian pcap file."""
    data = open(path, "rb").read()
    magic = data[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    off, frames = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack(order + "I", data[off + 8:off + 12])[0]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def with_icrc(frame):
    return frame[:-4] + roce_icrc.icrc(frame)


def valid(frame):
    """roce_icrc's verdict; a frame it does not take for RoCE (a flipped port, protocol, IP
    version or IHL bit) is not valid either."""
    try:
        return roce_icrc.icrc_valid(frame)
    except ValueError:
        return False


def flipped(frame, i, mask=0x01):
    b = bytearray(frame)
    b[i] ^= mask
    return bytes(b)


def masked_offsets(frame):
    """The frame offsets of every bit the ICRC does not cover, by field, from the headers'
    layout (not from roce_icrc): [(name, offset, bit mask)]."""
    l2 = 18 if frame[12:14] == b"\x81\x00" else 14
    ipv4 = frame[l2 - 2:l2] == b"\x08\x00"
    b = l2 + ((frame[l2] & 0x0F) * 4 if ipv4 else 40) + 8  # no IPv6 extension header here
    if ipv4:
        fields = [("IPv4 TOS", l2 + 1, 0xFF), ("IPv4 TTL", l2 + 8, 0xFF),
                  ("IPv4 checksum", l2 + 10, 0xFF), ("IPv4 checksum", l2 + 11, 0xFF)]
    else:
        fields = [("IPv6 traffic class", l2, 0x0F), ("IPv6 traffic class", l2 + 1, 0xF0),
                  ("IPv6 flow label", l2 + 1, 0x0F), ("IPv6 flow label", l2 + 2, 0xFF),
                  ("IPv6 flow label", l2 + 3, 0xFF), ("IPv6 hop limit", l2 + 7, 0xFF)]
    return fields + [("UDP checksum", b - 2, 0xFF), ("UDP checksum", b - 1, 0xFF),
                     ("BTH FECN/BECN/reserved", b + 4, 0xFF)]


def check_frame(name, frame, want=None):
    """frame's ICRC is valid (or roce_icrc gives `want` for it); a flipped bit anywhere the ICRC
    covers makes it invalid, a changed masked field keeps it valid."""
    if want is not None:
        got = roce_icrc.icrc(frame)
        check(got == want, f"{name}: ICRC {got.hex()}, expected {want.hex()}")
        frame = frame[:-4] + want
    ok = valid(frame)
    check(ok, f"{name}: ICRC {frame[-4:].hex()} is not valid" + (
        "" if ok or roce_icrc.bth_offset(frame) is None else
        f" (roce_icrc: {roce_icrc.icrc(frame).hex()})"))
    if not ok:
        return
    masked = masked_offsets(frame)
    l2 = 18 if frame[12:14] == b"\x81\x00" else 14
    unmasked_bits = 0
    for i in range(l2, len(frame) - 4):
        free = 0
        for _f, o, m in masked:
            free |= m if o == i else 0
        for bit in range(8):
            if (1 << bit) & free:
                continue
            unmasked_bits += 1
            check(not valid(flipped(frame, i, 1 << bit)),
                  f"{name}: byte {i} bit {bit} flipped, the ICRC still matches")
    check(unmasked_bits > 0, f"{name}: no covered bit")
    checks_before = checks
    for field, o, m in masked:
        check(valid(flipped(frame, o, m)),
              f"{name}: {field} (byte {o} & {m:#04x}) changed, the ICRC no longer matches")
    check(checks > checks_before, f"{name}: no masked field")
    check(not valid(flipped(frame, len(frame) - 1)),
          f"{name}: its ICRC's last byte flipped, still valid")


def main():
    capdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "unit", "wire", "data")

    # The brief's known answers (roce-dcqcn-brief.md, wire/icrc_test.cc), in an Ethernet frame.
    cnp = bytes.fromhex("45c2003c718c400040119161 0a001101 0a001201 000012b700280000"
                        "8100ffff4000011800000000" + "00" * 16)
    check_frame("brief: ConnectX-4 Lx CNP", ether(0x0800) + cnp + bytes(4),
                bytes.fromhex("82fd002a"))
    uc = bytes.fromhex("4501004004784000 4011b4d5 c0a80007 c0a80007 c00012b7002caca2"
                       "2460ffff000000d300cf1710 4630818be28935d90e9a95505401be885e500000")
    check_frame("brief: scapy UC SEND_ONLY", ether(0x0800) + uc + bytes(4),
                bytes.fromhex("78f353f3"))
    check_frame("brief: scapy UC SEND_ONLY, VLAN 100", ether(0x0800, 100) + uc + bytes(4),
                bytes.fromhex("78f353f3"))

    # conduit's IPv6 SEND only (wire/frame_test.cc; its ICRC checked bit by bit in icrc_test.cc).
    dgram6 = bytes.fromhex("66aabcde00281140 fe800000000000000000000000000001"
                           "20010db8000000000000000000000002 c12312b700280000"
                           "0400ffff0000001180123456 000102030405060708090a0b0c0d0e0f")
    check_frame("conduit IPv6 SEND only", ether(0x86DD) + dgram6 + bytes(4),
                bytes.fromhex("c8478a6a"))

    # Built here field by field, the ICRC bit by bit over the headers with ones in their
    # variant fields.
    payload = bytes(range(37)) + b"\0\0\0"
    for vlan in (None, 0x6064):
        tag = f", VLAN {vlan:#06x}" if vlan is not None else ""
        for values in ((0x6A, 63, 0xBEEF, 0, 0), (0x02, 1, 0x1234, 0xABCD, 0xC0)):
            f, want = built_v4(*values, payload, vlan)
            check_frame(f"built IPv4 {values}{tag}", f, want)
        for values in ((0x6A, 0xABCDE, 64, 0, 0), (0x03, 0, 255, 0x9999, 0x80)):
            f, want = built_v6(*values, payload, vlan)
            check_frame(f"built IPv6 {values}{tag}", f, want)

    # Ethernet padding: a zero-length SEND only over IPv4 is 58 bytes and arrives padded to 60
    # (a NIC pads it; its padding bytes may be anything). The ICRC is where the IP length says
    # the datagram ends, not the frame's last 4 bytes, and the padding is not covered.
    f, want = built_v4(0x02, 64, 0x1111, 0, 0, b"")
    unpadded = f[:-4] + want
    check(len(unpadded) == 58, f"zero-length SEND only: {len(unpadded)} bytes, expected 58")
    for pad in (b"\0\0", b"\xa5\x5a"):
        padded = unpadded + pad
        name = f"zero-length SEND only padded with {pad.hex()}"
        check(roce_icrc.icrc_offset(padded) == 54, f"{name}: ICRC at {roce_icrc.icrc_offset(padded)}")
        check(roce_icrc.icrc(padded) == want, f"{name}: ICRC {roce_icrc.icrc(padded).hex()}")
        check(valid(padded), f"{name}: not valid")
        check(not valid(flipped(padded, 42)), f"{name}: a BTH opcode bit flipped, still valid")
        check(not valid(flipped(padded, 54)), f"{name}: its ICRC flipped, still valid")
    # at_frame_end (the wire-inject sender's frames, whose lengths may disagree on purpose):
    # the ICRC over everything before the frame's last 4 bytes.
    check(roce_icrc.icrc(unpadded, True) == want, "at_frame_end: an unpadded frame's ICRC differs")
    check(roce_icrc.icrc(unpadded + b"\0\0", True) != want,
          "at_frame_end: the padding was not covered")
    # An IP length past the frame's end: no ICRC to find.
    short = unpadded[:14 + 2] + struct.pack(">H", 60) + unpadded[14 + 4:]
    try:
        roce_icrc.icrc(short)
        check(False, "an IPv4 total length past the frame: icrc() gave an ICRC")
    except ValueError:
        check(True, "")

    # Every RoCE frame Linux's rxe sent in the reference captures has a valid ICRC.
    expected = {"rxe-perftest-send-write.pcap": 20, "rxe-rc-pingpong.pcap": 12}
    for name, count in expected.items():
        frames = [f for f in read_pcap(os.path.join(capdir, name)) if roce_icrc.bth_offset(f)]
        check(len(frames) == count, f"{name}: {len(frames)} RoCE frames, expected {count}")
        for i, f in enumerate(frames):
            check_frame(f"{name} RoCE frame {i}", f)
        print(f"{name}: {len(frames)} RoCE frames checked")

    # Not RoCE: no BTH, and icrc() refuses.
    for what, f in (("UDP to port 4792", ether(0x0800) + ipv4(0, 0, 64, 0, [1] * 4, [2] * 4, 48) +
                     struct.pack(">HHHH", 1, 4792, 28, 0) + bytes(24)),
                    ("ARP", ether(0x0806) + bytes(46)),
                    ("truncated IPv6", ether(0x86DD) + bytes(30))):
        check(roce_icrc.bth_offset(f) is None, f"{what}: a BTH found")
        try:
            refused = not roce_icrc.icrc(f)
        except ValueError:
            refused = True
        check(refused, f"{what}: icrc() gave an ICRC")

    scapy_frames(payload)
    if failures:
        print(f"{len(failures)} of {checks} checks failed")
        return 1
    print(f"roce_icrc: {checks} checks passed")
    return 0


def scapy_frames(payload):
    """Frames scapy builds: IPv4 with its ICRC (scapy.contrib.roce), IPv6 with the ICRC over a
    pseudo-header scapy builds from its named fields set to ones (it computes none for IPv6)."""
    try:
        import zlib
        from scapy.all import IP, IPv6, UDP, Dot1Q, Ether, Raw, raw
        from scapy.contrib.roce import BTH
    except ImportError as e:
        print(f"scapy not installed ({e}): its frames not checked")
        return
    for i, (tos, psn, vlan) in enumerate(((0x6A, 1, None), (0xC3, 0xFFFFFF, 7), (0, 0x800000, 0))):
        l2 = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        if vlan is not None:
            l2 = l2 / Dot1Q(vlan=vlan)
        pkt = l2 / IP(src="198.18.0.1", dst="198.18.0.2", tos=tos, ttl=i + 60, id=i) / UDP(
            sport=0xC000 + i, dport=4791, chksum=i) / BTH(opcode=0x0C, dqpn=0x100 + i, psn=psn,
                                                        fecn=i & 1) / Raw(payload[:16 + i])
        check_frame(f"scapy IPv4 {i}", raw(pkt))
        pkt6 = l2 / IPv6(src="fe80::1", dst="2001:db8::%x" % (i + 1), tc=tos, fl=psn & 0xFFFFF,
                         hlim=i + 1) / UDP(sport=0xC000 + i, dport=4791, chksum=i) / BTH(
            opcode=0x11, dqpn=0x100 + i, psn=psn, becn=i & 1, icrc=0) / Raw(payload[:4 + i])
        ps = pkt6[IPv6].copy()
        ps.tc, ps.fl, ps.hlim = 0xFF, 0xFFFFF, 0xFF
        ps[UDP].chksum = 0xFFFF
        ps[BTH].fecn, ps[BTH].becn, ps[BTH].resv6 = 1, 1, 0x3F
        want = struct.pack("<I", zlib.crc32(b"\xff" * 8 + raw(ps)[:-4]) & 0xFFFFFFFF)
        check_frame(f"scapy IPv6 {i}", raw(pkt6), want)
    print("scapy: 3 IPv4 and 3 IPv6 frames checked")


if __name__ == "__main__":
    sys.exit(main())
