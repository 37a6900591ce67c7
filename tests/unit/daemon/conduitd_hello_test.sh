#!/usr/bin/env bash
# conduitd end to end on one host, no root needed: the daemon on a net_ring
# port (EAL without hugepages), libconduit's hello_send example attaching over
# the control socket, one SEND between two QPs through the engine's loopback
# path. Then SIGTERM: the daemon must exit cleanly.
# usage: conduitd_hello_test.sh CONDUITD HELLO_SEND
conduitd=$1 hello=$2
. "$(dirname "$0")/common.sh"
daemon_start h
"$conduitd" --check-config "$dir/c.yaml"
# More lcores than the one engine uses: valid (exit 0), with a warning naming the idle ones.
sed 's/^  lcores: \[0\]$/  lcores: [0, 1]/' "$dir/c.yaml" >"$dir/two-lcores.yaml"
warn=$("$conduitd" --check-config "$dir/two-lcores.yaml") ||
  { echo "FAIL: two lcores rejected"; exit 1; }
[[ $warn == *"warning: daemon.lcores lists 2 lcores"*"lcore 1 stays unused"* ]] ||
  { echo "FAIL: no lcores warning: $warn"; exit 1; }
# Command-line mistakes are usage errors (status 2) that say what is wrong, not ignored.
usage() {
  local want=$1; shift
  local err rc=0
  err=$("$conduitd" "$@" 2>&1 >/dev/null) || rc=$?
  [[ $rc -eq 2 && $err == *"$want"* ]] ||
    { echo "FAIL: conduitd $*: status $rc, '$err' (wanted 2, '$want')"; exit 1; }
}
usage "unknown option '--bogus'" --check-config "$dir/c.yaml" --bogus
usage "--config needs a FILE" --config
usage "unexpected argument 'x.yaml'" x.yaml
usage "drop --config" --config "$dir/c.yaml" --check-config "$dir/c.yaml"
# A file that is not there is unreadable, not invalid.
rc=0
err=$("$conduitd" --config "$dir/missing.yaml" 2>&1) || rc=$?
[[ $rc -eq 1 && $err == *"the policy file cannot be read"*"No such file"* ]] ||
  { echo "FAIL: missing file: status $rc, '$err'"; exit 1; }
# The ring sizes the driver took are in the log (POLICY.md tells operators to look there).
grep -Eq 'RX ring [0-9]+ descriptors, TX ring [0-9]+ \(policy: 1024 / 1024\), 8191 mbufs' \
  "$dir/log" || { cat "$dir/log"; echo "FAIL: no ring sizes in the log"; exit 1; }
out=$(CONDUIT_SOCKET=$sock timeout 30 "$hello")
echo "$out"
[[ $out == *"received: hello, conduit"* ]] || { echo "FAIL: no data"; cat "$dir/log"; exit 1; }
kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "FAIL: conduitd ignored SIGTERM"; exit 1; fi
wait "$pid" && rc=0 || rc=$?
pid=
grep -q 'conduitd stopped' "$dir/log" || { cat "$dir/log"; echo "FAIL: no clean stop"; exit 1; }
[[ $rc -eq 0 ]] || { echo "FAIL: exit status $rc"; exit 1; }
echo "OK"
