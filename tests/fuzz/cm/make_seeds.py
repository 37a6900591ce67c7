#!/usr/bin/python3
"""Writes the seed corpus for fuzz_cm_session (run from this folder).

Each seed is a session of records (see cm_session.cc): datagrams built here
with struct from the layout in daemon/cm/cm_message.h, and API/timer ops.
"""
import os
import struct

MAGIC, VERSION = 0x4344434D, 1
REQ, REP, RTU, REJ, DREQ, DREP = range(1, 7)


def msg(mtype, src, dst, body=b""):
    return struct.pack(">IBBHII", MAGIC, VERSION, mtype, 16 + len(body), src, dst) + body


def params(service, qpn, psn=1, pmtu=1024, caps=0, private=b""):
    return struct.pack(">QIIHHBBBB8x", service, qpn, psn, pmtu, caps, 14, 7, 7,
                       len(private)) + private


def datagram(peer, m):
    return bytes([0, peer, len(m)]) + m


SEEDS = {
    # A peer connects to service 1; we accept; the peer's RTU; then it disconnects.
    "passive_full": datagram(1, msg(REQ, 7, 0, params(1, 300, private=b"hi")))
    + bytes([2]) + datagram(1, msg(RTU, 7, 1)) + datagram(1, msg(DREQ, 7, 1))
    + bytes([5, 50]),
    # We connect; the peer answers REP; later a duplicate REP and a DREQ.
    "active_full": bytes([1, 10, 1]) + datagram(1, msg(REP, 9, 1, params(1, 400)))
    + datagram(1, msg(REP, 9, 1, params(1, 400))) + bytes([4, 0])
    + datagram(1, msg(DREP, 9, 1)),
    # A REQ for a service nobody listens on, a REJ, timers running out.
    "reject_timeout": datagram(2, msg(REQ, 5, 0, params(9, 301)))
    + bytes([1, 0, 1]) + datagram(1, msg(REJ, 0, 1, struct.pack(">HH", 1, 0)))
    + bytes([1, 1, 2, 5, 255, 5, 255]),
    # The owner goes away with a pending request and an established one.
    "forget_owner": datagram(1, msg(REQ, 3, 0, params(2, 302)))
    + datagram(3, msg(REQ, 4, 0, params(2, 303))) + bytes([2, 6]),
    "garbage": bytes([0, 0, 20]) + b"\x43\x44\x43\x4d\x01\x09" + bytes(14),
}

os.makedirs("seeds/cm_session", exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join("seeds/cm_session", name), "wb") as f:
        f.write(data)
