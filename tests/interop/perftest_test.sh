#!/usr/bin/env bash
# conduit-perf --perftest against the stock perftest tools (ib_send_bw, ib_write_bw, ib_read_bw)
# on the Linux kernel's Soft-RoCE (rxe) in a QEMU VM; conduitd on an af_packet port in
# namespace host c. One VM boot runs every step:
#
#   each of send_bw, write_bw, read_bw with the VM as server (conduit-perf client) and as
#   client (conduit-perf server), PERFTEST_SIZE (4096) B x PERFTEST_ITERS (200) messages;
#   with PERFTEST_LOSS_PPM (default 10000 = 1 %) > 0, the same again with that share of the
#   RoCE frames (ACKs included) dropped both ways by the tc eBPF drop program next to c.
#
# Both sides of every step must succeed and print the same "#bytes #iterations" (perftest's
# send_bw server counts what it received; write_bw/read_bw servers print the client's report;
# conduit-perf checks the peer's report against its own run). The RoCEv2 traffic is captured
# next to c and checked with tshark and scapy. Root only (exit 77 otherwise); cleans up on
# every exit.
#
#   perftest_test.sh [BUILD_DIR]     (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
# Environment: PERFTEST_TESTS (default "send_bw write_bw read_bw"), PERFTEST_SIZE,
# PERFTEST_ITERS, PERFTEST_LOSS_PPM, INTEROP_KEEP=1 keeps the work directory (capture, logs).
. "$(dirname "$0")/common.sh"
build=${1:-${CONDUIT_BUILD:-$src/build}}
perf=$build/tools/conduit-perf/conduit-perf
interop_init pftst "$build" "$perf"
loss_ppm=${PERFTEST_LOSS_PPM:-10000}
((loss_ppm == 0)) || interop_need_drop
size=${PERFTEST_SIZE:-4096}
iters=${PERFTEST_ITERS:-200}

interop_vm_step() { # NAME ROLE LOSS TEST
  echo "$1 $2 ib_$4 -d rxe0 -x 1 -F -m 1024 -u 17 -s $size -n $iters"
}
interop_host_step() { # NAME ROLE LOSS TEST
  # -t 16: at most 64 packets in flight. A go-back-N round of perftest's 128 x 4 packets floods
  # the emulated (TCG) VM's NIC queue, which then drops more than the 1 %. -u 17 (both sides):
  # local ACK timeout 0.54 s instead of 67 ms; the emulated peer on a loaded machine stalls
  # longer than 8 x 67 ms at times, which exhausted the retry budget ("transport retry counter
  # exceeded", seen twice in ~10 runs with -u 14).
  local args=("$4" --perftest -S "$work/c.sock" -x "$conduit_ip" -s "$size" -n "$iters" -m 1024
    -t 16 -u 17 -W 40)
  [[ $2 == server ]] && args+=("$RXE_VM_IP") # the VM serves: we are the client
  netns_exec c timeout 170 "$perf" "${args[@]}" >"$work/$1.host" 2>&1
}

t0=$SECONDS
interop_start_c pftst
losses=(0)
((loss_ppm == 0)) || losses+=("$loss_ppm")
for loss in "${losses[@]}"; do
  ((loss == 0)) && tag=plain || tag=loss
  for t in ${PERFTEST_TESTS:-send_bw write_bw read_bw}; do
    for role in server client; do
      plan+=("$tag-$t-vm$role $role $loss $t")
    done
  done
done
interop_run

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
