#!/usr/bin/env bash
# rdma_cm interop: conduit's IB CM dialect against the Linux kernel's ib_cm/rdma_cm on Soft-RoCE
# (rxe) in a QEMU VM. librdmacm's rdma_server and rdma_client examples (rdmacm-utils) run in the
# VM; conduit-cm-echo (libconduit, through conduitd on an af_packet port) runs in host c. One VM
# boot runs every step:
#
#   vmclient-*   the VM's rdma_client connects to conduit-cm-echo listening on port 7471
#                (the kernel's REQ -> conduitd's REP -> the kernel's RTU), sends 16 bytes, gets
#                16 back, disconnects (DREQ/DREP)
#   vmserver-*   conduit-cm-echo connects to the VM's rdma_server (conduitd's REQ, the
#                kernel's REP, conduitd's RTU), the same exchange, then conduit disconnects
#   vmrefused    the VM's rdma_client connects to a port nobody listens on at conduitd: the
#                kernel must see a reject (conduitd's REJ, invalid service id)
#   hostrefused  conduit-cm-echo connects to a VM port nobody listens on: the kernel's REJ
#                must come back as "no listener"
#   rping-vmclient, rping-vmserver  rping (VM) against conduit-rping, each side once: 20 pings
#                of 2000 bytes (SEND of the buffer's address, RDMA READ of it, SEND, RDMA WRITE
#                back, SEND; 2 packets each way at PMTU 1024), validated by the client (-V)
#   rping6-vmclient, rping6-vmserver  the same over IPv6: conduitd also owns fe80::c0:1
#                (port.address6); the VM's rping connects to it, and conduit-rping to the VM's
#                link-local address (the one its rping came from): the kernel's rdma_cm
#                header says IPv6, the MADs and the data go in IPv6 frames
#   perftest-R-TEST-vmROLE  perftest's -R (its exchange and its QPs on rdma_cm connections, no
#                TCP) against conduit-perf --perftest -R, each of ib_send_bw, ib_write_bw,
#                ib_read_bw (4096 B x 100 on 2 QPs) and ib_send_lat, ib_write_lat, ib_read_lat
#                (64 B x 100), the VM as server and as client (RDMA_CM_PERFTEST_TESTS picks
#                the tests; empty skips them)
#   loss-*       with RDMA_CM_LOSS_PPM (default 10000 = 1 %) > 0: an rdma_client/rdma_server
#                pair and the rping pair again, with that share of the RoCE frames dropped both
#                ways by the tc eBPF drop program (CM MADs included: both CMs resend; RC data
#                by go-back-N). ACKs are spared (DROP_SPARE_ACKS), as in rc_pingpong_test.sh:
#                an exchange that ends with a lost ACK is a race of the applications
#
# Both sides of every exchange must report success. The GSI traffic (UD SEND_ONLY to QP 1) and
# the RC traffic are captured next to host c; every frame's ICRC must be valid per scapy, and
# tshark must decode the CM MADs (ConnectRequest, ConnectReply, ReadyToUse, ...) both ways.
# Root only (exit 77 otherwise); cleans up on every exit.
#
#   rdma_cm_test.sh [BUILD_DIR]     (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
. "$(dirname "$0")/common.sh"
build=${1:-${CONDUIT_BUILD:-$src/build}}
echo_tool=$build/lib/examples/conduit-cm-echo
rping=$build/lib/examples/conduit-rping
interop_init rdmacm "$build" "$echo_tool" "$rping"
pings=20 rsize=2000
# The lossy rping pair runs longer: at 1 % of ~200 droppable frames each way (ACKs are spared)
# a direction saw no drop at all about one run in seven, and the test then fails on "loss not
# exercised". 200 pings give ~1,000 droppable frames each way (P(none) ~ 4e-5).
loss_pings=${RDMA_CM_LOSS_PINGS:-200}
loss_ppm=${RDMA_CM_LOSS_PPM:-10000}
((loss_ppm == 0)) || interop_need_drop
drop_flags=1 # DROP_SPARE_ACKS (read by interop_run)
export drop_flags
rounds=${RDMA_CM_ROUNDS:-2}
conduit_ip6=fe80::c0:1
export CONDUITD_ADDRESS6=$conduit_ip6/64
vm_ip6= # the VM's link-local address, found by the first step that needs it
perf=$build/tools/conduit-perf/conduit-perf
perftest_tests=${RDMA_CM_PERFTEST_TESTS-send_bw write_bw read_bw send_lat write_lat read_lat}
# A perftest -R step's size, count and QPs, for both sides.
perftest_args() { # TEST
  if [[ $1 == *_bw ]]; then echo "-s 4096 -n 100 -q 2"; else echo "-s 64 -n 100"; fi
}

# The VM's role, as in the other interop tests: "client" steps get the host's kernel address
# appended, which rdma_client ignores (it connects to -s, conduitd's own address).
interop_vm_step() { # NAME ROLE LOSS PORT [PINGS]
  local n=${5:-$pings}
  case $1 in
    # Until conduit-rping listens, conduitd refuses the REQ (REJ 8, no listener): retry then
    # (up to ~60 s). Any other failure ends the step at once with that attempt's output (once
    # conduit-rping served a connection it exits, so a retry could only be refused).
    *rping-vmclient)
      echo "$1 server sh -c 'for i in \$(seq 120); do rping -c -a $conduit_ip -p $4 -C $n" \
        "-S $rsize -V >/tmp/rp 2>&1 && { cat /tmp/rp; exit 0; }; rc=\$?; grep -q REJECTED..error.8 /tmp/rp ||" \
        "{ echo attempt \$i: rping exit \$rc; cat /tmp/rp; exit 1; }; sleep 0.5; done; exit 1'"
      ;;
    *rping-vmserver) echo "$1 server rping -s -p $4 -S $rsize -V" ;;
    # Over IPv6: a link-local address needs its interface; the server listens on IPv6's
    # wildcard (rping's default is IPv4's).
    rping6-vmclient)
      echo "$1 server sh -c 'for i in \$(seq 120); do rping -c -a $conduit_ip6%eth0 -p $4 -C $n" \
        "-S $rsize -V >/tmp/rp 2>&1 && { cat /tmp/rp; exit 0; }; rc=\$?; grep -q REJECTED..error.8 /tmp/rp ||" \
        "{ echo attempt \$i: rping exit \$rc; cat /tmp/rp; exit 1; }; sleep 0.5; done; exit 1'"
      ;;
    rping6-vmserver) echo "$1 server rping -s -a :: -p $4 -S $rsize -V" ;;
    *vmclient-*)
      echo "$1 server sh -c 'for i in \$(seq 120); do rdma_client -s $conduit_ip -p $4 && exit 0;" \
        "sleep 0.5; done; exit 1'"
      ;;
    *vmserver-*) echo "$1 server rdma_server -p $4" ;;
    vmrefused) echo "$1 server rdma_client -s $conduit_ip -p $4" ;;
    hostrefused) echo "$1 server sleep 10" ;; # alive while conduit connects
    # perftest -R: its client connects to conduitd's address through rdma_cm (no TCP). Until
    # conduit-perf listens, conduitd refuses the REQ: retry then.
    perftest-R-*-vmclient)
      local t=${1#perftest-R-}
      t=${t%-vmclient}
      echo "$1 server sh -c 'for i in \$(seq 120); do ib_$t -d rxe0 -F -R -p $4" \
        "$(perftest_args "$t") $conduit_ip && exit 0; sleep 0.5; done; exit 1'"
      ;;
    perftest-R-*-vmserver)
      local t=${1#perftest-R-}
      t=${t%-vmserver}
      echo "$1 server ib_$t -d rxe0 -F -R -p $4 $(perftest_args "$t")"
      ;;
  esac
}
# The VM's link-local address: the one its rping came from in rping6-vmclient (its kernel's
# address on eth0, which rxe's GID 0 is).
find_vm_ip6() {
  vm_ip6=$(sed -n 's/^conduit-rping: connected to \(fe80:[0-9a-f:]*\) .*/\1/p' \
    "$work/rping6-vmclient.host" 2>/dev/null)
  [[ -n $vm_ip6 ]] || { echo "the VM's IPv6 address is unknown (rping6-vmclient)"; return 1; }
  echo "the VM's link-local address: $vm_ip6"
}
interop_host_step() { # NAME ROLE LOSS PORT [PINGS]
  local args=(-S "$work/c.sock" -p "$4" -W 60)
  case $1 in
    *rping-vmclient | rping6-vmclient)
      netns_exec c timeout 90 "$rping" --socket "$work/c.sock" -s -p "$4" -S "$rsize" \
        >"$work/$1.host" 2>&1
      ;;
    *rping-vmserver | rping6-vmserver) # until the VM's rping listens, its kernel refuses: retry
      local i peer=$RXE_VM_IP
      if [[ $1 == rping6-* ]]; then
        [[ -n $vm_ip6 ]] || find_vm_ip6 || return 1
        peer=$vm_ip6
      fi
      for i in $(seq 120); do
        netns_exec c timeout 90 "$rping" --socket "$work/c.sock" -c -a "$peer" -p "$4" \
          -S "$rsize" -C "${5:-$pings}" -V >"$work/$1.host" 2>&1 && return 0
        grep -q "no listener" "$work/$1.host" || return 1
        sleep 0.5
      done
      return 1
      ;;
    *vmclient-*) netns_exec c timeout 90 "$echo_tool" "${args[@]}" >"$work/$1.host" 2>&1 ;;
    *vmserver-*)
      netns_exec c timeout 90 "$echo_tool" "${args[@]}" -w 60 "$RXE_VM_IP" >"$work/$1.host" 2>&1
      ;;
    perftest-R-*)
      local t=${1#perftest-R-} peer=()
      t=${t%-vm*}
      [[ $1 == *-vmserver ]] && peer=("$RXE_VM_IP") # the VM serves: we are the client
      # shellcheck disable=SC2046 # the arguments are words
      netns_exec c timeout 120 "$perf" "$t" --perftest -R -S "$work/c.sock" -x "$conduit_ip" \
        -p "$4" $(perftest_args "$t") -t 16 -W 40 "${peer[@]}" >"$work/$1.host" 2>&1
      ;;
    vmrefused) sleep 3; echo "nothing listens on $4" >"$work/$1.host" ;;
    hostrefused)
      ! netns_exec c timeout 30 "$echo_tool" "${args[@]}" "$RXE_VM_IP" >"$work/$1.host" 2>&1
      ;;
  esac
}

t0=$SECONDS
interop_start_c rdmacm
for ((r = 1; r <= rounds; ++r)); do
  plan+=("vmclient-$r client 0 $((7470 + r))" "vmserver-$r server 0 $((7480 + r))")
done
plan+=("vmrefused client 0 7499" "hostrefused server 0 7498")
plan+=("rping-vmclient client 0 7174" "rping-vmserver server 0 7175")
plan+=("rping6-vmclient client 0 7178" "rping6-vmserver server 0 7179")
perftest_port=18600 perftest_conns=0
for t in $perftest_tests; do
  for role in client server; do
    plan+=("perftest-R-$t-vm$role $role 0 $((perftest_port++))")
    # The exchange's connection and one per QP.
    [[ $t == *_bw ]] && perftest_conns=$((perftest_conns + 3)) || perftest_conns=$((perftest_conns + 2))
  done
done
lossy=()
if ((loss_ppm > 0)); then
  lossy=(loss-vmclient-1 loss-vmserver-1 loss-rping-vmclient loss-rping-vmserver)
  plan+=("loss-vmclient-1 client $loss_ppm 7473" "loss-vmserver-1 server $loss_ppm 7483")
  plan+=("loss-rping-vmclient client $loss_ppm 7176 $loss_pings")
  plan+=("loss-rping-vmserver server $loss_ppm 7177 $loss_pings")
fi
interop_run

for ((r = 1; r <= rounds; ++r)); do
  grep -q "=== vmclient-$r rc=0" "$work/vm.out" || fail "rdma_client failed in vmclient-$r"
  grep -q "=== vmserver-$r rc=0" "$work/vm.out" || fail "rdma_server failed in vmserver-$r"
  grep -q "request from $RXE_VM_IP qpn [0-9]* (rdma_cm)" "$work/vmclient-$r.host" ||
    fail "conduit did not see the VM's rdma_cm request in vmclient-$r"
  for s in vmclient vmserver; do
    grep -q "1 messages of 16 bytes each way" "$work/$s-$r.host" || fail "no result from conduit in $s-$r"
    grep -q "connected to $RXE_VM_IP .*(IB CM)" "$work/$s-$r.host" || fail "$s-$r: not an IB CM connection"
  done
done
# The path MTU each IB CM connection runs: the kernel's rdma_cm offers rxe's active MTU (1024 on
# a 1500-byte path, 4096 from 4200 up: INTEROP_MTU), and conduit runs what the REQ says.
want_mtu=1024
((${INTEROP_MTU:-1500} < 4200)) || want_mtu=4096
ib_conns=$(cat "$work"/*.host | grep -c "connected to .* (IB CM)")
ib_at_mtu=$(cat "$work"/*.host | grep -c "connected to .*, MTU $want_mtu (IB CM)")
echo "IB CM connections: $ib_conns, at path MTU $want_mtu: $ib_at_mtu"
((ib_conns > 0 && ib_at_mtu == ib_conns)) ||
  fail "$((ib_conns - ib_at_mtu)) of $ib_conns IB CM connections not at path MTU $want_mtu"
grep -A3 "=== vmrefused begin" "$work/vm.out" | grep -qi "rdma_connect\|refused\|reject" ||
  fail "the VM's rdma_client did not report the reject"
! grep -q "=== vmrefused rc=0" "$work/vm.out" || fail "rdma_client to a port nobody listens on succeeded"
grep -q "no listener" "$work/hostrefused.host" || fail "the kernel's reject did not come back as 'no listener'"
grep -q "=== rping-vmclient rc=0" "$work/vm.out" || fail "rping -c failed against conduit-rping"
grep -q "=== rping-vmserver rc=0" "$work/vm.out" || fail "rping -s failed against conduit-rping"
grep -q "served $pings pings of $rsize bytes" "$work/rping-vmclient.host" ||
  fail "conduit-rping did not serve $pings pings"
grep -q "$pings pings of $rsize bytes, every one validated" "$work/rping-vmserver.host" ||
  fail "conduit-rping did not validate $pings pings"
grep -q "=== rping6-vmclient rc=0" "$work/vm.out" || fail "rping -c over IPv6 failed against conduit-rping"
grep -q "=== rping6-vmserver rc=0" "$work/vm.out" || fail "rping -s over IPv6 failed against conduit-rping"
grep -q "connected to fe80:.*(IB CM)" "$work/rping6-vmclient.host" ||
  fail "conduit-rping was not connected to an IPv6 peer in rping6-vmclient"
grep -q "connected to $vm_ip6 .*(IB CM)" "$work/rping6-vmserver.host" ||
  fail "conduit-rping was not connected to $vm_ip6 in rping6-vmserver"
grep -q "served $pings pings of $rsize bytes" "$work/rping6-vmclient.host" ||
  fail "conduit-rping did not serve $pings pings over IPv6"
grep -q "$pings pings of $rsize bytes, every one validated" "$work/rping6-vmserver.host" ||
  fail "conduit-rping did not validate $pings pings over IPv6"
for s in "${lossy[@]}"; do
  grep -q "=== $s rc=0" "$work/vm.out" || fail "the VM's side failed in $s"
done
# perftest -R: both sides succeeded (each step's host side did, or interop_run failed), and
# printed the step's result line (4096 B x 100 on 2 QPs: perftest's #iterations is 200; 64 B x
# 100 for the latency tests), except ib_read_lat's server, which prints none.
vm_step_out() {
  awk -v s="=== $1 begin" -v e="=== $1 rc=" 'index($0, s) == 1 {on = 1; next}
    index($0, e) == 1 {on = 0} on' "$work/vm.out"
}
for t in $perftest_tests; do
  [[ $t == *_bw ]] && want='^ *4096 +200 +[0-9]' || want='^ *64 +100 +([0-9]|inf|-?nan)'
  for role in client server; do
    s=perftest-R-$t-vm$role
    grep -q "=== $s rc=0" "$work/vm.out" || fail "ib_$t -R failed in $s"
    [[ $t == read_lat && $role == client ]] || grep -Eq "$want" "$work/$s.host" ||
      fail "no result from conduit-perf in $s"
    [[ $t == read_lat && $role == server ]] || vm_step_out "$s" | grep -Eq "$want" ||
      fail "no result from ib_$t in $s"
  done
done
if ((${#lossy[@]})); then
  grep -q "1 messages of 16 bytes each way" "$work/loss-vmclient-1.host" || fail "loss-vmclient-1: no result"
  grep -q "1 messages of 16 bytes each way" "$work/loss-vmserver-1.host" || fail "loss-vmserver-1: no result"
  grep -q "served $loss_pings pings of $rsize bytes" "$work/loss-rping-vmclient.host" ||
    fail "loss-rping-vmclient: conduit-rping did not serve $loss_pings pings"
  grep -q "$loss_pings pings of $rsize bytes, every one validated" \
    "$work/loss-rping-vmserver.host" ||
    fail "loss-rping-vmserver: conduit-rping did not validate $loss_pings pings"
fi
netns_exec c "$build/tools/conduitctl/conduitctl" --socket "$work/c.sock" stats --json >"$work/stats.json"
/usr/bin/python3 - "$work/stats.json" "$rounds" "${#lossy[@]}" "$perftest_conns" <<'PY' \
  || fail "conduitd's CM counters are off"
import json, sys
s, rounds, lossy = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
perftest_conns = int(sys.argv[4])
print({k: v for k, v in s.items() if k.startswith("cm.")})
assert s["cm.established"] == 2 * rounds + 4 + lossy + perftest_conns, "cm.established"
assert s["cm.gsi_rx"] > 0 and s["cm.gsi_tx"] > 0, "no GSI traffic"
assert s["cm.gsi_rx_dropped"] == 0, "GSI packets dropped"
assert s["cm.rx_malformed"] == 0, "malformed MADs"
assert s["cm.rejects_sent"] >= 1 and s["cm.rejects_received"] >= 1, "rejects"
PY

echo "--- capture check (tshark, scapy)"
# 4 SEND_ONLY, 6/8 WRITE_FIRST/LAST, 12 READ_REQUEST, 13/15 READ_RESP_FIRST/LAST, 17 ACK
# (RC), 100 (0x64) UD SEND_ONLY: the GSI.
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/rc.pcap" "$conduit_ip" \
  "$RXE_VM_IP" --need-opcodes 4,6,8,12,13,15,17,100 --conduit-ip6 "$conduit_ip6" ||
  fail "capture check failed"
# tshark's own CM dissector: REQ, REP, RTU and REJ both ways (each side was active and passive
# once and refused once), DREQ and DREP at least one way.
cm=$(tshark -r "$work/rc.pcap" -Y infiniband.mad.attributeid -T fields \
  -e infiniband.mad.attributeid -e ip.src 2>/dev/null | sort | uniq -c)
echo "CM MADs by attribute and sender (tshark):"
echo "$cm"
for attr in 0x0010 0x0013 0x0014 0x0012; do
  for from in "$conduit_ip" "$RXE_VM_IP"; do
    grep -Eq " $attr\s+$from\$" <<<"$cm" || fail "tshark decoded no CM MAD $attr from $from"
  done
done
for attr in 0x0015 0x0016; do
  grep -q " $attr" <<<"$cm" || fail "tshark decoded no CM MAD $attr"
done
# Over IPv6 (the rping6 steps): REQ, REP and RTU both ways.
cm6=$(tshark -r "$work/rc.pcap" -Y "ipv6 && infiniband.mad.attributeid" -T fields \
  -e infiniband.mad.attributeid -e ipv6.src 2>/dev/null | sort | uniq -c)
echo "CM MADs over IPv6 by attribute and sender (tshark):"
echo "$cm6"
for attr in 0x0010 0x0013 0x0014; do
  for from in "$conduit_ip6" "$vm_ip6"; do
    grep -Eq " $attr\s+$from\$" <<<"$cm6" || fail "tshark decoded no CM MAD $attr from $from over IPv6"
  done
done
echo "PASS: ${#plan[@]} steps in one VM boot, total $((SECONDS - t0)) s"
