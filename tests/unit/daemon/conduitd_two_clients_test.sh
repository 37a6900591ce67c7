#!/usr/bin/env bash
# Two client processes through one conduitd (issue 5), no root needed: the
# daemon on a net_ring port, conduit-perf as server and as client attached to
# it, their QPs connected through the engine's host-local path. SEND, RDMA
# WRITE and RDMA READ of 1 B .. 64 MiB checked byte for byte, then 64 QPs at
# once. usage: conduitd_two_clients_test.sh CONDUITD CONDUIT_PERF
conduitd=$1 perf=$2
. "$(dirname "$0")/common.sh"
daemon_start t

run() {  # run TEST ARGS...: server and client, both must succeed
  local test=$1; shift
  "$perf" "$test" -S "$sock" -x "$addr" -p "$port" -W 30 >"$dir/server.log" 2>&1 &
  local spid=$!
  sleep 0.3
  local rc=0
  timeout 120 "$perf" "$test" 127.0.0.1 -S "$sock" -x "$addr" -p "$port" -W 30 --check "$@" \
    || rc=$?
  wait "$spid" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: $test $*"; cat "$dir/server.log"; tail -20 "$dir/log"; exit 1
  fi
  port=$((port + 1))
}
run send_bw -s 1,63,4096,65537,1M,64M -n 5
run write_bw -s 1,63,4096,65537,1M,64M -n 5
run read_bw -s 1,63,4096,65537,1M,64M -n 5
run write_bw -s 65536 -q 64 -n 640
# Sleeping on completions (-e) with QPs spread over several CQ pairs, both ways at once.
run send_bw -s 4096 -q 16 -t 256 -r 256 -e -b -n 500
# Deeper queues than the policy's rings (256 by default): refused with the key to change.
"$perf" write_bw -S "$sock" -x "$addr" -p "$port" -W 10 >"$dir/server.log" 2>&1 &
spid=$!
sleep 0.3
rc=0
out=$(timeout 60 "$perf" write_bw 127.0.0.1 -S "$sock" -x "$addr" -p "$port" -W 10 -t 1024 -n 5 2>&1) ||
  rc=$?
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
port=$((port + 1))
[[ $rc -ne 0 && $out == *"deeper than this conduitd's send queues: they hold 256"*"clients.quotas.max_send_wr"* ]] ||
  { echo "FAIL: -t 1024 against 256-deep rings: status $rc, '$out'"; exit 1; }
kill -TERM "$pid"
wait "$pid" || { echo "FAIL: conduitd exit status $?"; exit 1; }
pid=

# A policy with deeper rings (clients.quotas.max_send_wr / max_recv_wr / max_cqe): 1024
# sends and receives in flight per QP, byte-exact.
extra_policy='clients: {quotas: {max_qps: 16, max_cqs: 16, max_send_wr: 1024, max_recv_wr: 1024, max_cqe: 4096}}'
daemon_start t2 deep
run write_bw -s 64,65537 -t 1024 -r 1024 -n 3000
run send_bw -s 64,4096 -t 1024 -r 1024 -n 3000
run send_bw -s 4096 -q 4 -t 1024 -r 1024 -b -n 2000
kill -TERM "$pid"
wait "$pid" || { echo "FAIL: conduitd (deep rings) exit status $?"; exit 1; }
pid=
echo "OK"
