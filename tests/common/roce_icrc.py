"""The RoCEv2 ICRC of an Ethernet frame, in plain Python (zlib's CRC-32, no scapy).

One copy of the recipe for the test scripts (tests/interop/check_capture.py, the wire-inject
integration test's sender, the net fuzz seeds); tests/common/roce_icrc_test.py checks it. As
rxe_icrc.c and roce-dcqcn-brief.md: CRC-32 over 8 bytes of ones (the masked LRH) and the IP
datagram up to the ICRC with the variant fields set to ones (IPv4: TOS, TTL, header checksum;
IPv6: traffic class, flow label, hop limit; UDP: checksum; BTH byte 4: FECN, BECN, reserved),
stored least-significant byte first.

A frame is Ethernet (untagged, or with one 802.1Q tag), IPv4 (any IHL) or IPv6 (through
hop-by-hop and fragment headers, which the ICRC covers as they are), UDP to port 4791, then the
BTH; its last 4 bytes are where the ICRC goes (never read), whatever the IP length says.
"""
import struct
import zlib

ROCE_PORT = 4791
ETH_IPV4, ETH_IPV6, ETH_VLAN = b"\x08\x00", b"\x86\xdd", b"\x81\x00"
_HOP_BY_HOP, _FRAGMENT, _UDP = 0, 44, 17


def ip_offset(frame):
    """Where the IP header starts (14, or 18 behind a VLAN tag), or None if not IPv4/IPv6."""
    l2 = 18 if frame[12:14] == ETH_VLAN else 14
    return l2 if frame[l2 - 2:l2] in (ETH_IPV4, ETH_IPV6) else None


def bth_offset(frame):
    """Where the BTH starts in the frame, or None when it is no IPv4/IPv6 UDP datagram to port
    4791 (or too short to tell)."""
    ip = ip_offset(frame)
    try:
        if ip is None:
            return None
        if frame[ip - 2:ip] == ETH_IPV4:
            nh, off = frame[ip + 9], ip + (frame[ip] & 0x0F) * 4
        else:
            nh, off = frame[ip + 6], ip + 40
            while nh in (_HOP_BY_HOP, _FRAGMENT):
                nh, off = frame[off], off + (8 if nh == _FRAGMENT else (frame[off + 1] + 1) * 8)
        if nh != _UDP or int.from_bytes(frame[off + 2:off + 4], "big") != ROCE_PORT:
            return None
    except IndexError:
        return None
    return off + 8


def icrc(frame):
    """The 4 ICRC bytes of a RoCEv2 frame as they go on the wire, from its bytes before its last
    4. ValueError when the frame is no RoCEv2 frame (see bth_offset)."""
    ip, bth = ip_offset(frame), bth_offset(frame)
    if bth is None or bth + 12 + 4 > len(frame):
        raise ValueError("not a RoCEv2 frame (IPv4/IPv6, UDP port 4791, a BTH and an ICRC)")
    d, bth = bytearray(frame[ip:-4]), bth - ip
    if frame[ip - 2:ip] == ETH_IPV4:
        d[1] = 0xFF                    # TOS (DSCP, ECN)
        d[8] = 0xFF                    # TTL
        d[10:12] = b"\xff\xff"         # header checksum
    else:
        d[0] |= 0x0F                   # traffic class (high nibble)
        d[1:4] = b"\xff\xff\xff"       # traffic class (low nibble), flow label
        d[7] = 0xFF                    # hop limit
    d[bth - 2:bth] = b"\xff\xff"       # UDP checksum
    d[bth + 4] = 0xFF                  # BTH: FECN, BECN, reserved
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(d)) & 0xFFFFFFFF)


def icrc_valid(frame):
    """Whether a RoCEv2 frame's last 4 bytes are its ICRC (ValueError as icrc)."""
    return icrc(frame) == bytes(frame[-4:])
