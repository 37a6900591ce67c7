#!/usr/bin/env bash
# Manual check (root; not a registered test): NetStack on a DPDK vdev in one
# network namespace answers ARP and ping from a kernel in another, over a veth
# pair. Addresses from 198.18.0.0/15 only; namespaces removed on exit.
#
#   tests/unit/dpdk/netns_ping_check.sh BUILD_DIR 'net_af_packet0,iface=IFACE,framecnt=4096'
#   tests/unit/dpdk/netns_ping_check.sh BUILD_DIR 'net_af_xdp0,iface=IFACE,start_queue=0,queue_count=1'
#
# IFACE is replaced by the veth end inside the daemon's namespace.
# Environment: VMTU (veth MTU, default 1500), MTU (port MTU), MAX_FRAME (mbuf
# sizing beyond the MTU), PSIZE (big ping size).
set -u
build=$1 vdev=$2
a=cdtnet-a-$$ b=cdtnet-b-$$
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; }
trap cleanup EXIT INT TERM
ip netns add "$a" && ip netns add "$b" || exit 1
ip link add "vq$$-a" type veth peer name "vq$$-b"
ip link set "vq$$-a" netns "$a"
ip link set "vq$$-b" netns "$b"
ip -n "$a" link set "vq$$-a" mtu "${VMTU:-1500}" up
ip -n "$b" link set "vq$$-b" mtu "${VMTU:-1500}"
ip -n "$b" addr add 198.18.10.2/24 dev "vq$$-b"
ip -n "$b" link set "vq$$-b" up
dev=${vdev//IFACE/vq$$-a}
ip netns exec "$a" "$build/tests/unit/dpdk/ping_responder" 6 "${dev%%,*}" 198.18.10.1/24 198.18.10.2 -- \
  --no-huge -m 512 --no-pci --no-shconf --no-telemetry --file-prefix="cdtnet$$" -l 0 \
  --vdev="$dev" &
pid=$!
sleep 2.5
ip -n "$b" neigh flush all  # make the kernel ARP for us
ip netns exec "$b" ping -c 5 -i 0.2 -W 1 198.18.10.1
ip netns exec "$b" ping -c 2 -s "${PSIZE:-1400}" -W 1 198.18.10.1 | tail -2
wait "$pid"
rc=$?
echo "ping_responder exit $rc"
exit $rc
