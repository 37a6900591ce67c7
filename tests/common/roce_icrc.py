"""The RoCEv2 ICRC of an Ethernet frame, in plain Python (zlib's CRC-32, no scapy).

One copy of the recipe for the test scripts (tests/interop/check_capture.py, the wire-inject
integration test's sender, the net fuzz seeds); tests/common/roce_icrc_test.py checks it. As
rxe_icrc.c and roce-dcqcn-brief.md: CRC-32 over 8 bytes of ones (the masked LRH) and the IP
datagram up to the ICRC with the variant fields set to ones (IPv4: TOS, TTL, header checksum;
IPv6: traffic class, flow label, hop limit; UDP: checksum; BTH byte 4: FECN, BECN, reserved),
stored least-significant byte first.

A frame is Ethernet (untagged, or with one 802.1Q tag), IPv4 (any IHL) or IPv6 (through
hop-by-hop and fragment headers, which the ICRC covers as they are), UDP to port 4791, then the
BTH; the ICRC is the datagram's last 4 bytes, where the IP length says the datagram ends: a
frame shorter than Ethernet's 60 bytes (a zero-length SEND over IPv4 is 58) arrives padded, and
the padding is neither covered nor the ICRC.
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


def datagram_end(frame):
    """Where the IP datagram ends in the frame (its IPv4 total length, or 40 + its IPv6 payload
    length, past the IP header), or None when that is past the frame's end."""
    ip = ip_offset(frame)
    if ip is None:
        return None
    v4 = frame[ip - 2:ip] == ETH_IPV4
    if len(frame) < ip + (20 if v4 else 40):
        return None
    if v4:
        end = ip + int.from_bytes(frame[ip + 2:ip + 4], "big")
    else:
        end = ip + 40 + int.from_bytes(frame[ip + 4:ip + 6], "big")
    return end if end <= len(frame) else None


def icrc(frame, at_frame_end=False):
    """The 4 ICRC bytes of a RoCEv2 frame as they go on the wire, from its datagram's bytes
    before its last 4 (datagram_end). ValueError when the frame is no RoCEv2 frame (see
    bth_offset) or its IP length runs past the frame. at_frame_end: the ICRC is the frame's
    last 4 bytes whatever the IP length says (for a test that sends frames whose lengths
    disagree on purpose, with a valid ICRC)."""
    ip, bth = ip_offset(frame), bth_offset(frame)
    end = len(frame) if at_frame_end and ip is not None else datagram_end(frame)
    if bth is None or end is None or bth + 12 + 4 > end:
        raise ValueError("not a RoCEv2 frame (IPv4/IPv6, UDP port 4791, a BTH and an ICRC)")
    d, bth = bytearray(frame[ip:end - 4]), bth - ip
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


def icrc_offset(frame):
    """Where the ICRC stands in the frame: 4 bytes before datagram_end (ValueError as icrc)."""
    end = datagram_end(frame)
    if end is None:
        raise ValueError("the IP length runs past the frame")
    return end - 4


def icrc_valid(frame):
    """Whether a RoCEv2 frame carries its ICRC where its datagram ends (ValueError as icrc)."""
    o = icrc_offset(frame)
    return icrc(frame) == bytes(frame[o:o + 4])
