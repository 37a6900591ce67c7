#!/usr/bin/python3
"""napi_threads.py IFNAME: print the kernel thread PID of each threaded NAPI instance of IFNAME.

Run inside the network namespace that owns IFNAME (ip netns exec NS ...). Asks the kernel's
"netdev" generic netlink family (NETDEV_CMD_NAPI_GET, Linux 6.8 and later) for the NAPI
instances of that interface and prints one line per instance: "NAPI_ID PID" (PID 0 when
the instance is not threaded). Exits 1 when the family or the interface is missing.

Used by scripts/demo to put a veth's receive NAPI thread on the CPU of the host that receives
(both ends are called eth0 in their namespaces, so the thread names "napi/eth0-ID" alone do
not tell which host a thread belongs to).
"""
import os
import socket
import struct
import sys

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
NETDEV_CMD_NAPI_GET = 11
NETDEV_A_NAPI_IFINDEX = 1
NETDEV_A_NAPI_ID = 2
NETDEV_A_NAPI_PID = 4
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3


def attr(kind, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * ((4 - n % 4) % 4)


def parse_attrs(data):
    out = {}
    while len(data) >= 4:
        n, kind = struct.unpack_from("=HH", data)
        if n < 4:
            break
        out[kind & 0x3FFF] = data[4:n]
        data = data[(n + 3) & ~3:]
    return out


def request(sock, family, cmd, flags, attrs, seq):
    body = struct.pack("=BBH", cmd, 1, 0) + attrs
    sock.send(struct.pack("=IHHII", 16 + len(body), family, flags, seq, 0) + body)
    msgs = []
    while True:
        data = sock.recv(65536)
        while len(data) >= 16:
            n, kind, _, _, _ = struct.unpack_from("=IHHII", data)
            payload = data[16:n]
            data = data[(n + 3) & ~3:]
            if kind == NLMSG_DONE:
                return msgs
            if kind == NLMSG_ERROR:
                err = struct.unpack_from("=i", payload)[0]
                if err != 0:
                    raise OSError(-err, os.strerror(-err))
                return msgs
            msgs.append(parse_attrs(payload[4:]))
        if not flags & NLM_F_DUMP and msgs:
            return msgs


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    try:
        ifindex = socket.if_nametoindex(sys.argv[1])
    except OSError:
        print(f"napi_threads: no interface {sys.argv[1]}", file=sys.stderr)
        return 1
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    try:
        fam = request(sock, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, NLM_F_REQUEST,
                      attr(CTRL_ATTR_FAMILY_NAME, b"netdev\0"), 1)
        family = struct.unpack("=H", fam[0][CTRL_ATTR_FAMILY_ID][:2])[0]
        napis = request(sock, family, NETDEV_CMD_NAPI_GET, NLM_F_REQUEST | NLM_F_DUMP,
                        attr(NETDEV_A_NAPI_IFINDEX, struct.pack("=I", ifindex)), 2)
    except (OSError, KeyError, IndexError) as e:
        print(f"napi_threads: netdev netlink family unavailable: {e}", file=sys.stderr)
        return 1
    for a in napis:
        if NETDEV_A_NAPI_IFINDEX in a and struct.unpack("=I", a[NETDEV_A_NAPI_IFINDEX])[0] != ifindex:
            continue
        napi_id = struct.unpack("=I", a[NETDEV_A_NAPI_ID])[0] if NETDEV_A_NAPI_ID in a else 0
        pid = struct.unpack("=I", a[NETDEV_A_NAPI_PID])[0] if NETDEV_A_NAPI_PID in a else 0
        print(napi_id, pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
