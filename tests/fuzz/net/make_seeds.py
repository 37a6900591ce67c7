#!/usr/bin/python3
"""Writes the seed corpus for fuzz_net_stack_rx (run from this folder).

Each seed is one config byte (bit 0-1: stack variant, 1 = VLAN 100 when bit 1
is set; bit 2: a resolution is pending; bit 3: IPv6 off) followed by one
Ethernet frame built with scapy, so the seeds come from an independent
implementation.
"""
import os
import sys
from scapy.all import ARP, Dot1Q, Ether, ICMP, IP, UDP, Raw
from scapy.contrib.roce import BTH
from scapy.layers.inet6 import (IPv6, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6ND_RA,
                                ICMPv6NDOptDstLLAddr, ICMPv6NDOptMTU, ICMPv6NDOptPrefixInfo,
                                ICMPv6NDOptSrcLLAddr, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import roce_icrc  # noqa: E402

OUR_MAC, PEER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
OUR_IP, PEER_IP = "198.18.0.1", "198.18.0.2"
OUR_IP6, PEER_IP6, GW_IP6 = "2001:db8:0:1::1", "2001:db8:0:1::2", "fe80::fe"
OUR_SOLICITED, OUR_SOLICITED_MAC = "ff02::1:ff00:1", "33:33:ff:00:00:01"


def eth(vlan, dst=OUR_MAC):
    e = Ether(dst=dst, src=PEER_MAC)
    return e / Dot1Q(vlan=100) if vlan else e


def with_icrc6(frame):
    """An Ethernet/IPv6/UDP/BTH frame with its last 4 bytes replaced by the RoCEv2 ICRC
    (tests/common/roce_icrc.py): scapy's BTH computes it for IPv4 only."""
    return frame[:-4] + roce_icrc.icrc(frame)


def frames(vlan):
    yield "arp_request", eth(vlan, "ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=OUR_IP)
    yield "arp_reply", eth(vlan) / ARP(
        op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=OUR_MAC, pdst=OUR_IP)
    # A gratuitous ARP reply (RFC 5227: sender = target address, target MAC = sender MAC).
    yield "arp_garp_reply", eth(vlan, "ff:ff:ff:ff:ff:ff") / ARP(
        op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=PEER_MAC, pdst=PEER_IP)
    yield "arp_probe", eth(vlan, "ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=PEER_MAC, psrc="0.0.0.0", pdst=OUR_IP)
    ip = IP(src=PEER_IP, dst=OUR_IP, flags="DF", id=0)
    yield "ping", eth(vlan) / ip / ICMP(type=8, id=7, seq=1) / Raw(bytes(range(56)))
    yield "udp_roce", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, tos=3, flags="DF") / UDP(
        sport=49152, dport=4791, chksum=0) / Raw(bytes(40))
    # Valid RoCEv2 SEND onlys (ICRC by scapy): they train the receive fast path.
    yield "roce_send", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, tos=2, flags="DF", id=0) / UDP(
        sport=49152, dport=4791, chksum=0) / BTH(opcode=4, dqpn=0x11, psn=5, ackreq=1) / Raw(
            bytes(range(64)))
    yield "roce_ack", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, flags="DF", id=0) / UDP(
        sport=49152, dport=4791, chksum=0) / BTH(opcode=17, dqpn=0x11, psn=5) / Raw(
            bytes([0, 0, 0, 9]))
    yield "udp_cm_csum", eth(vlan) / ip / UDP(sport=18515, dport=18515) / Raw(b"conduit-cm")
    yield "udp_closed", eth(vlan) / ip / UDP(sport=1, dport=9) / Raw(b"x")
    yield "fragment", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, flags="MF") / UDP(
        dport=4791) / Raw(bytes(16))
    yield "options", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, options=b"\x01\x01\x01\x00") / UDP(
        dport=4791)
    yield "tcp", eth(vlan) / ip / Raw(bytes(20))


def frames6(vlan):
    to_us = IPv6(src=PEER_IP6, dst=OUR_IP6)
    yield "ns", eth(vlan, OUR_SOLICITED_MAC) / IPv6(
        src=PEER_IP6, dst=OUR_SOLICITED, hlim=255) / ICMPv6ND_NS(tgt=OUR_IP6) / ICMPv6NDOptSrcLLAddr(
            lladdr=PEER_MAC)
    yield "ns_dad", eth(vlan, OUR_SOLICITED_MAC) / IPv6(
        src="::", dst=OUR_SOLICITED, hlim=255) / ICMPv6ND_NS(tgt=OUR_IP6)
    yield "na", eth(vlan) / IPv6(src=PEER_IP6, dst=OUR_IP6, hlim=255) / ICMPv6ND_NA(
        tgt=PEER_IP6, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=PEER_MAC)
    yield "na_unsolicited", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=PEER_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_NA(
            tgt=PEER_IP6, R=0, S=0, O=1) / ICMPv6NDOptDstLLAddr(lladdr=PEER_MAC)
    yield "ra", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=GW_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_RA()
    yield "ra_slla", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=GW_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_RA(routerlifetime=600) / ICMPv6NDOptSrcLLAddr(
            lladdr=PEER_MAC)
    yield "ra_prefix_mtu", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=GW_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_RA(routerlifetime=600) / ICMPv6NDOptPrefixInfo(
            prefix="2001:db8:9::", prefixlen=48, L=1, A=1, validlifetime=600,
            preferredlifetime=300) / ICMPv6NDOptMTU(mtu=1400) / ICMPv6NDOptSrcLLAddr(lladdr=PEER_MAC)
    # Reachable Time and Retrans Timer set (RFC 4861 6.3.4).
    yield "ra_timers", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=GW_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_RA(
            routerlifetime=600, reachabletime=20000, retranstimer=2500) / ICMPv6NDOptSrcLLAddr(
                lladdr=PEER_MAC)
    yield "ra_withdraw", eth(vlan, "33:33:00:00:00:01") / IPv6(
        src=GW_IP6, dst="ff02::1", hlim=255) / ICMPv6ND_RA(routerlifetime=0)
    yield "ping6", eth(vlan) / to_us / ICMPv6EchoRequest(id=7, seq=1, data=bytes(range(56)))
    yield "udp6_roce", eth(vlan) / IPv6(src=PEER_IP6, dst=OUR_IP6, tc=3) / UDP(
        sport=49152, dport=4791, chksum=0) / Raw(bytes(40))
    send6 = eth(vlan) / IPv6(src=PEER_IP6, dst=OUR_IP6, tc=2, fl=0x12345) / UDP(
        sport=49152, dport=4791, chksum=0) / BTH(opcode=4, dqpn=0x11, psn=5, ackreq=1,
                                                 icrc=0) / Raw(bytes(range(64)))
    yield "roce6_send", Raw(with_icrc6(bytes(send6)))
    yield "udp6_cm_csum", eth(vlan) / to_us / UDP(sport=18515, dport=18515) / Raw(b"conduit-cm")
    yield "hop_by_hop", eth(vlan) / to_us / IPv6ExtHdrHopByHop() / UDP(dport=4791) / Raw(bytes(16))
    yield "fragment6", eth(vlan) / to_us / IPv6ExtHdrFragment(m=1) / UDP(dport=4791) / Raw(
        bytes(16))


def priority_tagged(pkt):
    """The frame with an 802.1Q priority tag (VID 0, PCP 3) after the MAC addresses."""
    raw = bytes(pkt)
    return raw[:12] + b"\x81\x00\x60\x00" + raw[12:]


PRIORITY_TAGGED = ("arp_request", "roce_send", "ns", "ra_timers", "udp6_roce")


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "net_stack_rx")
    os.makedirs(out, exist_ok=True)
    def write(tag, data):
        with open(os.path.join(out, tag), "wb") as f:
            f.write(data)

    for variant, vlan in ((0, False), (3, True)):
        prefix = "vlan_" if vlan else ""
        for name, pkt in frames(vlan):
            if name == "tcp":
                pkt[IP].proto = 6
            for pending in (0, 4) if name == "arp_reply" else (0,):
                data = bytes([variant | pending]) + bytes(pkt)
                write(f"{prefix}{name}{'_pending' if pending else ''}", data)
        for name, pkt in frames6(vlan):
            for pending in (0, 4) if name == "na" else (0,):
                data = bytes([variant | pending]) + bytes(pkt)
                write(f"{prefix}{name}{'_pending' if pending else ''}", data)
            if name == "ns":
                write(f"{prefix}ns_truncated", bytes([variant]) + bytes(pkt)[:-9])
            if name == "ping6":
                write(f"{prefix}ping6_ipv6_off", bytes([variant | 8]) + bytes(pkt))
        # Priority-tagged (VID 0) copies of untagged frames: taken on the untagged stack,
        # dropped on the VLAN one.
        if not vlan:
            for name, pkt in list(frames(False)) + list(frames6(False)):
                if name in PRIORITY_TAGGED:
                    write(f"prio_{name}", bytes([0]) + priority_tagged(pkt))
                    write(f"vlan_prio_{name}", bytes([3]) + priority_tagged(pkt))


if __name__ == "__main__":
    main()
