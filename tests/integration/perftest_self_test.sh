#!/usr/bin/env bash
# conduit-perf --perftest against itself, two conduitd over a veth pair (af_packet): perftest's
# exchange (tools/conduit-perf/perftest_wire.h) in both roles at once, without the rxe VM, so
# the sessions' steps and traffic loops are covered by the integration suite. Whether the
# exchange is perftest's is the interop test's job (tests/interop/perftest_test.sh):
#   1. write_lat, send_lat and read_lat, 64 B x 300 round trips (write_lat's one-byte counter
#      wraps), sleeping on the CQ and with -Y (poll and yield); read_lat also in conduit-perf's
#      own mode, byte-checked (--check);
#   2. send_bw and write_bw with -a (2 B .. 8 MiB, 5 messages per size);
#   3. read_bw, one size; atomic_bw (fetch-and-add; compare-and-swap on 2 QPs); atomic_lat;
#   4. perftest's -q: send_bw, write_bw and read_bw on 4 QPs (-n per QP);
#   5. perftest's -D: send_bw and write_bw for 4 s on 2 QPs (1 s margins: 2 s sampled);
#   6. perftest's -b: send_bw and read_bw on 2 QPs, write_bw -a (both print the sum); send_bw's
#      receives posted in lists of 8 (--recv_post_list);
#   7. the latency tests' -a (2 B .. 8 MiB, 5 round trips per size: 23 result lines on each
#      side that prints) and -D: write_lat and send_lat for 4 s, 64 B (perftest's duration
#      report on both sides);
#   8. perftest's -R: every test with the exchange and the QPs on rdma_cm connections (the IB
#      CM over the veth, GSI packets between the daemons; the client names the server's
#      conduitd address, no TCP), the bandwidth tests on 2 QPs.
# Both sides must succeed and print the same "#bytes #iterations". Root only (exit 77
# otherwise); everything is removed on exit.
#
#   perftest_self_test.sh [BUILD_DIR]  (default: $CONDUIT_BUILD, else $CONDUIT_SRC/build)
. "$(dirname "$0")/common.sh"
netns_require_root
daemon_test_init pfself "${1:-}"
two_daemon_hosts cdpfs
start_daemon a || fail "conduitd a did not start"
start_daemon b || fail "conduitd b did not start"

# check_side STEP SIDE SIZE ITERS LINES: SIDE (client|server) printed LINES result lines with
# ITERS iterations, one of them for SIZE.
check_side() {
  local n
  n=$(grep -Ec "^ *[0-9]+ +$4 +[0-9]" "$work/$2.out" || true)
  ((n == $5)) || fail "$1: the $2 printed $n result lines, not $5"
  grep -Eq "^ *$3 +$4 +[0-9]" "$work/$2.out" || fail "$1: no '$3 $4' result from the $2"
}

# lat_steps LIMIT SIZE ITERS LINES ARGS...: write_lat, send_lat and read_lat with --perftest
# ARGS; each side printed LINES result lines of ITERS round trips, one for SIZE (read_lat's
# server none).
lat_steps() {
  local limit=$1 size=$2 iters=$3 lines=$4 t
  shift 4
  for t in write_lat send_lat read_lat; do
    echo "== $t --perftest $*"
    perf_pair "$limit" "$t" --perftest "$@" -W 20 >/dev/null || fail "$t $* failed"
    check_side "$t $*" client "$size" "$iters" "$lines"
    if [[ $t != read_lat ]]; then
      check_side "$t $*" server "$size" "$iters" "$lines"
    elif grep -Eq "^ *[0-9]+ +$iters +[0-9]" "$work/server.out"; then
      # ib_read_lat's server prints no result (the READs need nothing of it), but it must have
      # waited for the client: its close handshake comes after the client's READs.
      fail "read_lat $*: the server printed a result"
    fi
  done
}

lat_steps 60 64 300 1 -s 64 -n 300
# -Y: the same, polling with sched_yield() between looks (no CQ sleep, no write_lat nap).
lat_steps 60 64 300 1 -s 64 -n 300 -Y
echo "== read_lat (conduit-perf's own exchange) -s 64,65536 -n 200 --check"
perf_pair 60 read_lat -s 64,65536 -n 200 --check -W 20 >/dev/null || fail "read_lat --check failed"
[[ $(grep -c 'check: OK' "$work/client.out") -eq 2 ]] || fail "read_lat: not every size checked OK"
check_side "read_lat --check" client 65536 200 2
for t in send_bw write_bw; do
  echo "== $t --perftest -a -n 5"
  perf_pair 120 "$t" --perftest -a -n 5 -t 16 -W 20 >/dev/null || fail "$t -a failed"
  check_side "$t -a" client 8388608 5 23
  # send_bw's server counts every size; write_bw's prints the client's last report.
  if [[ $t == send_bw ]]; then lines=23; else lines=1; fi
  check_side "$t -a" server 8388608 5 "$lines"
done
echo "== read_bw --perftest -s 65536 -n 100"
perf_pair 60 read_bw --perftest -s 65536 -n 100 -W 20 >/dev/null || fail "read_bw failed"
check_side read_bw client 65536 100 1
check_side read_bw server 65536 100 1
echo "== atomic_bw --perftest -n 500 (fetch-and-add, then compare-and-swap on 2 QPs)"
perf_pair 60 atomic_bw --perftest -n 500 -W 20 >/dev/null || fail "atomic_bw failed"
check_side atomic_bw client 8 500 1
check_side atomic_bw server 8 500 1
perf_pair 60 atomic_bw --perftest -n 300 -q 2 -A CMP_AND_SWAP -W 20 >/dev/null ||
  fail "atomic_bw CMP_AND_SWAP failed"
check_side "atomic_bw -A CMP_AND_SWAP" client 8 600 1
check_side "atomic_bw -A CMP_AND_SWAP" server 8 600 1
echo "== atomic_lat --perftest -n 300 (fetch-and-add, compare-and-swap)"
for a in FETCH_AND_ADD CMP_AND_SWAP; do
  perf_pair 60 atomic_lat --perftest -n 300 -A "$a" -W 20 >/dev/null || fail "atomic_lat $a failed"
  check_side "atomic_lat $a" client 8 300 1
  # As ib_atomic_lat (and read_lat): the server's memory answers, it prints no result.
  n=$(grep -Ec "^ *[0-9]+ +300 +[0-9]" "$work/server.out" || true)
  ((n == 0)) || fail "atomic_lat $a: the server printed $n result lines"
done
echo "== send_bw --perftest -s 65536 -n 200 -Y"
perf_pair 60 send_bw --perftest -s 65536 -n 200 -Y -W 20 >/dev/null || fail "send_bw -Y failed"
check_side "send_bw -Y" client 65536 200 1
check_side "send_bw -Y" server 65536 200 1
for t in send_bw write_bw read_bw; do
  echo "== $t --perftest -q 4 -s 4096 -n 200"
  perf_pair 60 "$t" --perftest -q 4 -s 4096 -n 200 -W 20 >/dev/null || fail "$t -q 4 failed"
  grep -q "Number of qps   : 4" "$work/client.out" || fail "$t -q 4: the client ran other than 4 QPs"
  # perftest's #iterations counts every QP's -n.
  check_side "$t -q 4" client 4096 800 1
  check_side "$t -q 4" server 4096 800 1
done
for t in send_bw write_bw; do
  echo "== $t --perftest -D 4 -q 2 -s 4096"
  perf_pair 60 "$t" --perftest -D 4 -q 2 -s 4096 -W 20 >/dev/null || fail "$t -D 4 failed"
  for side in client server; do
    grep -q "Duration        : 4\[sec\]" "$work/$side.out" || fail "$t -D 4: the $side did not run -D"
    # A count of its own (send_bw's server) or the client's, never 0.
    grep -Eq "^ *4096 +[1-9][0-9]* +[0-9]" "$work/$side.out" ||
      fail "$t -D 4: no 4096 B result with messages counted from the $side"
  done
done
for t in send_bw read_bw; do
  echo "== $t --perftest -b -q 2 -s 4096 -n 200"
  perf_pair 60 "$t" --perftest -b -q 2 -s 4096 -n 200 -W 20 >/dev/null || fail "$t -b failed"
  check_side "$t -b" client 4096 400 1
  check_side "$t -b" server 4096 400 1
done
echo "== send_bw --perftest --recv_post_list 8 -q 2 -s 4096 -n 200 (receives posted in lists)"
perf_pair 60 send_bw --perftest --recv_post_list 8 -q 2 -s 4096 -n 200 -W 20 >/dev/null ||
  fail "send_bw --recv_post_list 8 failed"
grep -q "Recv Post List  : 8" "$work/server.out" || fail "send_bw --recv_post_list 8: no header line"
check_side "send_bw --recv_post_list 8" client 4096 400 1
check_side "send_bw --recv_post_list 8" server 4096 400 1
echo "== write_bw --perftest -b -a -n 5"
perf_pair 120 write_bw --perftest -b -a -n 5 -t 16 -W 20 >/dev/null || fail "write_bw -b -a failed"
check_side "write_bw -b -a" client 8388608 5 23
check_side "write_bw -b -a" server 8388608 5 23
lat_steps 120 8388608 5 23 -a -n 5
for t in write_lat send_lat; do
  echo "== $t --perftest -D 4 -s 64"
  perf_pair 60 "$t" --perftest -D 4 -s 64 -W 20 >/dev/null || fail "$t -D 4 failed"
  for side in client server; do
    grep -q "Duration        : 4\[sec\]" "$work/$side.out" || fail "$t -D 4: the $side did not run -D"
    grep -Eq "#iterations +t_avg\[usec\]" "$work/$side.out" ||
      fail "$t -D 4: the $side printed no duration report"
    n=$(grep -Ec "^ *64 +[1-9][0-9]* +[0-9]" "$work/$side.out" || true)
    ((n == 1)) || fail "$t -D 4: the $side printed $n results with round trips counted, not 1"
  done
done
for t in send_bw write_bw read_bw write_lat send_lat read_lat; do
  if [[ $t == *_bw ]]; then args=(-q 2 -s 4096 -n 200) n=400; else args=(-s 64 -n 200) n=200; fi
  echo "== $t --perftest -R ${args[*]}"
  # With -R the client reaches the server through rdma_cm at its conduitd's address.
  PERF_OOB_ADDR=$PERF_SERVER_ADDR perf_pair 60 "$t" --perftest -R "${args[@]}" -W 20 >/dev/null ||
    fail "$t -R failed"
  check_side "$t -R" client "${args[-3]}" "$n" 1
  [[ $t == read_lat ]] || check_side "$t -R" server "${args[-3]}" "$n" 1
done
echo "PASS"
