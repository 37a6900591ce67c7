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
loss_ppm=${RDMA_CM_LOSS_PPM:-10000}
((loss_ppm == 0)) || interop_need_drop
drop_flags=1 # DROP_SPARE_ACKS (read by interop_run)
export drop_flags
rounds=${RDMA_CM_ROUNDS:-2}

# The VM's role, as in the other interop tests: "client" steps get the host's kernel address
# appended, which rdma_client ignores (it connects to -s, conduitd's own address).
interop_vm_step() { # NAME ROLE LOSS PORT
  case $1 in
    # Until conduit-cm-echo listens, conduitd refuses the REQ: retry then (up to ~60 s).
    *rping-vmclient)
      echo "$1 server sh -c 'for i in \$(seq 120); do rping -c -a $conduit_ip -p $4 -C $pings" \
        "-S $rsize -V && exit 0; sleep 0.5; done; exit 1'"
      ;;
    *rping-vmserver) echo "$1 server rping -s -p $4 -S $rsize -V" ;;
    *vmclient-*)
      echo "$1 server sh -c 'for i in \$(seq 120); do rdma_client -s $conduit_ip -p $4 && exit 0;" \
        "sleep 0.5; done; exit 1'"
      ;;
    *vmserver-*) echo "$1 server rdma_server -p $4" ;;
    vmrefused) echo "$1 server rdma_client -s $conduit_ip -p $4" ;;
    hostrefused) echo "$1 server sleep 10" ;; # alive while conduit connects
  esac
}
interop_host_step() { # NAME ROLE LOSS PORT
  local args=(-S "$work/c.sock" -p "$4" -W 60)
  case $1 in
    *rping-vmclient)
      netns_exec c timeout 90 "$rping" --socket "$work/c.sock" -s -p "$4" -S "$rsize" \
        >"$work/$1.host" 2>&1
      ;;
    *rping-vmserver) # until the VM's rping listens, its kernel refuses: retry for up to 60 s
      local i
      for i in $(seq 120); do
        netns_exec c timeout 90 "$rping" --socket "$work/c.sock" -c -a "$RXE_VM_IP" -p "$4" \
          -S "$rsize" -C "$pings" -V >"$work/$1.host" 2>&1 && return 0
        grep -q "no listener" "$work/$1.host" || return 1
        sleep 0.5
      done
      return 1
      ;;
    *vmclient-*) netns_exec c timeout 90 "$echo_tool" "${args[@]}" >"$work/$1.host" 2>&1 ;;
    *vmserver-*)
      netns_exec c timeout 90 "$echo_tool" "${args[@]}" -w 60 "$RXE_VM_IP" >"$work/$1.host" 2>&1
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
lossy=()
if ((loss_ppm > 0)); then
  lossy=(loss-vmclient-1 loss-vmserver-1 loss-rping-vmclient loss-rping-vmserver)
  plan+=("loss-vmclient-1 client $loss_ppm 7473" "loss-vmserver-1 server $loss_ppm 7483")
  plan+=("loss-rping-vmclient client $loss_ppm 7176" "loss-rping-vmserver server $loss_ppm 7177")
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
for s in "${lossy[@]}"; do
  grep -q "=== $s rc=0" "$work/vm.out" || fail "the VM's side failed in $s"
done
if ((${#lossy[@]})); then
  grep -q "1 messages of 16 bytes each way" "$work/loss-vmclient-1.host" || fail "loss-vmclient-1: no result"
  grep -q "1 messages of 16 bytes each way" "$work/loss-vmserver-1.host" || fail "loss-vmserver-1: no result"
  grep -q "served $pings pings of $rsize bytes" "$work/loss-rping-vmclient.host" ||
    fail "loss-rping-vmclient: conduit-rping did not serve $pings pings"
  grep -q "$pings pings of $rsize bytes, every one validated" "$work/loss-rping-vmserver.host" ||
    fail "loss-rping-vmserver: conduit-rping did not validate $pings pings"
fi
netns_exec c "$build/tools/conduitctl/conduitctl" --socket "$work/c.sock" stats --json >"$work/stats.json"
/usr/bin/python3 - "$work/stats.json" "$rounds" "${#lossy[@]}" <<'PY' || fail "conduitd's CM counters are off"
import json, sys
s, rounds, lossy = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
print({k: v for k, v in s.items() if k.startswith("cm.")})
assert s["cm.established"] == 2 * rounds + 2 + lossy, "cm.established"
assert s["cm.gsi_rx"] > 0 and s["cm.gsi_tx"] > 0, "no GSI traffic"
assert s["cm.gsi_rx_dropped"] == 0, "GSI packets dropped"
assert s["cm.rx_malformed"] == 0, "malformed MADs"
assert s["cm.rejects_sent"] >= 1 and s["cm.rejects_received"] >= 1, "rejects"
PY

echo "--- capture check (tshark, scapy)"
# 4 SEND_ONLY, 6/8 WRITE_FIRST/LAST, 12 READ_REQUEST, 13/15 READ_RESP_FIRST/LAST, 17 ACK
# (RC), 100 (0x64) UD SEND_ONLY: the GSI.
/usr/bin/python3 "$src/tests/interop/check_capture.py" "$work/rc.pcap" "$conduit_ip" \
  "$RXE_VM_IP" --need-opcodes 4,6,8,12,13,15,17,100 || fail "capture check failed"
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
echo "PASS: ${#plan[@]} steps in one VM boot, total $((SECONDS - t0)) s"
