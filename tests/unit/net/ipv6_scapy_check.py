#!/usr/bin/python3
"""Cross-checks NetStack's IPv6 frames (from ipv6_frames_dump) with scapy.

Exits 77 (meson: skipped) when scapy is not installed (Debian: python3-scapy).
"""
import subprocess
import sys

try:
    from scapy.layers.inet6 import (IPv6, ICMPv6EchoReply, ICMPv6ND_NA, ICMPv6ND_NS,
                                    ICMPv6ND_RS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr)
    from scapy.layers.l2 import Ether
except ImportError:
    print("scapy not installed: skipped")
    sys.exit(77)

OUR_MAC, PEER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
OUR_IP6, PEER_IP6, PEER_LL6 = "2001:db8:0:1::1", "2001:db8:0:1::2", "fe80::ff:fe00:2"

failures = []


def expect(name, what, got, want):
    if got != want:
        failures.append(f"{name}: {what} is {got!r}, expected {want!r}")


def recomputed_checksum(pkt, layer):
    """scapy's own checksum for the packet with the checksum field cleared."""
    clone = Ether(bytes(pkt))
    del clone[layer].cksum
    return Ether(bytes(clone))[layer].cksum


def check_ip(name, pkt, dst, hlim):
    expect(name, "IPv6 version", pkt[IPv6].version, 6)
    expect(name, "IPv6 src", pkt[IPv6].src, OUR_IP6)
    expect(name, "IPv6 dst", pkt[IPv6].dst, dst)
    expect(name, "hop limit", pkt[IPv6].hlim, hlim)
    expect(name, "Ethernet src", pkt[Ether].src, OUR_MAC)
    expect(name, "payload length", pkt[IPv6].plen, len(bytes(pkt[IPv6].payload)))


def main():
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
    frames = {}
    for line in out.splitlines():
        name, _, hexbytes = line.partition(" ")
        frames[name] = Ether(bytes.fromhex(hexbytes))
    for name in ("na", "na_dad", "na_unsolicited", "ns", "rs", "echo_reply"):
        if name not in frames:
            failures.append(f"{name}: not produced ({out!r})")

    for name, dst, mac, s_flag in (("na", PEER_IP6, PEER_MAC, 1),
                                   ("na_dad", "ff02::1", "33:33:00:00:00:01", 0),
                                   ("na_unsolicited", "ff02::1", "33:33:00:00:00:01", 0)):
        p = frames.get(name)
        if p is None:
            continue
        check_ip(name, p, dst, 255)
        expect(name, "Ethernet dst", p[Ether].dst, mac)
        if ICMPv6ND_NA not in p:
            failures.append(f"{name}: scapy does not see an NA")
            continue
        na = p[ICMPv6ND_NA]
        expect(name, "R/S/O", (na.R, na.S, na.O), (0, s_flag, 1))
        expect(name, "target", na.tgt, OUR_IP6)
        expect(name, "checksum", na.cksum, recomputed_checksum(p, ICMPv6ND_NA))
        if ICMPv6NDOptDstLLAddr not in p:
            failures.append(f"{name}: no target link-layer address option")
        else:
            expect(name, "TLLA", p[ICMPv6NDOptDstLLAddr].lladdr, OUR_MAC)

    p = frames.get("ns")
    if p is not None:
        check_ip("ns", p, "ff02::1:ff00:2", 255)
        expect("ns", "Ethernet dst", p[Ether].dst, "33:33:ff:00:00:02")
        if ICMPv6ND_NS not in p:
            failures.append("ns: scapy does not see an NS")
        else:
            expect("ns", "target", p[ICMPv6ND_NS].tgt, PEER_LL6)
            expect("ns", "checksum", p[ICMPv6ND_NS].cksum, recomputed_checksum(p, ICMPv6ND_NS))
            if ICMPv6NDOptSrcLLAddr not in p:
                failures.append("ns: no source link-layer address option")
            else:
                expect("ns", "SLLA", p[ICMPv6NDOptSrcLLAddr].lladdr, OUR_MAC)

    p = frames.get("rs")
    if p is not None:
        check_ip("rs", p, "ff02::2", 255)
        expect("rs", "Ethernet dst", p[Ether].dst, "33:33:00:00:00:02")
        if ICMPv6ND_RS not in p:
            failures.append("rs: scapy does not see a Router Solicitation")
        else:
            expect("rs", "checksum", p[ICMPv6ND_RS].cksum, recomputed_checksum(p, ICMPv6ND_RS))
            if ICMPv6NDOptSrcLLAddr not in p:
                failures.append("rs: no source link-layer address option")
            else:
                expect("rs", "SLLA", p[ICMPv6NDOptSrcLLAddr].lladdr, OUR_MAC)

    p = frames.get("echo_reply")
    if p is not None:
        check_ip("echo_reply", p, PEER_IP6, 64)
        expect("echo_reply", "Ethernet dst", p[Ether].dst, PEER_MAC)
        if ICMPv6EchoReply not in p:
            failures.append("echo_reply: scapy does not see an echo reply")
        else:
            r = p[ICMPv6EchoReply]
            expect("echo_reply", "id/seq", (r.id, r.seq), (0x1234, 7))
            expect("echo_reply", "data", bytes(r.data), bytes(range(33)))
            expect("echo_reply", "checksum", r.cksum, recomputed_checksum(p, ICMPv6EchoReply))

    for f in failures:
        print("FAIL", f)
    if not failures:
        print(f"ok: {len(frames)} frames agree with scapy")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
