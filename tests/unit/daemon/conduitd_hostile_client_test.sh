#!/usr/bin/env bash
# A hostile client against a real conduitd (issue 5). No root: the daemon on a
# net_ring port. While a conduit-perf pair runs an RDMA WRITE stream checked
# byte for byte (--check), hostile_client attacks through its own shared
# region (bad WRs, forged traffic at the good pair's QPs, doorbell spam,
# scribbles, impossible ring indices: see hostile_client.cc), then two more
# hostile clients leave mid-way (one _exits with garbage in its rings, one is
# SIGKILLed while fuzzing). Asserts: conduitd keeps running and serving; the
# hostile client got only error completions and was cut off and disconnected
# (counted in 'conduitctl stats', logged); the good pair finishes byte-exact,
# so nothing outside the hostile regions was written; no client is left.
# usage: conduitd_hostile_client_test.sh CONDUITD CONDUIT_PERF CONDUITCTL HOSTILE_CLIENT
conduitd=$1 perf=$2 ctl=$3 hostile=$4
fail_tail_lines=30
. "$(dirname "$0")/common.sh"
clients_may_leak
daemon_start x
ctl() { "$ctl" --socket "$sock" "$@"; }
stat() { ctl stats | awk -v k="$1" '$1 == k {print $2}'; }

# The good pair: WRITE stream on 2 QPs, every written byte verified at the end.
"$perf" write_bw -S "$sock" -x "$addr" -p "$port" -W 30 >"$dir/good-server.out" 2>&1 &
gs=$!
sleep 0.3
timeout 60 "$perf" write_bw 127.0.0.1 -S "$sock" -x "$addr" -p "$port" -W 30 --check \
  -s 65536 -q 2 -D 12 >"$dir/good-client.out" 2>&1 &
gc=$!
victims=()
for _ in $(seq 50); do
  mapfile -t victims < <(ctl qps --json | grep -o '"qpn": [0-9]*' | awk '{print $2}')
  ((${#victims[@]} >= 4)) && break
  sleep 0.1
done
((${#victims[@]} >= 4)) || fail "the good pair's QPs did not show up"
vargs=()
for q in "${victims[@]}"; do vargs+=(--victim-qpn "$q"); done
sleep 0.5

echo "hostile client vs. QPs ${victims[*]}"
"$hostile" --socket "$sock" --seed "$RANDOM" --phase-ms 1500 "${vargs[@]}" \
  >"$dir/hostile.out" 2>&1 || fail "hostile client: $(grep FAIL "$dir/hostile.out" || true)"
cat "$dir/hostile.out"
kill -0 "$pid" || fail "conduitd died"
kill -0 "$gc" || fail "the good pair ended before the hostile client did (machine too slow?)"
[[ $(stat control.clients_cut_off) == 1 ]] || fail "control.clients_cut_off is not 1"
[[ $(stat engine.clients_broken) == 1 ]] || fail "engine.clients_broken is not 1"
(($(stat engine.wr_rejected) > 0)) || fail "engine.wr_rejected did not count the bad WRs"
# The forged frames reached the good pair's QPs and were dropped there.
(($(stat engine.rx_wrong_peer) > 0)) || fail "engine.rx_wrong_peer counted no forged frame"
echo "conduitd counted: engine.wr_rejected=$(stat engine.wr_rejected)" \
  "engine.cqe_dropped=$(stat engine.cqe_dropped) (its CQ overflowed)" \
  "engine.rx_wrong_peer=$(stat engine.rx_wrong_peer) engine.clients_broken=1"
grep -q 'wrote impossible ring indices: the engine cut it off' "$dir/log" ||
  fail "the cut-off is not logged"
grep -q 'disconnected (cut off by the engine' "$dir/log" || fail "the disconnect is not logged"

# Closing mid-way: garbage in the rings, then _exit; and a SIGKILL while fuzzing.
"$hostile" --socket "$sock" --seed "$RANDOM" --phase-ms 5000 --exit-after-ms 400 \
  >"$dir/hostile-exit.out" 2>&1 || fail "hostile client (exit mid-way) failed to start"
grep -q 'exiting abruptly' "$dir/hostile-exit.out" || fail "hostile client did not exit mid-way"
"$hostile" --socket "$sock" --seed "$RANDOM" --phase-ms 5000 "${vargs[@]}" \
  >"$dir/hostile-kill.out" 2>&1 &
hk=$!
sleep 0.6
kill -9 "$hk"
wait "$hk" 2>/dev/null || true
kill -0 "$pid" || fail "conduitd died"

# The good pair finishes byte-exact (--check: conduit-perf exits 1 on any wrong byte).
rc=0
wait "$gc" || rc=$?
wait "$gs" || rc=$?
((rc == 0)) || fail "the good pair failed (status $rc)"
grep -E 'mismatch|Gb/s|MB/s|BW' "$dir/good-client.out" | tail -3 || true
for _ in $(seq 50); do [[ $(stat control.clients_attached) == 0 ]] && break; sleep 0.1; done
[[ $(stat control.clients_attached) == 0 ]] || fail "clients left attached"
[[ $(stat control.pending_releases) == 0 ]] || fail "releases still pending"
echo "conduitd stats: disconnects=$(stat control.disconnects)" \
  "clients_cut_off=$(stat control.clients_cut_off)"
kill -TERM "$pid"
wait "$pid" || fail "conduitd exit status $?"
pid=
echo "OK"
