# shellcheck shell=bash
# rxe.sh: run the Soft-RoCE VM (scripts/rxe-vm) in the background next to namespace hosts, for
# interop tests. Needs scripts/lib/netns.sh (call netns_init first). Source both:
#
#   . scripts/lib/netns.sh; . scripts/lib/rxe.sh
#   netns_init
#   rxe_topology                 # host "c" (eth0 198.18.200.1/24) --veth-- host "vmh" (bridge br0)
#                                #   -- tap -- VM eth0 198.18.200.2/24 (RXE_VM_IP)
#   rxe_pingpong_start /tmp/pp server 4096      # VM: ibv_rc_pingpong -g 1 -s 4096 (server)
#   rxe_vm_wait_ready /tmp/pp 120               # rxe0 is up in the VM
#   netns_exec c conduit-rc-pingpong ... 198.18.200.2   # the side under test, in host c
#   rxe_vm_wait /tmp/pp 120; echo "VM status $?"; cat /tmp/pp.out
#
# Functions:
#   rxe_vm_bin                      path of scripts/rxe-vm
#   rxe_topology                    hosts c and vmh as above (addresses RXE_HOST_IP, RXE_VM_IP)
#   rxe_vm_start OUT [RXE-VM OPTIONS...] -- CMD
#                                   start the VM in the background on the topology's bridge;
#                                   OUT.out gets the command's output, OUT.rc its status,
#                                   OUT.console the console, OUT.ready appears when rxe0 is up
#   rxe_vm_wait_ready OUT SECONDS   wait (bounded) until the VM is ready; 1 if it ended first
#   rxe_vm_wait OUT SECONDS         wait (bounded) for the VM to finish; returns its status
#                                   (124 and kills it on timeout)
#   rxe_pingpong_start OUT ROLE SIZE [ITERS [EXTRA ARGS]]
#                                   ROLE server: ibv_rc_pingpong -g 1 -s SIZE -n ITERS EXTRA
#                                   ROLE client: the same against RXE_HOST_IP (the host side's
#                                   server must be listening on TCP 18515 first)
# Environment: RXE_VM_TIMEOUT (default 180 s, the VM's own hard limit), RXE_TAP_QLEN (default
# 16384 frames: the tap's queue towards QEMU; see below), CONDUIT_CACHE.
#
# The tap queue: the emulated (TCG) guest drains its virtio ring at ~0.5 Gbit/s, so a peer that
# sends at veth speed fills the tap's queue, and the kernel's default of 1000 frames dropped
# ~88 000 frames of conduit's 8 MiB READ responses (8192 frames each) in one ib_read_lat -a step.
# rxe's READ requester discards the responses behind a gap and asks again only when its
# retransmit timer fires (0.54 s at -u 17), one timeout per loss. 16384 frames hold two whole
# 8 MiB responses at PMTU 1024 (about 0.3 s of the guest's draining, under that timer).

RXE_HOST_IP=198.18.200.1
RXE_VM_IP=198.18.200.2
RXE_PREFIX_LEN=24

rxe_vm_bin() { printf '%s\n' "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/rxe-vm"; }

rxe_topology() {
  netns_add c vmh || return 1
  netns_link c eth0 "$RXE_HOST_IP/$RXE_PREFIX_LEN" vmh up0 "" || return 1
  netns_exec vmh ip link add br0 type bridge || return 1
  netns_exec vmh ip link set up0 master br0 || return 1
  netns_exec vmh ip link set br0 up
}

rxe_vm_start() {
  local out=$1; shift
  local opts=()
  while [[ $# -gt 0 && $1 != -- ]]; do opts+=("$1"); shift; done
  [[ ${1:-} == -- ]] && shift
  rm -f "$out".{out,rc,console,ready,err,pid}
  (
    rc=0
    "$(rxe_vm_bin)" --netns "$(netns_name vmh)" --bridge br0 --tap "rxtap$BASHPID" \
      --ip "$RXE_VM_IP/$RXE_PREFIX_LEN" --timeout "${RXE_VM_TIMEOUT:-180}" \
      --tap-qlen "${RXE_TAP_QLEN:-16384}" \
      --console "$out.console" --ready-file "$out.ready" "${opts[@]}" -- "$*" \
      >"$out.out" 2>"$out.err" &
    echo $! >"$out.pid"
    wait $! || rc=$?
    echo "$rc" >"$out.rc"
  ) &
}

rxe_vm_wait_ready() {
  local out=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    [[ -f $out.ready ]] && return 0
    [[ -f $out.rc ]] && return 1
    sleep 0.1
  done
  return 1
}

rxe_vm_wait() {
  local out=$1 deadline=$((SECONDS + $2)) i
  while ((SECONDS < deadline)); do
    [[ -f $out.rc ]] && return "$(cat "$out.rc")"
    sleep 0.1
  done
  # rxe-vm's own cleanup trap stops QEMU and removes its tap.
  [[ -f $out.pid ]] && kill "$(cat "$out.pid")" 2>/dev/null
  for ((i = 0; i < 50; i++)); do [[ -f $out.rc ]] && break; sleep 0.1; done
  return 124
}

rxe_pingpong_start() {
  local out=$1 role=$2 size=$3 iters=${4:-10} extra=${5:-}
  local cmd="ibv_rc_pingpong -d rxe0 -g 1 -s $size -n $iters $extra"
  case $role in
    server) ;;
    client) cmd+=" $RXE_HOST_IP" ;;
    *) echo "rxe_pingpong_start: role is server or client" >&2; return 1 ;;
  esac
  rxe_vm_start "$out" -- "$cmd"
}
