#!/usr/bin/env bash
# A client killed with SIGKILL mid-transfer is cleaned up within one second
# while another pair on the same conduitd keeps going (issue 5). No root: the
# daemon on a net_ring port. Pair 1: conduit-perf server and client, a SEND
# stream checked byte for byte (--check). Pair 2: two stream_peer processes
# (victim and survivor) SENDing to each other. The victim is SIGKILLed while
# both pairs move data; then, each within one second of the kill:
#   - the daemon log says the victim hung up and, after the engine destroyed
#     its QPs, that its region was unmapped (the log's timestamps give the
#     latencies); the daemon maps one memfd region less (/proc/PID/maps) and
#     'conduitctl stats' one attached client less;
#   - the victim's QP is gone from 'conduitctl qps';
#   - the survivor's work requests complete with WR_FLUSH_ERR (its QP was
#     connected to the victim's, which no longer exists).
# Pair 1 must then finish with every byte right.
# usage: conduitd_client_kill_test.sh CONDUITD CONDUIT_PERF CONDUITCTL STREAM_PEER
conduitd=$1 perf=$2 ctl=$3 peer=$4
fail_tail_lines=30
. "$(dirname "$0")/common.sh"
clients_may_leak
daemon_start k
regions() { grep -c 'memfd:conduit-client' "/proc/$pid/maps" || true; }
ctl() { "$ctl" --socket "$sock" "$@"; }

# Pair 2: victim and survivor.
"$peer" --socket "$sock" --dir "$dir" --name victim --peer survivor --seconds 30 \
  >"$dir/victim.out" 2>&1 &
victim=$!
"$peer" --socket "$sock" --dir "$dir" --name survivor --peer victim --seconds 30 \
  --linger-ms 4000 >"$dir/survivor.out" 2>&1 &
survivor=$!
for _ in $(seq 100); do
  [[ -f $dir/victim.flowing && -f $dir/survivor.flowing ]] && break
  sleep 0.05
done
[[ -f $dir/victim.flowing && -f $dir/survivor.flowing ]] || fail "pair 2 never got going"
# Pair 1: a --check SEND stream long enough to outlive the kill (-D seconds).
"$perf" send_bw -S "$sock" -x "$addr" -p "$port" -W 30 >"$dir/good-server.out" 2>&1 &
gs=$!
sleep 0.3
timeout 60 "$perf" send_bw 127.0.0.1 -S "$sock" -x "$addr" -p "$port" -W 30 --check \
  -s 65536 -D 5 >"$dir/good-client.out" 2>&1 &
gc=$!

sleep 1.5  # pair 1 is moving data too by now
kill -0 "$gc" 2>/dev/null || fail "pair 1 ended before the kill"
victim_qpn=$(cat "$dir/victim.qpn")
ctl qps --json | grep -q "\"qpn\": $victim_qpn," || fail "victim QP $victim_qpn not listed"
before=$(regions)
attached_before=$(ctl stats | awk '$1 == "control.clients_attached" {print $2}')

t0=$(now_ns)
kill -9 "$victim"
# The daemon logs the hang-up and, once the engine has destroyed the QPs, the
# unmapping; its timestamps (ms) give the latencies without the cost of
# polling from here.
for _ in $(seq 300); do
  grep -q 'released: QPs destroyed, region unmapped' "$dir/log" && break
  sleep 0.01
done
grep -q 'released: QPs destroyed, region unmapped' "$dir/log" || fail "no release logged 3 s after SIGKILL"
log_ms() {  # ms from the kill to the first log line matching $1
  local ts
  ts=$(grep -m1 "$1" "$dir/log" | sed 's/^\[\([^]]*\)\].*/\1/')
  echo $((($(date -d "$ts" +%s%N) - t0) / 1000000))
}
hangup_ms=$(log_ms 'client [0-9]* disconnected (hung up); releasing its resources')
released_ms=$(log_ms 'released: QPs destroyed, region unmapped')
after=$(regions)
attached_after=$(ctl stats | awk '$1 == "control.clients_attached" {print $2}')
ctl qps --json | grep -q "\"qpn\": $victim_qpn," && fail "victim QP $victim_qpn still listed"
# The survivor saw its WRs fail (it lingers 4 s after that, still attached).
for _ in $(seq 100); do grep -q '^error' "$dir/survivor.out" && break; sleep 0.02; done
line=$(grep '^error' "$dir/survivor.out" || true)
[[ -n $line ]] || fail "the survivor saw no error"
err_ns=${line##*realtime_ns=} err_ns=${err_ns%% *}
survivor_ms=$(((err_ns - t0) / 1000000))
echo "after SIGKILL: hang-up logged at ${hangup_ms} ms, QPs destroyed and region unmapped at" \
  "${released_ms} ms, survivor's error at ${survivor_ms} ms (${line%% realtime*})"
echo "daemon: memfd regions mapped $before -> $after, clients attached" \
  "$attached_before -> $attached_after; victim QP $victim_qpn gone from 'conduitctl qps'"
((released_ms <= 1000)) || fail "cleanup took ${released_ms} ms (> 1 s)"
((survivor_ms <= 1000)) || fail "the survivor's error came ${survivor_ms} ms after the kill"
((after == before - 1)) || fail "daemon regions $before -> $after, expected one fewer"
((attached_after == attached_before - 1)) || fail "clients attached $attached_before -> $attached_after"
[[ $line == *"status=WR flushed"* ]] || fail "survivor: unexpected error: $line"
peers_failed=$(ctl stats | awk '$1 == "engine.peers_failed" {print $2}')
[[ $peers_failed == 1 ]] || fail "engine.peers_failed is '$peers_failed', expected 1"
wait "$survivor" || fail "survivor exit status $?"

# Pair 1 carries on and finishes byte-exact.
rc=0
wait "$gc" || rc=$?
wait "$gs" || rc=$?
# (--check: conduit-perf exits 1 when any byte was wrong.)
((rc == 0)) || fail "pair 1 failed after the kill (status $rc)"
cat "$dir/good-client.out"
[[ $(ctl status | awk '/^clients:/ {print $2}') == 0 ]] || fail "clients left attached"
kill -TERM "$pid"
wait "$pid" || fail "conduitd exit status $?"
pid=
echo "OK"
