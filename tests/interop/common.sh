# shellcheck shell=bash
# Shared by the interop tests that run a verbs tool in the rxe VM against a conduit tool in host
# c, step by step in one VM boot (rc_pingpong_test.sh, perftest_test.sh). Source it, then:
#
#   interop_init TAG BUILD_DIR PROGRAM...  exit 77 unless root, tools and PROGRAMs are there;
#                                          sets build, work, drop_obj; cleanup trap on exit
#   interop_start_c TAG                    VM image, topology, conduitd in c on af_packet
#   plan+=("NAME ROLE LOSS_PPM ARGS...")   one step: the VM's ROLE (server|client), the share of
#                                          RoCE frames to drop (0, or from then on), free ARGS
#   interop_vm_step NAME ROLE LOSS ARGS... (the test's) prints the VM's command for a step
#   interop_host_step NAME ROLE LOSS ARGS... (the test's) runs conduit's side, output to
#                                          $work/NAME.host; non-zero on failure
#   interop_run                            runs the plan (VM and host c in step), drops frames
#                                          both ways once a step has LOSS > 0 (drop_flags: see
#                                          drop.c), checks the drops, waits for the VM; fails
#                                          when either side failed; VM output in $work/vm.out,
#                                          capture in $work/rc.pcap
#
# INTEROP_COUNTERS=1: after each step the VM prints rxe0's hw_counters ("rxe-counter STEP NAME
# VALUE"), eth0's statistics ("vm-eth0 ...") and /proc/net/softnet_stat ("vm-softnet ..."); host
# c saves `conduitctl stats --json` to $work/STEP.stats.json and the links of vmh and c
# (`ip -s link`, the tap's drops among them) to $work/STEP.links. All counters are cumulative.
# INTEROP_WATCH=1: the VM also writes rxe0's non-zero hw_counters and eth0's packet counts to its
# console ($work/vm.console, kept with INTEROP_KEEP=1) once a second, "watch UPTIME ...", and
# each step's output as it ends: what the VM did in a run that never finished (its own output
# is lost when it is stopped).
#
# Host c: conduitd owns 198.18.200.1 (conduit_ip, the GID both sides use); the kernel keeps
# 198.18.200.3 (kernel_ip) on the same eth0 for the tools' out-of-band TCP exchange.
set -euo pipefail
src=${CONDUIT_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# shellcheck source=../../scripts/lib/netns.sh
. "$src/scripts/lib/netns.sh"
# shellcheck source=../../scripts/lib/rxe.sh
. "$src/scripts/lib/rxe.sh"
# shellcheck source=../../scripts/lib/tcbpf.sh
. "$src/scripts/lib/tcbpf.sh"

fail() { echo "FAIL: $*"; exit 1; }

conduit_ip=$RXE_HOST_IP
kernel_ip=198.18.200.3
drop_flags=0
plan=()
tcpdump_pid=

interop_init() {
  local tag=$1 b
  build=$2
  shift 2
  netns_require_root apt-get dpkg-deb tcpdump tshark bpftool
  [[ -e /dev/net/tun ]] || { echo "SKIP: no /dev/net/tun"; exit 77; }
  export CONDUIT_BUILD=$build
  # shellcheck source=../../scripts/lib/conduitd.sh
  . "$src/scripts/lib/conduitd.sh"
  drop_obj=$build/tests/integration/drop.o
  for b in "$build/daemon/conduitd" "$build/tools/conduitctl/conduitctl" "$@"; do
    [[ -x $b ]] || { echo "SKIP: $b not built (needs the daemon shell)"; exit 77; }
  done
  work=$(mktemp -d "/tmp/$tag.XXXXXX")
  netns_init "$tag$$-"
  trap interop_cleanup EXIT
}

# Needs the drop program (built by meson with clang -target bpf) when the plan drops frames.
interop_need_drop() {
  if [[ ! -f $drop_obj ]]; then
    echo "SKIP: $drop_obj not built (clang -target bpf)"
    exit 77
  fi
}

interop_cleanup() {
  local rc=$? f
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
  if [[ -n ${INTEROP_KEEP:-} ]]; then echo "kept $work"; else rm -rf "$work"; fi
  return "$rc"
}

# INTEROP_MTU (default 1500): the MTU of the whole path, host c's eth0, the bridge in vmh, the
# tap and the VM's eth0 (rxe's active MTU follows it: 4096 from 4200 up), and conduitd's port
# (its path MTU 4096 from 4200 up, else 1024).
interop_start_c() {
  local mtu=${INTEROP_MTU:-1500} pmtu=1024
  ((mtu < 4200)) || pmtu=4096
  "$(rxe_vm_bin)" --build -q || fail "VM image build failed"
  rxe_topology
  if ((mtu != 1500)); then
    netns_exec c ip link set eth0 mtu "$mtu"
    netns_exec vmh ip link set up0 mtu "$mtu"
    netns_exec vmh ip link set br0 mtu "$mtu"
  fi
  netns_exec c ip addr flush dev eth0
  netns_exec c ip addr add "$kernel_ip/24" dev eth0
  conduitd_config "$work/c.yaml" "$work/c.sock" "$(conduitd_vdev af_packet eth0 "$mtu")" \
    "$conduit_ip/24" 0 "$1$$" "$mtu" "$pmtu"
  conduitd_start c "$work/c.yaml" "$work/conduitd.log" || fail "conduitd did not start"
}

# interop_check_full_frames MIN: the capture holds at least MIN frames of a full 4096-byte
# payload (4154 bytes or more on the wire) from each side, so the steps at PMTU 4096 ran at it
# both ways.
interop_check_full_frames() {
  local min=$1 from big
  for from in "$conduit_ip" "$RXE_VM_IP"; do
    big=$(tcpdump -r "$work/rc.pcap" -nn "src host $from and udp port 4791 and greater 4150" \
      2>/dev/null | wc -l)
    echo "frames of a 4096-byte payload from $from: $big"
    ((big >= min)) || fail "PMTU 4096: $big frames of 4150 B or more from $from, expected $min"
  done
}

# The VM's script: one step per plan entry, in order. A VM client retries its TCP connect while
# host c does not listen yet, which keeps both sides in step.
interop_write_vm_script() {
  local p
  {
    echo "H=$kernel_ip"
    echo "COUNTERS=${INTEROP_COUNTERS:-}"
    echo "WATCH=${INTEROP_WATCH:-}"
    cat <<'SH'
# scripts/rxe-vm boots with virtio_net.napi_tx=0 (why: there); show that it took.
echo "virtio_net napi_tx=$(cat /sys/module/virtio_net/parameters/napi_tx 2>/dev/null)"
# IPv6 steps use rxe's link-local GID (rxe has it from boot, made from the MAC), and the VM's
# kernel routes and resolves for it only once eth0 holds that address and DAD is done: wait
# (up to 15 s) for a link-local address that is not tentative.
i=0
while [ $i -lt 75 ]; do
  a=$(ip -6 addr show dev eth0)
  case $a in *"scope link"*) case $a in *tentative*) ;; *) break ;; esac ;; esac
  i=$((i + 1)); sleep 0.2
done
[ $i -lt 75 ] || echo "eth0 has no usable link-local IPv6 address after 15 s: $a"
if [ -n "$WATCH" ]; then
  (while :; do
    u=$(cut -d' ' -f1 /proc/uptime)
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
      v=$(cat "$f"); [ "$v" = 0 ] || printf 'watch %s %s %s\n' "$u" "${f##*/}" "$v"
    done
    for f in rx_packets tx_packets rx_dropped tx_dropped; do
      printf 'watch %s eth0.%s %s\n' "$u" "$f" "$(cat /sys/class/net/eth0/statistics/$f)"
    done
    sleep 1
  done >/dev/console 2>&1) &
fi
# A step still running after STALL seconds (longer than any step takes when it works, shorter
# than the host side's own patience) reports to the console what the peer is doing: the perftest
# process's state and kernel stack, rxe's non-zero counters and its QPs. The host prints these
# lines when its side of a step fails.
STALL=${STALL:-30}
stall_report() {
  sleep "$STALL"
  {
    echo "stall: $1 still running after $STALL s"
    for d in /proc/[0-9]*; do
      c=$(cat "$d/comm" 2>/dev/null)
      case $c in ib_*|rdma_*|rping|ibv_*) ;; *) continue ;; esac
      echo "stall: $c pid ${d#/proc/} state $(cut -d' ' -f3 "$d/stat") wchan $(cat "$d/wchan" 2>/dev/null)"
      for t in "$d"/task/*; do sed "s/^/stall:   ${t##*/} /" "$t/stack" 2>/dev/null; done
    done
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
      v=$(cat "$f"); [ "$v" = 0 ] || echo "stall: rxe0 ${f##*/} $v"
    done
    rdma res show qp 2>&1 | sed 's/^/stall: /'
    sed 's/^/stall: out: /' /tmp/out
  } >/dev/console 2>&1
}
step() {
  name=$1 role=$2
  shift 2
  echo "=== $name begin"
  stall_report "$name" &
  stall_pid=$!
  if [ "$role" = server ]; then
    timeout 120 "$@" >/tmp/out 2>&1; rc=$?
  else
    i=0
    while :; do
      timeout 120 "$@" "$H" >/tmp/out 2>&1; rc=$?
      if [ $rc -ne 0 ] && grep -q "Couldn't connect\|Unable to init the socket" /tmp/out &&
        [ $i -lt 300 ]; then
        i=$((i + 1)); sleep 0.3; continue
      fi
      break
    done
  fi
  kill "$stall_pid" 2>/dev/null
  cat /tmp/out
  echo "=== $name rc=$rc"
  [ -z "$WATCH" ] || { cat /tmp/out; echo "=== $name rc=$rc"; } >/dev/console
  if [ -n "$COUNTERS" ]; then
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
      echo "rxe-counter $name ${f##*/} $(cat "$f")"
    done
    for f in /sys/class/net/eth0/statistics/*; do
      echo "vm-eth0 $name ${f##*/} $(cat "$f")"
    done
    sed "s/^/vm-softnet $name /" /proc/net/softnet_stat
  fi
}
SH
    for p in "${plan[@]}"; do
      # shellcheck disable=SC2086 # the plan's fields are words
      echo "step $(interop_vm_step $p)"
    done
    echo "echo '=== all steps done'"
  } >"$work/vm.sh"
}

# After a failed step: the last RoCEv2 frames of the capture, and how many each side sent in its
# last 5 s, to tell a silent peer (nothing from it while conduit retransmits) from a lossy path or
# a protocol disagreement (NAKs, PSNs).
interop_capture_tail() {
  local fields=(-e frame.time_relative -e ip.src -e infiniband.bth.opcode -e infiniband.bth.destqp
    -e infiniband.bth.psn -e infiniband.aeth.syndrome)
  [[ -s $work/rc.pcap ]] || return 0
  echo "--- capture: the last 40 RoCEv2 frames (time, source, opcode, dest QP, PSN, AETH syndrome)"
  tshark -r "$work/rc.pcap" -T fields "${fields[@]}" 2>/dev/null |
    tail -n 40 || true
  echo "--- capture: frames per source in the last 5 s"
  tshark -r "$work/rc.pcap" -T fields -e frame.time_relative -e ip.src \
    2>/dev/null | awk '{t[NR] = $1; s[NR] = $2} END {
      for (i = 1; i <= NR; i++) if (t[i] >= t[NR] - 5) n[s[i]]++
      for (k in n) printf "  %s: %d frames (capture ends at %.3f s)\n", k, n[k], t[NR]
    }' || true
}

interop_run() {
  local p name loss dir stats way status=0 vm_wait=200 drop_attached=0 t1 t_step rc
  local host_failures=()
  interop_write_vm_script
  # Captured in vmh on the bridge port to c: conduitd's af_packet port sends with qdisc bypass,
  # which a capture inside c does not see.
  netns_exec vmh tcpdump -i up0 -w "$work/rc.pcap" -U 'udp port 4791' >"$work/tcpdump.log" 2>&1 &
  tcpdump_pid=$!
  t1=$SECONDS
  rxe_vm_start "$work/vm" --mtu "${INTEROP_MTU:-1500}" --file "$work/vm.sh:/vm.sh" -- "sh /vm.sh"
  rxe_vm_wait_ready "$work/vm" 200 || fail "the VM did not get ready (see vm.console)"
  echo "VM ready (rxe0 up) after $((SECONDS - t1)) s"
  for p in "${plan[@]}"; do
    read -r name _ loss _ <<<"$p"
    if ((loss > 0 && drop_attached == 0)); then
      # On vmh's bridge port to c, both ways: ingress drops c->VM, egress drops VM->c. (Not in c:
      # its af_packet port taps frames before tc ingress and sends with qdisc bypass, so tc
      # there would not see conduit's traffic.)
      for dir in ingress egress; do
        tcbpf_attach vmh up0 "$dir" "$drop_obj" || fail "could not attach the drop program"
        drop_config vmh up0 "$dir" "$loss" 4791 "$drop_flags" ||
          fail "could not configure the drop program"
      done
      drop_attached=1
    fi
    rc=0
    t_step=$SECONDS
    # shellcheck disable=SC2086 # the plan's fields are words
    interop_host_step $p || rc=$?
    echo "--- $name: conduit side exit $rc after $((SECONDS - t_step)) s"
    cat "$work/$name.host"
    if [[ -n ${INTEROP_COUNTERS:-} ]]; then
      netns_exec c "$build/tools/conduitctl/conduitctl" --socket "$work/c.sock" stats --json \
        >"$work/$name.stats.json" 2>&1 || true
      { netns_exec vmh ip -s link; netns_exec c ip -s link show eth0; } >"$work/$name.links" 2>&1 || true
    fi
    if [[ $rc -ne 0 ]]; then
      host_failures+=("$name")
      # Before conduitd moves on: its counters that say where packets went (non-zero only).
      echo "--- $name: conduitd's non-zero drop, error and retry counters"
      netns_exec c "$build/tools/conduitctl/conduitctl" --socket "$work/c.sock" stats 2>&1 |
        grep -Ei 'drop|err|fail|retr|timeout|nak|no_mbuf|full' | grep -Ev '[[:space:]]0$' || true
      break # the VM's side of this step cannot finish: stop the VM below instead of waiting
    fi
  done
  if ((drop_attached)); then
    for dir in ingress egress; do
      stats=$(drop_stats vmh up0 "$dir")
      [[ $dir == ingress ]] && way="c->VM" || way="VM->c"
      echo "drop $way: $(tr '\n' ' ' <<<"$stats")"
      (($(tcbpf_stat "$stats" dropped) > 0)) || fail "nothing dropped $way: loss not exercised"
      if ((drop_flags & 1)); then
        (($(tcbpf_stat "$stats" spared) > 0)) ||
          fail "no ACK spared $way: DROP_SPARE_ACKS not in effect"
      fi
    done
  fi
  [[ ${#host_failures[@]} -eq 0 ]] || vm_wait=3
  rxe_vm_wait "$work/vm" "$vm_wait" || status=$?
  echo "VM finished after $((SECONDS - t1)) s (status $status)"
  kill "$tcpdump_pid" 2>/dev/null || true
  wait "$tcpdump_pid" 2>/dev/null || true
  tcpdump_pid=
  echo "--- VM output"
  cat "$work/vm.out"
  if [[ ${#host_failures[@]} -gt 0 ]]; then
    if grep -q '^stall: ' "$work/vm.console" 2>/dev/null; then
      echo "--- the VM's report of its stalled step (vm.sh's stall_report)"
      grep -a '^stall: ' "$work/vm.console" | tail -n 80
    fi
    interop_capture_tail
    fail "conduit side failed: ${host_failures[*]}"
  fi
  [[ $status -eq 0 ]] || fail "VM exited $status"
  grep -q '=== all steps done' "$work/vm.out" || fail "the VM did not run every step"
}
