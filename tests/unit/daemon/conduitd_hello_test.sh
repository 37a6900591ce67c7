#!/usr/bin/env bash
# conduitd end to end on one host, no root needed: the daemon on a net_ring
# port (EAL without hugepages), libconduit's hello_send example attaching over
# the control socket, one SEND between two QPs through the engine's loopback
# path. Then SIGTERM: the daemon must exit cleanly.
# usage: conduitd_hello_test.sh CONDUITD HELLO_SEND
set -euo pipefail
conduitd=$1 hello=$2
dir=$(mktemp -d)
pid=
cleanup() {
  if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
cat >"$dir/c.yaml" <<YAML
daemon:
  control_socket: $dir/conduitd.sock
  lcores: [0]
port:
  device: net_ring_h$((RANDOM % 1000))
  eal_args: [--no-huge, -m, "256", --no-pci, --no-shconf, --no-telemetry, --file-prefix=hello$$]
  address: 198.18.7.1/24
YAML
"$conduitd" --check-config "$dir/c.yaml"
"$conduitd" --config "$dir/c.yaml" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $dir/conduitd.sock ]] && break; sleep 0.1; done
if [[ ! -S $dir/conduitd.sock ]]; then
  cat "$dir/log"
  echo "FAIL: conduitd did not open its socket"; exit 1
fi
out=$(CONDUIT_SOCKET=$dir/conduitd.sock timeout 30 "$hello")
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
