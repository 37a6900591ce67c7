#!/usr/bin/env bash
# Two conduitd over a veth pair (af_packet) connecting QPs through the native connection
# manager (daemon/cm, UDP port 4792) instead of an out-of-band QPN/PSN exchange:
#   1. listen + accept / connect: QPN, PSN, PMTU exchanged, selective repeat only when both
#      offer it, private data both ways; conduit-perf --cm --check byte-exact (SEND, WRITE,
#      READ), and 64 QPs connected through the CM (then disconnected by the processes' exit);
#   2. a service nobody listens on: the client sees ECONNREFUSED ("no listener");
#   3. a listener that rejects: the client sees the reason (refused, quota, policy);
#   4. an address where no conduitd runs: ETIMEDOUT after the CM's retries (~1.2 s);
#   5. the IB CM dialect (rdma_cm's wire protocol, GSI packets on the RoCE port) between the
#      two daemons: conduit-cm-echo (50 x 10000 B each way) and conduit-rping (20 x 60000 B,
#      READ and WRITE, validated);
#   6. the cm.* counters in conduitctl stats --json.
# Hosts a and b: data veth 198.18.0.0/24 (daemons at .11 and .12; the kernel addresses .1
# and .2 have no daemon), out-of-band TCP for conduit-perf over 198.19.0.0/24.
# Root only (exit 77 otherwise); everything is removed on exit.
#
#   daemon_cm_test.sh [BUILD_DIR] [CM_PROBE]
. "$(dirname "$0")/common.sh"
netns_require_root
daemon_test_init cm "${1:-}"
probe=${2:-$build/tests/integration/cm_probe}
[[ -x $probe ]] || { echo "SKIP: $probe not built"; exit 77; }
two_daemon_hosts cdcm
start_daemon a || fail "conduitd a did not start"
start_daemon b || fail "conduitd b did not start"

# listener HOST SERVICE ANSWER COUNT [--sr]: cm_probe listening in the background ($lpid).
# Returns once this probe printed "listening on SERVICE", which it does after conduit_listen
# returned (the daemon answers that after its engine added the listener). The previous
# listener's output goes first: the background job truncates the file only when it gets to
# run, and a loaded machine let the loop below read the last listener's "listening" line and
# connect before the new listener existed ("no listener" instead of the expected answer).
listener() {
  local h=$1 service=$2
  shift
  rm -f "$work/listener.out" "$work/listener.err"
  netns_exec "$h" timeout 40 "$probe" "$work/$h.sock" listen "$@" >"$work/listener.out" \
    2>"$work/listener.err" &
  lpid=$!
  for _ in $(seq 200); do
    grep -qx "listening on $service" "$work/listener.out" 2>/dev/null && return 0
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$work/listener.out" "$work/listener.err"
  fail "the listener in $h did not start"
}
# connect HOST ADDR SERVICE TIMEOUT_MS [--sr]: prints cm_probe's line; its status in $crc.
connect() {
  local h=$1
  shift
  crc=0
  out=$(netns_exec "$h" timeout 40 "$probe" "$work/$h.sock" connect "$@" 2>&1) || crc=$?
  echo "  $out"
}

echo "== connect + accept, selective repeat offered by both"
listener b 100 accept 1 --sr --wait-disconnect
connect a 198.18.0.12 100 5000 --sr
[[ $crc -eq 0 && $out == connected* ]] || fail "connect failed: $out"
[[ $out == *" mtu=1024 sr=1 state=3 "* ]] || fail "expected PMTU 1024, selective repeat, RTS: $out"
[[ $out == *"private=hello" ]] || fail "the accept's private data did not arrive: $out"
wait "$lpid" || fail "listener failed: $(cat "$work/listener.out" "$work/listener.err")"
grep -q 'accepted .* sr=1 private=hello' "$work/listener.out" ||
  fail "listener: $(cat "$work/listener.out")"
# The client disconnects after it connected: the listener's conduit_wait_disconnect sees it.
grep -q '^peer disconnected qpn=' "$work/listener.out" ||
  fail "the listener did not see the peer disconnect: $(cat "$work/listener.out")"
remote=$(sed -n 's/.*remote_qpn=\([0-9]*\).*/\1/p' <<<"$out")
grep -q "accepted qpn=$remote " "$work/listener.out" ||
  fail "the client's remote QPN $remote is not the listener's QP: $(cat "$work/listener.out")"

echo "== selective repeat offered by one side only: not used"
listener b 101 accept 1
connect a 198.18.0.12 101 5000 --sr
[[ $crc -eq 0 && $out == *" sr=0 "* ]] || fail "expected a connection without selective repeat: $out"
wait "$lpid" || fail "listener failed: $(cat "$work/listener.out" "$work/listener.err")"

echo "== two clients of one daemon (the CM messages never reach the wire)"
listener a 103 accept 1
connect a 198.18.0.11 103 5000
[[ $crc -eq 0 && $out == *" state=3 "* ]] || fail "connect on one host failed: $out"
wait "$lpid" || fail "listener failed: $(cat "$work/listener.out" "$work/listener.err")"

echo "== a service nobody listens on"
connect a 198.18.0.12 999 5000
[[ $crc -eq 2 && $out == "error ECONNREFUSED"* && $out == *"no listener"* ]] ||
  fail "expected ECONNREFUSED (no listener): $out"

for r in refused:ECONNREFUSED:"refused by the listening application" \
  quota:EDQUOT:"quota" policy:EPERM:"policy"; do
  IFS=: read -r reason err text <<<"$r"
  echo "== a listener that rejects ($reason)"
  listener b 102 "reject=$reason" 1
  connect a 198.18.0.12 102 5000
  [[ $crc -eq 2 && $out == "error $err"* && $out == *"$text"* ]] ||
    fail "expected $err ($text): $out"
  wait "$lpid" || fail "listener failed: $(cat "$work/listener.out" "$work/listener.err")"
done

echo "== b's policy admits only 198.18.9.0/24 (policy reload): a's request is refused by b"
cp "$work/b.yaml" "$work/b.yaml.orig"
sed -i 's|^clients:$|clients:\n  allowed_peers: [198.18.9.0/24]|' "$work/b.yaml"
netns_exec b "$ctl" --socket "$work/b.sock" policy reload >/dev/null || fail "policy reload failed"
listener b 104 accept 1
connect a 198.18.0.12 104 5000
[[ $crc -eq 2 && $out == "error EPERM"* && $out == *"policy"* ]] ||
  fail "expected EPERM (refused by b's policy): $out"
pkill -f -- "$work/b.sock listen 104" 2>/dev/null || true  # it never got a request: stop it
wait "$lpid" 2>/dev/null || true
if grep -q 'accepted' "$work/listener.out"; then fail "the listener got a request the policy refuses"; fi
n=$(netns_exec b "$ctl" --socket "$work/b.sock" stats | awk '$1 == "control.cm_policy_rejects" {print $2}')
[[ ${n:-0} -ge 1 ]] || fail "control.cm_policy_rejects is ${n:-unset} on b"
cp "$work/b.yaml.orig" "$work/b.yaml"
netns_exec b "$ctl" --socket "$work/b.sock" policy reload >/dev/null || fail "policy reload failed"
listener b 105 accept 1
connect a 198.18.0.12 105 5000
[[ $crc -eq 0 && $out == connected* ]] || fail "connect after the policy was restored failed: $out"
wait "$lpid" || fail "listener failed: $(cat "$work/listener.out" "$work/listener.err")"

echo "== an address with no conduitd (the kernel at 198.18.0.2 answers ARP, nobody the CM)"
connect a 198.18.0.2 100 -1
[[ $crc -eq 2 && $out == "error ETIMEDOUT"* ]] || fail "expected ETIMEDOUT: $out"
ms=$(sed -n 's/.* ms=\([0-9]*\):.*/\1/p' <<<"$out")
# The budget: 6 REQs 200 ms apart (1.2 s); generous for a loaded two-core machine.
((ms < 10000)) || fail "ETIMEDOUT took ${ms} ms (budget ~1.2 s)"

echo "== conduit-perf --cm --check: SEND, WRITE, READ"
for t in send_bw write_bw read_bw; do
  perf_pair 60 "$t" --cm 7 -s 1,4096,65537,1M -n 8 --check -W 20 || fail "$t --cm failed"
  grep -q 'connected through the CM' "$work/client.out" || fail "$t did not use the CM"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 4 ]] || fail "$t: not every size checked OK"
done
echo "== selective repeat negotiated through the CM, then data: SEND and WRITE byte-exact"
for t in send_bw write_bw; do
  perf_pair 90 "$t" --cm 8 --sr -s 1,65537,1M -n 8 --check -W 20 || fail "$t --cm --sr failed"
  [[ $(grep -c 'check: OK' "$work/client.out") -eq 3 ]] || fail "$t --sr: not every size checked OK"
done

echo "== 64 QPs connected through the CM"
perf_pair 120 write_bw --cm 9 -q 64 -s 1,4096 -n 8 --check -W 30 || fail "write_bw -q 64 --cm failed"
[[ $(grep -c 'check: OK' "$work/client.out") -eq 2 ]] || fail "-q 64: not every size checked OK"

echo "== counters"
stat() {
  netns_exec "$1" "$ctl" --socket "$work/$1.sock" stats --json |
    python3 -c "import json,sys; print(json.load(sys.stdin).get('$2', -1))"
}

echo "== the IB CM (rdma_cm's protocol) between the daemons: MADs in GSI packets, then data"
cm_echo=$build/lib/examples/conduit-cm-echo rping=$build/lib/examples/conduit-rping
[[ -x $cm_echo && -x $rping ]] || fail "conduit-cm-echo / conduit-rping not built"
# ib_pair OUT_TAG SERVER_ARGS -- CLIENT_ARGS: the server on b (waits for its "listening" line),
# the client on a; both must succeed.
ib_pair() {
  local tag=$1 sargs=() cargs=() spid
  shift
  while [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  rm -f "$work/$tag-b.out"
  netns_exec b timeout 90 "${sargs[@]}" >"$work/$tag-b.out" 2>&1 &
  spid=$!
  for _ in $(seq 200); do grep -q listening "$work/$tag-b.out" 2>/dev/null && break; sleep 0.05; done
  netns_exec a timeout 90 "${cargs[@]}" >"$work/$tag-a.out" 2>&1 ||
    { cat "$work/$tag-a.out" "$work/$tag-b.out"; fail "$tag: the client on a failed"; }
  wait "$spid" || { cat "$work/$tag-b.out"; fail "$tag: the server on b failed"; }
  tail -qn 1 "$work/$tag-a.out" "$work/$tag-b.out"
}
ib_pair echo "$cm_echo" -S "$work/b.sock" -p 7471 -n 50 -s 10000 -c -W 30 -- \
  "$cm_echo" -S "$work/a.sock" -p 7471 -n 50 -s 10000 -c -W 30 198.18.0.12
grep -q "connected to 198.18.0.12 .*(IB CM)" "$work/echo-a.out" || fail "echo: not an IB CM connection"
grep -q "50 messages of 10000 bytes each way" "$work/echo-b.out" || fail "echo: b has no result"
ib_pair rping "$rping" --socket "$work/b.sock" -s -p 7174 -S 60000 -- \
  "$rping" --socket "$work/a.sock" -c -a 198.18.0.12 -p 7174 -S 60000 -C 20 -V
grep -q "20 pings of 60000 bytes, every one validated" "$work/rping-a.out" || fail "rping: no result"
for h in a b; do
  (($(stat "$h" cm.gsi_tx) >= 3 && $(stat "$h" cm.gsi_rx) >= 3)) ||
    fail "$h: cm.gsi_tx=$(stat "$h" cm.gsi_tx) cm.gsi_rx=$(stat "$h" cm.gsi_rx): no GSI traffic"
  (($(stat "$h" cm.gsi_rx_dropped) == 0)) || fail "$h: GSI packets dropped"
done

for h in a b; do
  for k in cm.established cm.rx_messages cm.tx_messages cm.local_datagrams cm.rx_malformed \
    cm.timeouts cm.rejects_sent cm.rejects_received cm.gsi_rx cm.gsi_tx; do
    printf '  %s %s=%s\n' "$h" "$k" "$(stat "$h" "$k")"
  done
done
est_a=$(stat a cm.established)
# a: 2 probe connections + 2 ends of the one-host one + 3 perf + 64 perf + 2 IB CM; b: all
# but the one-host pair.
((est_a >= 73)) || fail "a: cm.established=$est_a, expected >= 73"
((est_a == $(stat b cm.established) + 2)) || fail "a and b disagree on cm.established"
(($(stat a cm.local_datagrams) >= 3)) || fail "a: the one-host connection went elsewhere"
(($(stat b cm.rejects_sent) >= 4)) || fail "b sent fewer than 4 REJs"
(($(stat a cm.rejects_received) >= 4)) || fail "a received fewer than 4 REJs"
(($(stat a cm.timeouts) >= 1)) || fail "a counted no CM timeout"
echo "PASS"
