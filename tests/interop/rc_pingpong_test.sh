#!/usr/bin/env bash
# conduit against the Linux kernel's Soft-RoCE (rxe) in a QEMU VM, driven by rdma-core's
# ibv_rc_pingpong on the VM side and conduit-rc-pingpong (libconduit, through conduitd on an
# af_packet port) in namespace host c. One VM boot runs every step:
#
#   VM server / conduit client and VM client / conduit server, each with 64 B, 4096 B and
#   10000 B messages at PMTU 1024 (10000 B = 10 packets: SEND_FIRST/MIDDLE/LAST);
#   RoCEv2 over IPv6: both roles with 64 B and 10000 B messages, the VM on rxe's GID index 0
#   (its link-local address, `ibv_rc_pingpong -g 0`), conduit on port.address6 fe80::c0:1
#   (conduit_ip6; neighbour discovery both ways);
#   jumbo frames: the whole path runs at MTU 9000 (INTEROP_MTU), so both roles also run 20000 B
#   messages at PMTU 4096 (5 packets of up to 4096 B, rxe's active MTU 4096), as on a RoCE
#   fabric with jumbo frames;
#   with RC_PINGPONG_LOSS_PPM (default 10000 = 1 %) > 0, the same runs again with that share of
#   the RoCE frames dropped both ways by the tc eBPF drop program on the bridge port next to
#   host c (go-back-N both ways: rxe and conduit each retransmit what the other did not get).
#   ACK/NAK frames are spared (DROP_SPARE_ACKS in drop.c): rc_pingpong ends with a race of the
#   application, not of the transport (a side whose last message's ACK is lost retries into a
#   QP the other side has already destroyed); the perftest and loss tests drop ACKs too.
#
# Both sides of every step must report success (ibv_rc_pingpong and conduit-rc-pingpong print
# "N iters in ..."; conduit-rc-pingpong also checks every message's length and bytes). The
# RoCEv2 traffic is captured next to host c and checked with tshark (RRoCE, expected opcodes
# both ways) and scapy (every ICRC). Root only (exit 77 otherwise); cleans up on every exit.
#
#   rc_pingpong_test.sh [BUILD_DIR]     (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
. "$(dirname "$0")/common.sh"
build=${1:-${CONDUIT_BUILD:-$src/build}}
pingpong=$build/lib/examples/conduit-rc-pingpong
interop_init rcpp "$build" "$pingpong"
loss_ppm=${RC_PINGPONG_LOSS_PPM:-10000}
export INTEROP_MTU=${INTEROP_MTU:-9000}
((loss_ppm == 0)) || interop_need_drop
drop_flags=1 # DROP_SPARE_ACKS (read by interop_run)
export drop_flags
iters=20

conduit_ip6=fe80::c0:1
export CONDUITD_ADDRESS6=$conduit_ip6/64
interop_vm_step() { # NAME ROLE LOSS SIZE MTU [6]
  local gidx=1
  [[ ${6:-} == 6 ]] && gidx=0 # rxe's link-local GID
  echo "$1 $2 ibv_rc_pingpong -d rxe0 -g $gidx -s $4 -m $5 -n $iters"
}
interop_host_step() { # NAME ROLE LOSS SIZE MTU [6]
  local addr=$conduit_ip
  [[ ${6:-} == 6 ]] && addr=$conduit_ip6
  local args=(-S "$work/c.sock" -x "$addr" -s "$4" -m "$5" -n "$iters" -c -W 60)
  [[ $2 == server ]] && args+=(-w 150 "$RXE_VM_IP") # the VM serves: we are the client
  netns_exec c timeout 170 "$pingpong" "${args[@]}" >"$work/$1.host" 2>&1
}

t0=$SECONDS
interop_start_c rcpp
losses=(0)
((loss_ppm == 0)) || losses+=("$loss_ppm")
for loss in "${losses[@]}"; do
  ((loss == 0)) && tag=plain || tag=loss
  for role in server client; do
    for size in 64 4096 10000; do
      plan+=("$tag-vm$role-$size $role $loss $size 1024")
    done
    if ((loss == 0)); then
      for size in 64 10000; do
        plan+=("ipv6-vm$role-$size $role 0 $size 1024 6")
      done
      plan+=("jumbo-vm$role-20000 $role 0 20000 4096")
    fi
  done
done
interop_run

for p in "${plan[@]}"; do
  read -r name _ <<<"$p"
  grep -q "=== $name rc=0" "$work/vm.out" || fail "ibv_rc_pingpong failed in step $name"
  grep -q "^$iters iters in" "$work/$name.host" || fail "no result line from conduit in $name"
done
# Every ibv_rc_pingpong reports its iterations once per step.
n=$(grep -c "^$iters iters in" "$work/vm.out")
[[ $n -eq ${#plan[@]} ]] || fail "ibv_rc_pingpong reported $n results, expected ${#plan[@]}"
grep -q "GID ::ffff:$conduit_ip" "$work/vm.out" || fail "the VM never saw conduit's GID"
grep -q "GID $conduit_ip6" "$work/vm.out" || fail "the VM never saw conduit's IPv6 GID"
echo "--- conduitd's IPv6 neighbour discovery and delivery counters"
netns_exec c "$build/tools/conduitctl/conduitctl" --socket "$work/c.sock" stats |
  grep -E 'net\.(rx_ns|rx_na|tx_na|tx_ns|rx_udp6_delivered) ' || true

echo "--- capture check (tshark, scapy)"
# 0-2 SEND_FIRST/MIDDLE/LAST (10000 B), 4 SEND_ONLY, 17 ACK.
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/rc.pcap" "$conduit_ip" \
  "$RXE_VM_IP" --need-opcodes 0,1,2,4,17 --conduit-ip6 "$conduit_ip6" \
  $( ((loss_ppm == 0)) || echo --want-retransmit) ||
  fail "capture check failed"
# The jumbo steps: 4 full packets per 20000 B message, 20 messages each way, two steps.
interop_check_full_frames 160
echo "PASS: ${#plan[@]} steps in one VM boot, total $((SECONDS - t0)) s"
