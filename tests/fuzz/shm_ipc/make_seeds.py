#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_shm_ring_reader (ring_reader.cc explains the format)."""
import os
import struct

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "ring_reader")
os.makedirs(out, exist_ok=True)


def send_wr(wr_id, opcode, flags, sges, remote=0, rkey=0, imm=0):
    b = struct.pack("<QBBBBIQII", wr_id, opcode, flags, len(sges), 0, imm, remote, rkey, 0)
    for off, length, lkey in sges:
        b += struct.pack("<QII", off, length, lkey)
    return b.ljust(128, b"\0")


def recv_wr(wr_id, sges):
    b = struct.pack("<QB7x", wr_id, len(sges))
    for off, length, lkey in sges:
        b += struct.pack("<QII", off, length, lkey)
    return b.ljust(128, b"\0")


def ring(mode, cap_log2, start, ops):
    return bytes([mode, cap_log2]) + struct.pack("<I", start) + b"".join(ops)


def write_slot(slot, entry):
    return bytes([2, slot]) + entry


def advance(n):
    return bytes([1, n])


def set_prod(v):
    return bytes([0]) + struct.pack("<I", v)


def dequeue(n):
    return bytes([3, n])


seeds = {
    "send_valid_wrap": ring(0, 3, 0xFFFFFFFE, [
        write_slot(6, send_wr(1, 1, 1, [(0, 100, 1)])),
        write_slot(7, send_wr(2, 3, 1, [(0, 4096, 3), (8, 8, 1)], remote=0x1000, rkey=7)),
        write_slot(0, send_wr(3, 5, 0, [(0, 4096, 1)], remote=0x2000, rkey=9)),
        advance(3), dequeue(2), dequeue(8)]),
    "send_hostile": ring(0, 2, 100, [
        write_slot(0, send_wr(1, 9, 0xFF, [(2**64 - 8, 100, 1)])),
        write_slot(1, send_wr(2, 1, 8, [], imm=5)),
        advance(2), dequeue(4), set_prod(0x80000000), dequeue(4)]),
    "send_inline": ring(0, 1, 0, [
        write_slot(0, send_wr(1, 2, 9, [], imm=1)[:28] + struct.pack("<I", 64) + bytes(96)),
        advance(1), dequeue(1)]),
    "recv_valid": ring(1, 3, 0xFFFFFFFF, [
        write_slot(7, recv_wr(10, [(0, 4096, 3)])),
        write_slot(0, recv_wr(11, [(0, 1, 1), (16, 1, 2)])),
        advance(2), dequeue(8), set_prod(5), dequeue(1)]),
    "header_clean": bytes([2, 3, 2, 4, 4, 5]) + struct.pack("<I", 65536) + bytes([0, 0, 1]),
    "header_corrupt": bytes([2, 7, 1, 8, 8, 9]) + struct.pack("<I", 1 << 20) + bytes([1, 3, 88, 1, 96, 16, 40, 3, 0]),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
