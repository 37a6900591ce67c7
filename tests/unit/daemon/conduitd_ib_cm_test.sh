#!/usr/bin/env bash
# The IB CM dialect through one conduitd, no root needed (net_ring port): two
# conduit-cm-echo clients of the same daemon connect as an rdma_cm peer would
# (CONDUIT_CM_RDMA_CM: REQ/REP/RTU/DREQ/DREP as 256-byte CM MADs, the codec of
# daemon/cm/ib_cm_mad.cc, looped back inside the engine), exchange messages
# and disconnect; a connect to a port nobody listens on is refused with the
# IB reason mapped to "no listener". The wire path (GSI packets on the RoCE
# port) is covered by the rxe interop test (tests/interop/rdma_cm_test.sh).
# conduit-rping against itself then runs rping's exchange (SENDs, RDMA READ and
# WRITE) over such a connection, with its data validated.
# usage: conduitd_ib_cm_test.sh CONDUITD CONDUITCTL CM_ECHO RPING
conduitd=$1 conduitctl=$2 echo_tool=$3 rping=$4
. "$(dirname "$0")/common.sh"
daemon_start ibcm
stat() { "$conduitctl" --socket "$sock" stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

port=$((20000 + RANDOM % 20000))
timeout 60 "$echo_tool" -S "$sock" -p "$port" -n 20 -s 4096 -c -W 20 >"$dir/server.out" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q listening "$dir/server.out" && break; sleep 0.05; done
timeout 60 "$echo_tool" -S "$sock" -p "$port" -n 20 -s 4096 -c -W 20 "$addr" >"$dir/client.out" 2>&1 ||
  { cat "$dir/client.out" "$dir/server.out"; fail "the rdma_cm client failed"; }
wait "$server" || { cat "$dir/server.out"; fail "the server failed"; }
cat "$dir/server.out" "$dir/client.out"
grep -q "request from $addr qpn [0-9]* (rdma_cm)" "$dir/server.out" ||
  fail "the server did not see an rdma_cm request"
grep -q "(IB CM)" "$dir/client.out" || fail "the client's connection is not an IB CM one"
grep -q "20 messages of 4096 bytes each way" "$dir/client.out" || fail "client: no result"
grep -q "20 messages of 4096 bytes each way" "$dir/server.out" || fail "server: no result"
# REQ, REP, RTU, DREQ, DREP: all MADs, all parsed.
(($(stat cm.established) == 2)) || fail "cm.established is $(stat cm.established), not 2"
(($(stat cm.rx_malformed) == 0)) || fail "cm.rx_malformed counted $(stat cm.rx_malformed)"
(($(stat cm.local_datagrams) >= 5)) || fail "fewer than 5 CM messages went through"

# Nobody listens: the REJ (invalid service id) reaches the client as "no listener".
out=$(timeout 30 "$echo_tool" -S "$sock" -p $((port + 1)) -W 10 "$addr" 2>&1) &&
  fail "a connect to a port nobody listens on succeeded"
echo "$out"
[[ $out == *"no listener"* || $out == *"nobody listens"* ]] || fail "no 'no listener' reason: $out"

# rping's exchange, both ends conduit-rping: READ of the client's source, WRITE to its sink.
rport=$((port + 2))
timeout 60 "$rping" --socket "$sock" -s -p "$rport" -S 4000 >"$dir/rping-s.out" 2>&1 &
rserver=$!
for _ in $(seq 100); do grep -q listening "$dir/rping-s.out" && break; sleep 0.05; done
timeout 60 "$rping" --socket "$sock" -c -a "$addr" -p "$rport" -S 4000 -C 25 -V -v \
  >"$dir/rping-c.out" 2>&1 || { cat "$dir/rping-c.out" "$dir/rping-s.out"; fail "conduit-rping client failed"; }
wait "$rserver" || { cat "$dir/rping-s.out"; fail "conduit-rping server failed"; }
tail -qn 1 "$dir/rping-c.out" "$dir/rping-s.out"
grep -q "25 pings of 4000 bytes, every one validated" "$dir/rping-c.out" || fail "rping client: no result"
grep -q "served 25 pings of 4000 bytes" "$dir/rping-s.out" || fail "rping server: no result"
grep -q "^ping data: rdma-ping-24: " "$dir/rping-c.out" || fail "rping client printed no data"
echo "PASS: rdma_cm-style connections through the IB CM codec, rejection mapped, rping's exchange"
