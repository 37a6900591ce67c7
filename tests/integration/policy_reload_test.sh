#!/usr/bin/env bash
# A policy reload reaches a running engine with traffic in flight. Two conduitd over a veth
# pair (af_packet); a 6 s write_bw from a to b; 2 s in, a's policy file replaces the traffic
# classes (the default class "gold": DSCP 10, ECT(1), a fixed 300 Mbit/s per QP; and "bulk")
# and the CNP settings, and `conduitctl policy reload` applies it. Then:
#   - the reload's reply says the engine took it: 1 QP, moved to the new default class
#     (its own, "default", is gone), nothing waiting for a restart;
#   - tcpdump in b sees a's RoCE frames marked DSCP 26 / ECT(0) first and DSCP 10 / ECT(1)
#     from some point on, never the old marking after the new one (one QP: one FIFO);
#   - conduitctl qps on a shows the running QP in "gold", paced at its 300 Mbit/s;
#   - the write_bw finishes without error, and a QP naming the added class "bulk" can be
#     created at once (write_bw -T bulk --check);
#   - a reload whose transport.pmtu does not fit the running port.mtu is refused as a whole
#     (conduitctl exits non-zero, says why; the running policy and the engine's stay).
# Hosts a and b as in daemon_two_hosts_test.sh. Root only (exit 77 otherwise).
#
#   policy_reload_test.sh [BUILD_DIR]
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root tcpdump tshark
daemon_test_init prl "${1:-}"
tcpdump_pid=
daemon_test_on_exit() {
  [[ -z $tcpdump_pid ]] || kill "$tcpdump_pid" 2>/dev/null || true
}
two_daemon_hosts cdprl af_packet
start_daemon a || fail "conduitd a did not start"
start_daemon b || fail "conduitd b did not start"

# What b receives from a's conduitd (b's own frames bypass the taps, the peer's do not).
ip netns exec "$(netns_name b)" tcpdump -i eth0 -Q in -s 96 -B 65536 --immediate-mode -U -n \
  -w "$work/b.pcap" 'udp port 4791 and src host 198.18.0.11' 2>"$work/tcpdump.err" &
tcpdump_pid=$!
for _ in $(seq 50); do
  grep -q 'listening on' "$work/tcpdump.err" 2>/dev/null && break
  sleep 0.1
done
grep -q 'listening on' "$work/tcpdump.err" || fail "tcpdump in b did not start"

echo "== write_bw a -> b for 6 s; a's policy reloaded 2 s in"
netns_exec b timeout 60 "$perf" write_bw --socket "$work/b.sock" -x 198.18.0.12 -W 30 \
  >"$work/server.out" 2>"$work/server.err" &
spid=$!
sleep 0.3
netns_exec a timeout 60 "$perf" write_bw 198.19.0.2 -s 64K -D 6 -W 30 --socket "$work/a.sock" \
  -x 198.18.0.11 >"$work/client.out" 2>"$work/client.err" &
cpid=$!
sleep 2
kill -0 "$cpid" 2>/dev/null || fail "write_bw ended before the reload"
cp "$work/a.yaml" "$work/a-started.yaml"
cat >>"$work/a.yaml" <<'YAML'
traffic_classes:
  - name: gold
    default: true
    dscp: 10
    ecn: ect1
    congestion_control: {algorithm: fixed, rate: 300mbit}
  - name: bulk
    dscp: 12
    weight: 4
cnp:
  dscp: 40
  min_time_between_cnps: 50us
YAML
reply=$(netns_exec a "$ctl" --socket "$work/a.sock" policy reload 2>&1) ||
  fail "policy reload failed: $reply"
echo "reload: $reply"
[[ $reply == *"traffic_classes, cnp and transport applied (1 QP(s) took the new classes, 1 of them moved to the default class 'gold'"* ]] ||
  fail "the reply does not say the engine took the new classes for the running QP"
[[ $reply != *"after a restart"* ]] || fail "nothing in this reload needs a restart: $reply"
sleep 1
qps=$(netns_exec a "$ctl" --socket "$work/a.sock" qps --json) || fail "conduitctl qps failed"
/usr/bin/python3 - "$qps" <<'PY' || fail "a's running QP is not paced at the new class's rate"
import json, sys
qps = json.loads(sys.argv[1])
qps = qps["qps"] if isinstance(qps, dict) else qps
print("a's QPs:", [(q["qpn"], q["class"], q["rate_bps"]) for q in qps])
sys.exit(0 if len(qps) == 1 and qps[0]["rate_bps"] == 300_000_000 and qps[0]["class"] == "gold"
         else 1)
PY
crc=0
wait "$cpid" || crc=$?
wait "$spid" || crc=$((crc == 0 ? 1 : crc))
cat "$work/client.out"
((crc == 0)) || fail "write_bw across the reload failed (exit $crc)"

# tcpdump writes the capture behind the traffic (half a million frames), and SIGINT drops what
# it has not written yet (without --immediate-mode, a whole last block of 520 frames went that
# way in half the runs). Wait until the file stops growing (at most 20 s) before the end.
capture_settle() {
  local last=-1 size
  for _ in $(seq 40); do
    size=$(stat -c %s "$work/b.pcap")
    ((size == last)) && return 0
    last=$size
    sleep 0.5
  done
}
capture_settle

echo "== a QP in the class the reload added"
# Only a has the class: b's server QP stays in b's default class.
netns_exec b timeout 60 "$perf" write_bw -s 1,65536 -n 8 --check -W 20 --socket "$work/b.sock" \
  -x 198.18.0.12 >"$work/server.out" 2>"$work/server.err" &
spid=$!
sleep 0.3
crc=0
netns_exec a timeout 60 "$perf" write_bw 198.19.0.2 -T bulk -s 1,65536 -n 8 --check -W 20 \
  --socket "$work/a.sock" -x 198.18.0.11 >"$work/client.out" 2>"$work/client.err" || crc=$?
wait "$spid" || crc=$((crc == 0 ? 1 : crc))
cat "$work/client.out"
((crc == 0)) || fail "write_bw -T bulk failed (exit $crc)"
[[ $(grep -c 'check: OK' "$work/client.out") -eq 2 ]] || fail "write_bw -T bulk: not every size OK"

capture_settle
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
tshark -r "$work/b.pcap" -T fields -e ip.dsfield.dscp -e ip.dsfield.ecn >"$work/tos.txt" ||
  fail "tshark could not read the capture"
/usr/bin/python3 - "$work/tos.txt" <<'PY' || fail "a's frames do not carry the reloaded marking"
import sys
from collections import Counter
rows = [tuple(int(v) for v in l.split()) for l in open(sys.argv[1]) if l.strip()]
print("a's frames by (DSCP, ECN):", dict(Counter(rows)))
# The write_bw's frames: the old default class (26, ECT(0)), then gold (10, ECT(1)); the
# -T bulk run afterwards: (12, ECT(0)).
first_new = next((i for i, r in enumerate(rows) if r == (10, 1)), None)
ok = first_new is not None and first_new > 0 and rows[0] == (26, 2)
old_after = sum(1 for r in rows[first_new or 0:] if r == (26, 2))
print(f"first (10, ECT(1)) frame: #{first_new}; old-marked frames after it: {old_after}")
ok &= old_after == 0 and (12, 2) in set(rows)
sys.exit(0 if ok else 1)
PY

echo "== a reload whose pmtu does not fit the running port.mtu"
sed -e 's/^  mtu: 1500/  mtu: 9000/' -e 's/^  pmtu: 1024/  pmtu: 4096/' "$work/a-started.yaml" \
  >"$work/a.yaml"
rc=0
reply=$(netns_exec a "$ctl" --socket "$work/a.sock" policy reload 2>&1) || rc=$?
echo "reload (exit $rc): $reply"
((rc != 0)) || fail "a reload the running port cannot take must fail"
[[ $reply == *"is not applied: transport.pmtu 4096 does not fit the running port.mtu 1500"* &&
  $reply == *"the running policy stays"* ]] ||
  fail "the reply must say why the reload is refused and that the running policy stays"
shown=$(netns_exec a "$ctl" --socket "$work/a.sock" policy show) || fail "policy show failed"
[[ $shown == *"name: gold"* && $shown != *"pmtu: 4096"* ]] ||
  fail "a refused reload replaced the running policy"
stats=$(netns_exec a "$ctl" --socket "$work/a.sock" stats --json) || fail "conduitctl stats failed"
/usr/bin/python3 - "$stats" <<'PY' || fail "engine.policy_updates must count exactly the one update"
import json, sys
n = json.loads(sys.argv[1]).get("engine.policy_updates")
print("engine.policy_updates:", n)
sys.exit(0 if n == 1 else 1)
PY
echo "PASS"
