#!/usr/bin/env bash
# conduitd stopped mid-transfer (issue 5): clients get an error, not a hang.
# No root: the daemon on a net_ring port. For SIGTERM and then SIGKILL: a
# conduit-perf pair (SEND stream) and a stream_peer pair move data through one
# conduitd; the daemon gets the signal; every client must end with an error
# within a bounded time, reported in ms (6-321 ms on a quiet machine). The
# bounds only tell a hang from a slow machine: the stream_peers' errors within
# 15 s, every client process gone within 20 s (a 3 s bound failed once under a
# load of 8 while daemon and clients logged the stop and the error in the same
# millisecond). libconduit notices the control socket's hang-up on its next
# empty poll or wait. stream_peer reports what it saw: after
# SIGKILL the library's ECONNRESET ("conduitd closed the connection"); after
# SIGTERM either that or WR_FLUSH_ERR completions (the daemon flushes the QPs
# of the clients it releases while stopping). SIGTERM must also stop the
# daemon cleanly (exit 0) with clients attached.
# usage: conduitd_daemon_stop_test.sh CONDUITD CONDUIT_PERF STREAM_PEER
conduitd=$1 perf=$2 peer=$3
. "$(dirname "$0")/common.sh"
clients_may_leak

run_case() {  # run_case SIGNAL
  local sig=$1
  sock=$dir/$sig.sock
  rm -f "$dir"/*.out "$dir"/*.qpn "$dir"/*.flowing
  daemon_start "s${sig,,}"

  "$perf" send_bw -S "$sock" -x "$addr" -p "$port" -W 30 >"$dir/perf-server.out" 2>&1 &
  local ps=$!
  sleep 0.3
  "$perf" send_bw 127.0.0.1 -S "$sock" -x "$addr" -p "$port" -W 30 --check -s 65536 -D 20 \
    >"$dir/perf-client.out" 2>&1 &
  local pc=$!
  port=$((port + 1))
  "$peer" --socket "$sock" --dir "$dir" --name a --peer b --seconds 30 >"$dir/a.out" 2>&1 &
  local pa=$!
  "$peer" --socket "$sock" --dir "$dir" --name b --peer a --seconds 30 >"$dir/b.out" 2>&1 &
  local pb=$!
  for _ in $(seq 100); do [[ -f $dir/a.flowing && -f $dir/b.flowing ]] && break; sleep 0.05; done
  [[ -f $dir/a.flowing && -f $dir/b.flowing ]] || fail "$sig: stream pair never got going"
  sleep 1
  kill -0 "$pc" 2>/dev/null || fail "$sig: conduit-perf ended before the signal"

  local t0 p
  t0=$(now_ns)
  kill -s "$sig" "$pid"
  for p in $ps $pc $pa $pb; do
    timeout 20 tail --pid="$p" -s 0.02 -f /dev/null || true
  done
  local all_ms
  all_ms=$(ms_since "$t0")
  for p in $ps $pc $pa $pb; do
    kill -0 "$p" 2>/dev/null && fail "$sig: client $p still running 20 s after the daemon's $sig"
  done
  local rc=0
  wait "$pc" || rc=$?
  ((rc != 0)) || fail "$sig: conduit-perf client succeeded although its daemon stopped"
  rc=0
  wait "$ps" || rc=$?
  ((rc != 0)) || fail "$sig: conduit-perf server succeeded although its daemon stopped"
  wait "$pa" || fail "$sig: stream_peer a saw no error (status $?)"
  wait "$pb" || fail "$sig: stream_peer b saw no error (status $?)"
  local n line err_ns worst=0
  for n in a b; do
    line=$(grep '^error' "$dir/$n.out") || fail "$sig: stream_peer $n printed no error"
    # (conduit_wc_status_str names the flush "WR flushed"; WR_FLUSH_ERR is the verbs name.)
    if [[ $sig == KILL || ($line != *"status=WR_FLUSH_ERR"* && $line != *"status=WR flushed"*) ]]; then
      [[ $line == *"kind=lib status=conduitd closed the connection"* ]] ||
        fail "$sig: stream_peer $n: unexpected error: $line"
    fi
    err_ns=${line##*realtime_ns=} err_ns=${err_ns%% *}
    (((err_ns - t0) / 1000000 > worst)) && worst=$(((err_ns - t0) / 1000000))
    echo "$sig: stream_peer $n: ${line%% realtime*} after $(((err_ns - t0) / 1000000)) ms"
  done
  grep -h 'conduit-perf:' "$dir"/perf-*.out | sed "s/^/$sig: /" | head -2
  echo "$sig: every client ended within $all_ms ms of the signal"
  ((worst <= 15000)) || fail "$sig: a stream_peer's error came $worst ms after the signal"
  ((all_ms <= 20000)) || fail "$sig: clients took $all_ms ms to end"
  # After SIGTERM the daemon flushes the QPs it releases, so conduit-perf may
  # see WR_FLUSH_ERR before the hang-up.
  local expect='conduitd closed the connection'
  [[ $sig == TERM ]] && expect='conduitd closed the connection\|WR_FLUSH_ERR\|WR flushed'
  grep -q "$expect" "$dir"/perf-*.out || fail "$sig: conduit-perf did not report the daemon's end"

  rc=0
  timeout 20 tail --pid="$pid" -s 0.02 -f /dev/null || fail "$sig: conduitd still running"
  wait "$pid" || rc=$?
  pid=
  if [[ $sig == TERM ]]; then
    ((rc == 0)) || fail "TERM: conduitd exit status $rc"
    grep -q 'conduitd stopped' "$dir/log" || fail "TERM: no clean stop logged"
  fi
}

run_case TERM
run_case KILL
echo "OK"
