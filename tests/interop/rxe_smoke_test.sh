#!/usr/bin/env bash
# Proves the Soft-RoCE VM path that conduit<->rxe interop tests build on:
#   - the VM image builds (cold: from Debian packages) or comes from the cache,
#   - the VM boots on a bridge next to a namespace host "c", rxe0 comes up,
#   - ibv_rc_pingpong server and client inside the VM complete over rxe0 (RoCE v2, GID 1),
#     with 64 B and 4096 B messages,
#   - host c and the VM reach each other (ping both ways) over the veth/bridge/tap path.
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
ping -c 3 -W 5 $RXE_HOST_IP
echo vm-to-host ok"
t1=$(date +%s.%N)
rxe_vm_start "$work/vm" -- "$vm_cmd"
rxe_vm_wait_ready "$work/vm" 200 || {
  cat "$work/vm.err" "$work/vm.out" 2>/dev/null; fail "the VM did not get ready"; }
t2=$(date +%s.%N)
host_ping=0
netns_exec c ping -c 3 -i 0.5 -W 5 "$RXE_VM_IP" || host_ping=$?
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
# Both ends report 20 iterations per size: 2 sizes x 2 ends.
[[ $(grep -c '^20 iters in' "$work/vm.out") -eq 4 ]] || fail "expected 4 '20 iters' reports"
grep -q 'GID ::ffff:198.18.200.2' "$work/vm.out" || fail "RoCE v2 IPv4-mapped GID not used"
grep -q 'vm-to-host ok' "$work/vm.out" || fail "VM could not ping host c"
awk -v a="$t1" -v b="$t2" -v c="$t3" \
  'BEGIN{printf "boot to ready (rxe0 up): %.1f s; boot to result and power-off: %.1f s\n", b-a, c-a}'
echo "PASS (total $((SECONDS - t0)) s)"
