#!/usr/bin/env bash
# Proves the Soft-RoCE VM path that conduit<->rxe interop tests build on:
#   - the VM image builds (cold: from Debian packages) or comes from the cache,
#   - the VM boots on a bridge next to a namespace host "c", rxe0 comes up,
#   - ibv_rc_pingpong server and client inside the VM complete over rxe0 (RoCE v2, GID 1),
#     with 64 B and 4096 B messages, and so do perftest's ib_send_bw and ib_write_bw,
#   - host c and the VM reach each other (ping both ways) over the veth/bridge/tap path,
#   - host c does ibv_rc_pingpong's out-of-band exchange (52-byte LID:QPN:PSN:GID record)
#     with a server in the VM and checks the reply: the hook conduit-rc-pingpong will use.
# Prints the image build time, boot-to-ready and boot-to-result times.
set -euo pipefail
src=${CONDUIT_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/scripts/lib/netns.sh"
. "$src/scripts/lib/rxe.sh"
netns_require_root apt-get dpkg-deb
[[ -e /dev/net/tun ]] || { echo "SKIP: no /dev/net/tun"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

t0=$SECONDS
"$(rxe_vm_bin)" --build || fail "image build failed"
echo "image ready in $((SECONDS - t0)) s (cold build if no cache was there)"

netns_init
work=$(mktemp -d /tmp/rxesmoke.XXXXXX)
trap 'rm -rf "$work"; netns_cleanup' EXIT
rxe_topology

# The VM runs two loopback ping-pongs over rxe0 (server in the background, client to its own
# address), then pings host c; host c pings the VM meanwhile.
vm_cmd="set -e
for size in 64 4096; do
  ibv_rc_pingpong -d rxe0 -g 1 -s \$size -n 20 >/tmp/server.\$size 2>&1 & spid=\$!
  sleep 1
  ibv_rc_pingpong -d rxe0 -g 1 -s \$size -n 20 $RXE_VM_IP
  wait \$spid
  cat /tmp/server.\$size
  echo pingpong \$size ok
done
for t in ib_send_bw ib_write_bw; do
  \$t -d rxe0 -x 1 -n 5 -s 64 -F >/tmp/\$t.server 2>&1 & spid=\$!
  sleep 2
  \$t -d rxe0 -x 1 -n 5 -s 64 -F $RXE_VM_IP
  wait \$spid
  echo perftest \$t ok
done
ping -c 3 -W 5 $RXE_HOST_IP
echo vm-to-host ok
# Server for host c's out-of-band exchange check: c closes after the exchange, so the server
# ends with an error about the missing \"done\" message.
ibv_rc_pingpong -d rxe0 -g 1 -s 64 -n 1 -p 18516 || echo \"oob server exited \$?\""
t1=$(date +%s.%N)
rxe_vm_start "$work/vm" -- "$vm_cmd"
rxe_vm_wait_ready "$work/vm" 200 || {
  cat "$work/vm.err" "$work/vm.out" 2>/dev/null; fail "the VM did not get ready"; }
t2=$(date +%s.%N)
host_ping=0
netns_exec c ping -c 3 -i 0.5 -W 5 "$RXE_VM_IP" || host_ping=$?
# ibv_rc_pingpong's exchange from host c (TCP, here port 18516 so that it cannot meet the VM's
# loopback servers on 18515; client first, 52 bytes each way:
# "LID:QPN:PSN:GID\0"), retried until the VM's server listens; checks the reply's format.
oob=0
timeout 150 ip netns exec "$(netns_name c)" /usr/bin/python3 - "$RXE_VM_IP" "$RXE_HOST_IP" \
  >"$work/oob.txt" 2>&1 <<'PY' || oob=$?
import ipaddress, re, socket, sys, time
vm, me = sys.argv[1], sys.argv[2]
deadline = time.time() + 140
while True:
    try:
        s = socket.create_connection((vm, 18516), timeout=5)
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("VM never listened on 18516")
        time.sleep(0.5)
gid = ipaddress.IPv6Address("::ffff:" + me).packed.hex()
msg = b"%04x:%06x:%06x:%s\0" % (0, 0x11, 0x123456, gid.encode())
assert len(msg) == 52
s.sendall(msg)
reply = b""
while len(reply) < 52:
    chunk = s.recv(52 - len(reply))
    if not chunk:
        sys.exit(f"short reply {reply!r}")
    reply += chunk
s.close()
print("reply", reply)
m = re.fullmatch(rb"([0-9a-f]{4}):([0-9a-f]{6}):([0-9a-f]{6}):([0-9a-f]{32})\0", reply)
if not m:
    sys.exit("reply does not match LID:QPN:PSN:GID")
want = ipaddress.IPv6Address("::ffff:" + vm).packed.hex().encode()
if m.group(4) != want:
    sys.exit(f"GID {m.group(4)} is not {want}")
print("oob ok qpn", int(m.group(2), 16))
PY
status=0
rxe_vm_wait "$work/vm" 200 || status=$?
t3=$(date +%s.%N)
echo "--- VM output"
cat "$work/vm.out"
echo "--- rxe-vm"
cat "$work/vm.err"
[[ $status -eq 0 ]] || fail "VM command exited $status (console: see above)"
[[ $host_ping -eq 0 ]] || fail "host c could not ping the VM"
for size in 64 4096; do
  grep -q "pingpong $size ok" "$work/vm.out" || fail "ping-pong $size did not complete"
done
for t in ib_send_bw ib_write_bw; do
  grep -q "perftest $t ok" "$work/vm.out" || fail "perftest $t loopback did not complete"
done
# Both ends report 20 iterations per size: 2 sizes x 2 ends.
[[ $(grep -c '^20 iters in' "$work/vm.out") -eq 4 ]] || fail "expected 4 '20 iters' reports"
grep -q 'GID ::ffff:198.18.200.2' "$work/vm.out" || fail "RoCE v2 IPv4-mapped GID not used"
grep -q 'vm-to-host ok' "$work/vm.out" || fail "VM could not ping host c"
echo "--- out-of-band exchange from host c"
cat "$work/oob.txt"
[[ $oob -eq 0 ]] || fail "out-of-band exchange with the VM's ibv_rc_pingpong failed"
# The server answers only after parsing our record and moving its QP to RTR towards it; its
# error is then the missing "done" (we closed), which is the expected end here.
grep -q "Couldn't send/recv local address" "$work/vm.out" ||
  fail "the VM's server did not get to the end of the exchange"
awk -v a="$t1" -v b="$t2" -v c="$t3" \
  'BEGIN{printf "boot to ready (rxe0 up): %.1f s; boot to result and power-off: %.1f s\n", b-a, c-a}'
echo "PASS (total $((SECONDS - t0)) s)"
