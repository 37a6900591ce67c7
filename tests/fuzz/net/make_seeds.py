#!/usr/bin/python3
"""Writes the seed corpus for fuzz_net_stack_rx (run from this folder).

Each seed is one config byte (bit 0-1: stack variant, 1 = VLAN 100 when bit 1
is set; bit 2: a resolution is pending) followed by one Ethernet frame built
with scapy, so the seeds come from an independent implementation.
"""
import os
from scapy.all import ARP, Dot1Q, Ether, ICMP, IP, UDP, Raw

OUR_MAC, PEER_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
OUR_IP, PEER_IP = "198.18.0.1", "198.18.0.2"


def eth(vlan, dst=OUR_MAC):
    e = Ether(dst=dst, src=PEER_MAC)
    return e / Dot1Q(vlan=100) if vlan else e


def frames(vlan):
    yield "arp_request", eth(vlan, "ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=PEER_MAC, psrc=PEER_IP, pdst=OUR_IP)
    yield "arp_reply", eth(vlan) / ARP(
        op=2, hwsrc=PEER_MAC, psrc=PEER_IP, hwdst=OUR_MAC, pdst=OUR_IP)
    yield "arp_probe", eth(vlan, "ff:ff:ff:ff:ff:ff") / ARP(
        op=1, hwsrc=PEER_MAC, psrc="0.0.0.0", pdst=OUR_IP)
    ip = IP(src=PEER_IP, dst=OUR_IP, flags="DF", id=0)
    yield "ping", eth(vlan) / ip / ICMP(type=8, id=7, seq=1) / Raw(bytes(range(56)))
    yield "udp_roce", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, tos=3, flags="DF") / UDP(
        sport=49152, dport=4791, chksum=0) / Raw(bytes(40))
    yield "udp_cm_csum", eth(vlan) / ip / UDP(sport=18515, dport=18515) / Raw(b"conduit-cm")
    yield "udp_closed", eth(vlan) / ip / UDP(sport=1, dport=9) / Raw(b"x")
    yield "fragment", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, flags="MF") / UDP(
        dport=4791) / Raw(bytes(16))
    yield "options", eth(vlan) / IP(src=PEER_IP, dst=OUR_IP, options=b"\x01\x01\x01\x00") / UDP(
        dport=4791)
    yield "tcp", eth(vlan) / ip / Raw(bytes(20))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "net_stack_rx")
    os.makedirs(out, exist_ok=True)
    for variant, vlan in ((0, False), (3, True)):
        for name, pkt in frames(vlan):
            if name == "tcp":
                pkt[IP].proto = 6
            for pending in (0, 4) if name == "arp_reply" else (0,):
                data = bytes([variant | pending]) + bytes(pkt)
                tag = f"{'vlan_' if vlan else ''}{name}{'_pending' if pending else ''}"
                with open(os.path.join(out, tag), "wb") as f:
                    f.write(data)


if __name__ == "__main__":
    main()
