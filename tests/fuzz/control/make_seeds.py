#!/usr/bin/env python3
"""Seeds for fuzz_control_request.

The older seeds (attach .. policy) were written by hand-run encoders; this
script brings their header to the current kControlVersion (read from
lib/proto/control_protocol.h) and writes the connection-manager messages
(requests 16..22 and their replies) in the codec's layout: 16-byte header
(magic "CDCT", u16 version, u16 type, u32 seq, u32 body_len), then the body,
little-endian; replies set 0x8000 in the type and start with an i32 status.

  tests/fuzz/control/make_seeds.py      (run from anywhere; rewrites seeds/)
"""
import pathlib
import re
import struct

here = pathlib.Path(__file__).resolve().parent
root = here.parents[2]
header = (root / "lib/proto/control_protocol.h").read_text()
version = int(re.search(r"kControlVersion = (\d+);", header).group(1))
seeds = here / "seeds"


# A CM peer address: 16 bytes, IPv4-mapped (::ffff:198.18.0.2).
PEER_V4 = bytes(10) + b"\xff\xff" + bytes([198, 18, 0, 2])


def message(msg_type, body, reply=False, seq=1):
    t = msg_type | (0x8000 if reply else 0)
    return struct.pack("<IHHII", 0x54434443, version, t, seq, len(body)) + body


def blob(b):
    return struct.pack("<H", len(b)) + b


def offer(qpn=0xABCD, access=7, mtu=5, flags=1, private=b"\x01\x02\x03"):
    return struct.pack("<IIBI", qpn, access, mtu, flags) + blob(private)


def ok(body=b""):
    return struct.pack("<i", 0) + body


for path in sorted(seeds.iterdir()):
    data = bytearray(path.read_bytes())
    if len(data) >= 16 and data[:4] == b"CDCT":
        data[4:6] = struct.pack("<H", version)
        path.write_bytes(bytes(data))

cm = {
    "req_cm_listen": message(16, struct.pack("<Q", 7)),
    "req_cm_unlisten": message(17, struct.pack("<Q", 7)),
    "req_cm_connect": message(18, PEER_V4 + struct.pack("<Q", 7) + offer()),
    "req_cm_accept": message(19, struct.pack("<I", 42) + offer(private=b"")),
    "req_cm_reject": message(20, struct.pack("<IH", 42, 3) + blob(b"\x00\x00\x06\x00")),
    "req_cm_disconnect": message(21, struct.pack("<I", 42)),
    "req_cm_poll_event": message(22, b""),
    "rep_cm_connect": message(18, ok(struct.pack("<I", 42)), reply=True),
    "rep_cm_poll_event": message(
        22,
        ok(struct.pack("<BII", 2, 42, 17) + PEER_V4 + struct.pack("<QIIIH", 7, 0xABCD, 4096, 1, 0) +
           blob(bytes(range(64)))),
        reply=True),
    "rep_cm_poll_none": message(22, ok(struct.pack("<BII", 0, 0, 0) + bytes(16) +
                                       struct.pack("<QIIIH", 0, 0, 0, 0, 0) +
                                       blob(b"")), reply=True),
}
for name, data in cm.items():
    (seeds / name).write_bytes(data)
print(f"{len(cm)} CM seeds written, existing seeds at version {version}")
