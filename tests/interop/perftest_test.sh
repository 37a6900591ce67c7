#!/usr/bin/env bash
# conduit-perf --perftest against the stock perftest tools (ib_send_bw, ib_write_bw, ib_read_bw)
# on the Linux kernel's Soft-RoCE (rxe) in a QEMU VM; conduitd on an af_packet port in
# namespace host c. One VM boot runs every step:
#
#   each of send_bw, write_bw, read_bw with the VM as server (conduit-perf client) and as
#   client (conduit-perf server), PERFTEST_SIZE (4096) B x PERFTEST_ITERS (200) messages;
#   with PERFTEST_LOSS_PPM (default 10000 = 1 %) > 0, the same again with that share of the
#   RoCE frames dropped both ways by the tc eBPF drop program on the bridge port next to c.
#
# Both sides of every step must succeed and print the same "#bytes #iterations" (perftest's
# send_bw server counts what it received; write_bw/read_bw servers print the client's report;
# conduit-perf checks the peer's report against its own run). The RoCEv2 traffic is captured
# next to c and checked with tshark and scapy. Root only (exit 77 otherwise); cleans up on
# every exit.
#
#   perftest_test.sh [BUILD_DIR]     (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
# Environment: PERFTEST_TESTS (default "send_bw write_bw read_bw"), PERFTEST_SIZE,
# PERFTEST_ITERS, PERFTEST_LOSS_PPM, PERFTEST_KEEP=1 keeps the work directory (capture, logs).
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
perf=$build/tools/conduit-perf/conduit-perf
drop_obj=$build/tests/integration/drop.o
for b in "$build/daemon/conduitd" "$build/tools/conduitctl/conduitctl" "$perf"; do
  [[ -x $b ]] || { echo "SKIP: $b not built (needs the daemon shell)"; exit 77; }
done
loss_ppm=${PERFTEST_LOSS_PPM:-10000}
size=${PERFTEST_SIZE:-4096}
iters=${PERFTEST_ITERS:-200}
if ((loss_ppm > 0)) && [[ ! -f $drop_obj ]]; then
  echo "SKIP: $drop_obj not built (clang -target bpf)"
  exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

conduit_ip=$RXE_HOST_IP # 198.18.200.1: conduitd's port, the GID the VM sends to
kernel_ip=198.18.200.3  # host c's kernel: TCP for the out-of-band exchange

work=$(mktemp -d /tmp/pftst.XXXXXX)
netns_init "pftst$$-"
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
  if [[ -n ${PERFTEST_KEEP:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
  return "$rc"
}
trap test_cleanup EXIT

t0=$SECONDS
"$(rxe_vm_bin)" --build -q || fail "VM image build failed"
rxe_topology
netns_exec c ip addr flush dev eth0
netns_exec c ip addr add "$kernel_ip/24" dev eth0
conduitd_config "$work/c.yaml" "$work/c.sock" "$(conduitd_vdev af_packet eth0)" \
  "$conduit_ip/24" 0 "pftst$$"
conduitd_start c "$work/c.yaml" "$work/conduitd.log" || fail "conduitd did not start"

# The plan: one line per step, "NAME VM_ROLE TEST LOSS". The VM runs the VM side of each
# step in order; host c runs the conduit side of the same steps in the same order. The TCP
# connect of each client is retried until its server listens, which keeps both in step.
plan=()
losses=(0)
((loss_ppm == 0)) || losses+=("$loss_ppm")
for loss in "${losses[@]}"; do
  ((loss == 0)) && tag=plain || tag=loss
  for t in ${PERFTEST_TESTS:-send_bw write_bw read_bw}; do
    for role in server client; do
      plan+=("$tag-$t-vm$role $role $t $loss")
    done
  done
done

# VM side. A client retries while the host side does not listen yet ("Couldn't connect").
{
  echo "H=$kernel_ip"
  cat <<'SH'
step() {
  name=$1 role=$2 test=$3 size=$4 iters=$5
  echo "=== $name begin"
  args="-d rxe0 -x 1 -F -m 1024 -u 17 -s $size -n $iters"
  if [ "$role" = server ]; then
    timeout 120 ib_$test $args >/tmp/out 2>&1; rc=$?
  else
    i=0
    while :; do
      timeout 120 ib_$test $args "$H" >/tmp/out 2>&1; rc=$?
      if [ $rc -ne 0 ] && grep -q "Couldn't connect\|Unable to init the socket" /tmp/out &&
        [ $i -lt 300 ]; then
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
    read -r name role t _ <<<"$p"
    echo "step $name $role $t $size $iters"
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
  read -r name role t loss <<<"$p"
  if ((loss > 0 && drop_attached == 0)); then
    # On vmh's bridge port to c, both ways: ingress drops c->VM, egress drops VM->c. (Not in c:
    # its af_packet port taps frames before tc ingress and sends with qdisc bypass, so tc there
    # would not see conduit's traffic.)
    for dir in ingress egress; do
      tcbpf_attach vmh up0 "$dir" "$drop_obj" || fail "could not attach the drop program"
      drop_config vmh up0 "$dir" "$loss" 4791 || fail "could not configure the drop program"
    done
    drop_attached=1
  fi
  # -t 16: at most 64 packets in flight. A go-back-N round of perftest's 128 x 4 packets floods
  # the emulated (TCG) VM's NIC queue, which then drops more than the 1 %. -u 17 (both sides):
  # local ACK timeout 0.54 s instead of 67 ms; the emulated peer on a loaded machine stalls
  # longer than 8 x 67 ms at times, which exhausted the retry budget ("transport retry counter
  # exceeded", seen twice in ~10 runs with -u 14).
  args=("$t" --perftest -S "$work/c.sock" -x "$conduit_ip" -s "$size" -n "$iters" -m 1024 -t 16
    -u 17 -W 40)
  [[ $role == server ]] && args+=("$RXE_VM_IP") # the VM serves: we are the client
  rc=0
  netns_exec c timeout 170 "$perf" "${args[@]}" >"$work/$name.host" 2>&1 || rc=$?
  echo "--- $name: conduit-perf --perftest exit $rc"
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
# Each step's result line: "#bytes #iterations ..." with our size and count, on both sides.
result_re="^ *$size +$iters +[0-9]"
for p in "${plan[@]}"; do
  read -r name _ <<<"$p"
  grep -q "=== $name rc=0" "$work/vm.out" || fail "perftest failed in step $name"
  grep -Eq "$result_re" "$work/$name.host" || fail "no '$size $iters' result from conduit in $name"
  awk -v s="=== $name begin" -v e="=== $name rc=" 'index($0, s) == 1 {on = 1; next}
    index($0, e) == 1 {on = 0} on' "$work/vm.out" | grep -Eq "$result_re" ||
    fail "perftest did not report '$size $iters' in step $name"
done
ip_gid=$(tr . : <<<"$conduit_ip" | awk -F: '{printf "%02d:%02d:%02d:%02d", $1, $2, $3, $4}')
grep -q "GID: 00:00:00:00:00:00:00:00:00:00:255:255:$ip_gid" "$work/vm.out" ||
  fail "perftest in the VM never showed conduit's GID"

echo "--- capture check (tshark, scapy)"
# The opcodes each test must have put on the wire (4096 B at PMTU 1024: FIRST/MIDDLE/LAST).
need=
for t in ${PERFTEST_TESTS:-send_bw write_bw read_bw}; do
  case $t in
    send_bw) need+=0,1,2,17, ;;
    write_bw) need+=6,7,8,17, ;;
    read_bw) need+=12,13,14,15, ;;
  esac
done
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/rc.pcap" "$conduit_ip" \
  "$RXE_VM_IP" --need-opcodes "$need" $( ((loss_ppm == 0)) || echo --want-retransmit) ||
  fail "capture check failed"
echo "PASS: ${#plan[@]} steps in one VM boot, total $((SECONDS - t0)) s"
