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


# IB CM MADs (daemon/cm/ib_cm_mad.h): header, then the body; records op 7 (from an IB peer).
def mad(attr, body, tid=0x1234):
    m = struct.pack(">BBBBHHQHHI", 1, 0x07, 2, 0x03, 0, 0, tid, attr, 0, 0) + body
    return m + bytes(256 - len(m))


def ib_req(local_id, port, qpn, psn):
    body = struct.pack(">I4xQQ4xIII", local_id, 0x01060000 | port, 0x5054_00ff_fec6_4e4a, 0,
                       qpn << 8 | 16, 16)
    body += struct.pack(">I", 0xA0) + struct.pack(">I", psn << 8 | 0xA7)
    body += struct.pack(">HBBHH", 0xFFFF, 0x37, 0xF0, 0xFFFF, 0xFFFF)
    body += bytes(10) + b"\xff\xff" + bytes([198, 18, 200, 2])
    body += bytes(10) + b"\xff\xff" + bytes([198, 18, 200, 1])
    body += bytes([0, 0, 0, 0, 0, 64, 0, 19 << 3]) + bytes(44)
    body += bytes([0, 0x40, 0x92, 0x3D]) + bytes(12) + bytes([198, 18, 200, 2])
    body += bytes(12) + bytes([198, 18, 200, 1])
    return mad(0x10, body)


def ib_ids(attr, local_id, remote_id, extra=b""):
    return mad(attr, struct.pack(">II", local_id, remote_id) + extra)


def ib(peer, m):
    return bytes([7, peer]) + m


# The MAD of the kernel's IPv6 REQ (tests/unit/cm/ib_cm_test.cc, kKernelReq6Datagram).
KERNEL_REQ6 = (
    "010702030000000000000002b1db974900100000000000004997dbb1000000000000000001061c0a505400ff"
    "fec635c600000000000000000000160100000001000000a0b576c0a7ffff37f0fffffffffe800000000000"
    "00505400fffec635c6fe800000000000000000000000c000013857c000004000980000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000060a04efe800000000000"
    "00505400fffec635c6fe800000000000000000000000c00001")

SEEDS = {
    # A peer connects to service 1; we accept; the peer's RTU; then it disconnects.
    "passive_full": datagram(1, msg(REQ, 7, 0, params(1, 300, private=b"hi")))
    + bytes([2]) + datagram(1, msg(RTU, 7, 1)) + datagram(1, msg(DREQ, 7, 1))
    + bytes([5, 50]),
    # We connect; the peer answers REP; later a duplicate REP and a DREQ.
    "active_full": bytes([1, 10, 1, 1]) + datagram(1, msg(REP, 9, 1, params(1, 400)))
    + datagram(1, msg(REP, 9, 1, params(1, 400))) + bytes([4, 0])
    + datagram(1, msg(DREP, 9, 1)),
    # A REQ for a service nobody listens on, a REJ, timers running out.
    "reject_timeout": datagram(2, msg(REQ, 5, 0, params(9, 301)))
    + bytes([1, 0, 1, 1]) + datagram(1, msg(REJ, 0, 1, struct.pack(">HH", 1, 0)))
    + bytes([1, 1, 2, 5, 255, 5, 255]),
    # The owner goes away with a pending request and an established one.
    "forget_owner": datagram(1, msg(REQ, 3, 0, params(2, 302)))
    + datagram(3, msg(REQ, 4, 0, params(2, 303))) + bytes([2, 6]),
    "garbage": bytes([0, 0, 20]) + b"\x43\x44\x43\x4d\x01\x09" + bytes(14),
    # An rdma_cm peer connects to port 1 (as the kernel does), we accept, its RTU and DREQ.
    "ib_passive": ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787)) + bytes([2])
    + ib(1, ib_ids(0x14, 0x38D4E3E, 1)) + ib(1, ib_ids(0x15, 0x38D4E3E, 1, b"\x00\x01\xf4"))
    + bytes([5, 50]),
    # We connect to an rdma_cm port; its REP (QPN 0x12, PSN 0x800ae4); a REJ for nothing.
    "ib_active": bytes([8, 10, 1, 1]) + ib(1, ib_ids(0x13, 0x8D4E3E, 1, bytes(4)
                                                   + b"\x00\x00\x12\x00" + bytes(4)
                                                   + b"\x80\x0a\xe4\x00\x10\x10\x78\xe0"))
    + ib(1, ib_ids(0x12, 0, 7, b"\x00\x00\x00\x08")) + bytes([4, 0, 5, 255]),
    # The kernel's rdma_cm REQ over IPv6 (rping -c -a fe80::c0:1%eth0 on rxe) from peer 5
    # (an IPv6 address in the fuzzer), we accept, its RTU and DREQ; then we connect to an
    # IPv6 rdma_cm peer (6) and to an IPv6 conduitd (7).
    "ib_passive_v6": ib(5, bytes.fromhex(KERNEL_REQ6) + bytes(256 - len(KERNEL_REQ6) // 2))
    + bytes([2]) + ib(5, ib_ids(0x14, 0x4997DBB1, 1))
    + ib(5, ib_ids(0x15, 0x4997DBB1, 1, b"\x00\x00\x16")) + bytes([8, 11, 1, 6, 1, 12, 7, 1])
    + bytes([5, 50]),
    # rdma_cm resolving UDP port 7174 (SIDR_REQ: answered 'unsupported'); an rdma_cm peer
    # connects, we accept, its RTU, a LAP (answered APR 'unsupported'), a REQ from the same QP
    # under another comm id (stale: REJ, DREQ); we connect to an rdma_cm port and abandon it.
    "ib_sidr_lap_stale": ib(1, mad(0x17, struct.pack(">IHHQ", 0x12345678, 0xFFFF, 0,
                                                     0x01110000 | 7174)))
    + ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787)) + bytes([2])
    + ib(1, ib_ids(0x14, 0x38D4E3E, 1))
    + ib(1, ib_ids(0x19, 0x38D4E3E, 1, bytes(4) + b"\x00\x01\xf4\xa0"))
    + ib(1, ib_req(0x38D4E3F, 1, 0x11, 0x1234))
    + bytes([8, 10, 1, 1, 4, 0]) + bytes([5, 50]),
    # A CM ClassPortInfo Get (answered GetResp 'unsupported'); a UC REQ to a port listened on
    # and an rdma_cm REQ with header version 1 (both REJ); an rdma_cm peer connects, we accept,
    # its RTU, a DREQ naming another QP (dropped), then the right one.
    "ib_get_uc_dreq_qpn": ib(1, mad(0x01, b"", tid=0x77)[:3] + b"\x01" + mad(0x01, b"", tid=0x77)[4:])
    + ib(1, ib_req(0x38D4E40, 1, 0x13, 0x1)[:24 + 43] + b"\xa2" + ib_req(0x38D4E40, 1, 0x13, 0x1)[24 + 44:])
    + ib(1, ib_req(0x38D4E41, 1, 0x14, 0x1)[:24 + 140] + b"\x01" + ib_req(0x38D4E41, 1, 0x14, 0x1)[24 + 141:])
    + ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787)) + bytes([2])
    + ib(1, ib_ids(0x14, 0x38D4E3E, 1))
    + ib(1, ib_ids(0x15, 0x38D4E3E, 1, b"\x00\x01\xf5"))
    + ib(1, ib_ids(0x15, 0x38D4E3E, 1, b"\x00\x01\xf4")) + bytes([5, 50]),
    # We connect to an rdma_cm port; the peer's MRA of our REQ (service timeout 24: Linux's
    # cm_mra_handler wait, 2^16 ms plus 64 ms for the QP's ACK timeout 14, 65.6 s); the timers
    # run through a stretched resend (27 x 2.55 s); then we connect again and its REP names QP
    # 0x12, which the first connection's REP named too (stale once the first is established).
    "ib_mra_stale_rep": bytes([8, 10, 1, 1])
    + ib(1, ib_ids(0x11, 0x8D4E3E, 1, bytes([0x00, 24 << 3])))
    + bytes([5, 255] * 27)
    + bytes([8, 11, 1, 1]) + ib(1, ib_ids(0x13, 0x8D4E3E, 2, bytes(4)
                                           + b"\x00\x00\x12\x00" + bytes(4)
                                           + b"\x80\x0a\xe4\x00\x10\x10\x78\xe0"))
    + bytes([8, 12, 1, 1]) + ib(1, ib_ids(0x13, 0x8D4E3F, 3, bytes(4)
                                           + b"\x00\x00\x12\x00" + bytes(4)
                                           + b"\x80\x0a\xe4\x00\x10\x10\x78\xe0"))
    + bytes([5, 50]),
    # An rdma_cm peer's REQ waits for our owner; its resend gets an MRA; a REQ from the same QP
    # under another comm id is stale while the first is pending (REJ, no DREQ); time passes
    # beyond the REQ's own resend window, the owner accepts, the RTU; we connect to the peer
    # and its REP names that QP again (stale: REJ of the REP, DREQ of the established one).
    "ib_mra_sent_stale_pending": ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787))
    + ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787))
    + ib(1, ib_req(0x38D4E3F, 1, 0x11, 0x1234))
    + bytes([5, 255] * 4) + ib(1, ib_req(0x38D4E3E, 1, 0x11, 0x998787)) + bytes([2])
    + ib(1, ib_ids(0x14, 0x38D4E3E, 1))
    + bytes([8, 10, 1, 1]) + ib(1, ib_ids(0x13, 0x8D4E40, 2, bytes(4)
                                           + b"\x00\x00\x11\x00" + bytes(4)
                                           + b"\x80\x0a\xe4\x00\x10\x10\x78\xe0"))
    + bytes([5, 50]),
    # We connect to an rdma_cm port nobody answers: the REQ is resent on the timeout it
    # advertises (1024 ms + 2 x 32 ms for the QP's ACK timeout 14: 1.088 s), 15 times, then
    # fails (a timer tick every 1.1 s); we connect again,
    # its REP, we disconnect and nobody answers the DREQ, resent at that pace until it ends too.
    "ib_req_dreq_timeouts": bytes([8, 10, 1, 1]) + bytes([5, 110] * 17)
    + bytes([8, 11, 1, 1]) + ib(1, ib_ids(0x13, 0x8D4E3F, 2, bytes(4)
                                           + b"\x00\x00\x12\x00" + bytes(4)
                                           + b"\x80\x0a\xe4\x00\x10\x10\x78\xe0"))
    + bytes([4, 1]) + bytes([5, 110] * 17),
}

os.makedirs("seeds/cm_session", exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join("seeds/cm_session", name), "wb") as f:
        f.write(data)
