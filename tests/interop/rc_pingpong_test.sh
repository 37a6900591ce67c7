#!/usr/bin/env bash
# conduit against the Linux kernel's Soft-RoCE (rxe) in a QEMU VM, driven by rdma-core's
# ibv_rc_pingpong on the VM side and conduit-rc-pingpong (libconduit, through conduitd on an
# af_packet port) in namespace host c. One VM boot runs every step:
#
#   VM server / conduit client and VM client / conduit server, each with 64 B, 4096 B and
#   10000 B messages at PMTU 1024 (10000 B = 10 packets: SEND_FIRST/MIDDLE/LAST);
#   with RC_PINGPONG_LOSS_PPM (default 10000 = 1 %) > 0, the same runs again with that share of
#   the RoCE frames dropped both ways by the tc eBPF drop program on the bridge port next to
#   host c (go-back-N both ways: rxe and conduit each retransmit what the other did not get).
#   ACK/NAK frames are spared (DROP_SPARE_ACKS in drop.c): rc_pingpong ends with a race of the
#   application, not of the transport (a side whose last message's ACK is lost retries into a
#   QP the other side has already destroyed); the perftest and loss tests drop ACKs too.
#
# Both sides of every step must report success (ibv_rc_pingpong and conduit-rc-pingpong print
# "N iters in ..."; conduit-rc-pingpong also checks every message's length and bytes). The
# RoCEv2 traffic is captured in host c and checked with tshark (RRoCE, expected opcodes both
# ways) and scapy (every ICRC). Root only (exit 77 otherwise); cleans up on every exit.
#
# Host c: conduitd owns 198.18.200.1 (the GID both sides use); the kernel keeps 198.18.200.3 on
# the same eth0 for the out-of-band TCP exchange (port 18515).
#
#   rc_pingpong_test.sh [BUILD_DIR]     (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
set -euo pipefail
src=${CONDUIT_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/scripts/lib/netns.sh"
. "$src/scripts/lib/rxe.sh"
. "$src/scripts/lib/tcbpf.sh"
netns_require_root apt-get dpkg-deb tcpdump tshark bpftool
[[ -e /dev/net/tun ]] || { echo "SKIP: no /dev/net/tun"; exit 77; }
build=${1:-${CONDUIT_BUILD:-$src/build}}
export CONDUIT_BUILD=$build
. "$src/scripts/lib/conduitd.sh"
pingpong=$build/lib/examples/conduit-rc-pingpong
drop_obj=$build/tests/integration/drop.o
for b in "$build/daemon/conduitd" "$build/tools/conduitctl/conduitctl" "$pingpong"; do
  [[ -x $b ]] || { echo "SKIP: $b not built (needs the daemon shell)"; exit 77; }
done
loss_ppm=${RC_PINGPONG_LOSS_PPM:-10000}
if ((loss_ppm > 0)) && [[ ! -f $drop_obj ]]; then
  echo "SKIP: $drop_obj not built (clang -target bpf)"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

conduit_ip=$RXE_HOST_IP # 198.18.200.1: conduitd's port, the GID the VM sends to
kernel_ip=198.18.200.3  # host c's kernel: TCP for the out-of-band exchange
iters=20

work=$(mktemp -d /tmp/rcpp.XXXXXX)
netns_init "rcpp$$-"
tcpdump_pid=
test_cleanup() {
  local rc=$?
  [[ -z $tcpdump_pid ]] || kill "$tcpdump_pid" 2>/dev/null || true
  conduitd_stop c 2>/dev/null || true
  netns_cleanup
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    for f in "$work"/conduitd.log "$work"/vm.err "$work"/vm.console; do
      [[ -s $f ]] || continue
      echo "--- $f (last 25 lines)"
      tail -n 25 "$f"
    done
  fi
  rm -rf "$work"
  return "$rc"
}
trap test_cleanup EXIT

t0=$SECONDS
"$(rxe_vm_bin)" --build -q || fail "VM image build failed"
rxe_topology
netns_exec c ip addr flush dev eth0
netns_exec c ip addr add "$kernel_ip/24" dev eth0
conduitd_config "$work/c.yaml" "$work/c.sock" "$(conduitd_vdev af_packet eth0)" \
  "$conduit_ip/24" 0 "rcpp$$"
conduitd_start c "$work/c.yaml" "$work/conduitd.log" || fail "conduitd did not start"

# The plan: one line per step, "NAME VM_ROLE SIZE MTU LOSS". The VM runs the VM side of each
# step in order; host c runs the conduit side of the same steps in the same order. The TCP
# connect of each client is retried until its server listens, which keeps both in step.
plan=()
losses=(0)
((loss_ppm == 0)) || losses+=("$loss_ppm")
for loss in "${losses[@]}"; do
  ((loss == 0)) && tag=plain || tag=loss
  for role in server client; do
    for size in 64 4096 10000; do
      plan+=("$tag-vm$role-$size $role $size 1024 $loss")
    done
  done
done

# VM side. A client retries while the host side does not listen yet ("Couldn't connect").
{
  echo "H=$kernel_ip"
  cat <<'SH'
step() {
  name=$1 role=$2 size=$3 mtu=$4 iters=$5
  echo "=== $name begin"
  args="-d rxe0 -g 1 -s $size -m $mtu -n $iters"
  if [ "$role" = server ]; then
    timeout 120 ibv_rc_pingpong $args >/tmp/out 2>&1; rc=$?
  else
    i=0
    while :; do
      timeout 120 ibv_rc_pingpong $args "$H" >/tmp/out 2>&1; rc=$?
      if [ $rc -ne 0 ] && grep -q "Couldn't connect" /tmp/out && [ $i -lt 300 ]; then
        i=$((i + 1)); sleep 0.3; continue
      fi
      break
    done
  fi
  cat /tmp/out
  echo "=== $name rc=$rc"
}
SH
  for p in "${plan[@]}"; do
    read -r name role size mtu _ <<<"$p"
    echo "step $name $role $size $mtu $iters"
  done
  echo "echo '=== all steps done'"
} >"$work/vm.sh"
chmod +x "$work/vm.sh"

# Captured in vmh on the bridge port to c: conduitd's af_packet port sends with qdisc bypass,
# which a capture inside c does not see.
netns_exec vmh tcpdump -i up0 -w "$work/rc.pcap" -U 'udp port 4791' >"$work/tcpdump.log" 2>&1 &
tcpdump_pid=$!

t1=$SECONDS
rxe_vm_start "$work/vm" --file "$work/vm.sh:/vm.sh" -- "sh /vm.sh"
rxe_vm_wait_ready "$work/vm" 200 || fail "the VM did not get ready (see vm.console)"
echo "VM ready (rxe0 up) after $((SECONDS - t1)) s"

drop_attached=0
host_failures=()
for p in "${plan[@]}"; do
  read -r name role size mtu loss <<<"$p"
  if ((loss > 0 && drop_attached == 0)); then
    # On vmh's bridge port to c, both ways: ingress drops c->VM, egress drops VM->c. (Not in c:
    # its af_packet port taps frames before tc ingress and sends with qdisc bypass, so tc there
    # would not see conduit's traffic.)
    for dir in ingress egress; do
      tcbpf_attach vmh up0 "$dir" "$drop_obj" || fail "could not attach the drop program"
      drop_config vmh up0 "$dir" "$loss" 4791 1 || fail "could not configure the drop program"
    done
    drop_attached=1
  fi
  args=(-S "$work/c.sock" -x "$conduit_ip" -s "$size" -m "$mtu" -n "$iters" -c -W 60)
  [[ $role == server ]] && args+=(-w 150 "$RXE_VM_IP") # the VM serves: we are the client
  rc=0
  netns_exec c timeout 170 "$pingpong" "${args[@]}" >"$work/$name.host" 2>&1 || rc=$?
  echo "--- $name: conduit-rc-pingpong exit $rc"
  cat "$work/$name.host"
  if [[ $rc -ne 0 ]]; then
    host_failures+=("$name")
    break # the VM's side of this step cannot finish: stop the VM below instead of waiting
  fi
done
if ((drop_attached)); then
  for dir in ingress egress; do
    stats=$(drop_stats vmh up0 "$dir")
    [[ $dir == ingress ]] && way="c->VM" || way="VM->c"
    echo "drop $way: $(tr '\n' ' ' <<<"$stats")"
    (($(tcbpf_stat "$stats" dropped) > 0)) || fail "nothing dropped $way: loss not exercised"
    (($(tcbpf_stat "$stats" spared) > 0)) || fail "no ACK spared $way: DROP_SPARE_ACKS not in effect"
  done
fi
status=0
vm_wait=200
[[ ${#host_failures[@]} -eq 0 ]] || vm_wait=3
rxe_vm_wait "$work/vm" "$vm_wait" || status=$?
echo "VM finished after $((SECONDS - t1)) s (status $status)"
kill "$tcpdump_pid" 2>/dev/null || true
wait "$tcpdump_pid" 2>/dev/null || true
tcpdump_pid=
echo "--- VM output"
cat "$work/vm.out"

[[ ${#host_failures[@]} -eq 0 ]] || fail "conduit side failed: ${host_failures[*]}"
[[ $status -eq 0 ]] || fail "VM exited $status"
grep -q '=== all steps done' "$work/vm.out" || fail "the VM did not run every step"
for p in "${plan[@]}"; do
  read -r name _ <<<"$p"
  grep -q "=== $name rc=0" "$work/vm.out" || fail "ibv_rc_pingpong failed in step $name"
  grep -q "^$iters iters in" "$work/$name.host" || fail "no result line from conduit in $name"
done
# Every ibv_rc_pingpong reports its iterations once per step.
n=$(grep -c "^$iters iters in" "$work/vm.out")
[[ $n -eq ${#plan[@]} ]] || fail "ibv_rc_pingpong reported $n results, expected ${#plan[@]}"
grep -q "GID ::ffff:$conduit_ip" "$work/vm.out" || fail "the VM never saw conduit's GID"

echo "--- capture check (tshark, scapy)"
# 0-2 SEND_FIRST/MIDDLE/LAST (10000 B), 4 SEND_ONLY, 17 ACK.
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/rc.pcap" "$conduit_ip" \
  "$RXE_VM_IP" --need-opcodes 0,1,2,4,17 $( ((loss_ppm == 0)) || echo --want-retransmit) ||
  fail "capture check failed"
echo "PASS: ${#plan[@]} steps in one VM boot, total $((SECONDS - t0)) s"
