#!/usr/bin/env bash
# scripts/setup-hugepages, then conduitd on hugepages (EAL without --no-huge, hugetlbfs at the
# script's mount point) carrying libconduit's hello_send through its engine:
#   - the script reserves the pages and mounts hugetlbfs; --status shows them;
#   - conduitd starts, and while it runs the pool has at least DPDK's -m 128 fewer free pages;
#     hello_send then attaches (its region may also come from the pool) and gets its SEND;
#   - after SIGTERM every page is free again; --release returns the pool to its former size.
# Root only (exit 77 otherwise). The host's former reservation and mounts are restored on exit.
#
#   hugepages_test.sh BUILD_DIR
set -euo pipefail
src=${CONDUIT_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${1:-$src/build}
conduitd=$build/daemon/conduitd
hello=$build/lib/examples/hello_send
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (reserves hugepages, mounts hugetlbfs)"
  exit 77
fi
for b in "$conduitd" "$hello"; do
  [[ -x $b ]] || { echo "SKIP: $b not built (needs the daemon shell)"; exit 77; }
done
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
[[ -d $pool ]] || { echo "SKIP: no 2 MiB hugepage pool on this kernel"; exit 77; }

setup=$src/scripts/setup-hugepages
before=$(cat "$pool/nr_hugepages")
dir=$(mktemp -d /tmp/cdthuge.XXXXXX)
mnt=$dir/huge
pid=
cleanup() {
  local rc=$?
  if [[ -n $pid ]]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if grep -q " $mnt hugetlbfs " /proc/mounts; then umount "$mnt" || true; fi
  echo "$before" >"$pool/nr_hugepages"
  if [[ $rc -ne 0 && -s $dir/log ]]; then
    echo "--- conduitd log"
    cat "$dir/log"
  fi
  rm -rf "$dir"
  return "$rc"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
free_pages() { cat "$pool/free_hugepages"; }

# Usage errors are reported, not acted on.
if "$setup" --pages lots 2>"$dir/err"; then fail "--pages lots was accepted"; fi
grep -q "whole number" "$dir/err" || fail "no clear error for --pages lots: $(cat "$dir/err")"

want=$((before + 192))
"$setup" --pages "$want" --mount "$mnt" || fail "setup-hugepages failed"
got=$(cat "$pool/nr_hugepages")
((got > before)) || fail "no pages reserved ($got, before $before)"
grep -q " $mnt hugetlbfs " /proc/mounts || fail "hugetlbfs not mounted at $mnt"
"$setup" --status | grep -q "hugetlbfs mounted at $mnt" || fail "--status does not show $mnt"
free0=$(free_pages)
echo "reserved: $got pages, $free0 free"

cat >"$dir/c.yaml" <<YAML
daemon:
  control_socket: $dir/conduitd.sock
  lcores: [0]
port:
  device: net_ring_hp$((RANDOM % 1000))
  eal_args: [--huge-dir, $mnt, -m, "128", --no-pci, --no-shconf, --no-telemetry, --file-prefix=hp$$]
  address: 198.18.7.1/24
YAML
"$conduitd" --config "$dir/c.yaml" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $dir/conduitd.sock ]] && break; sleep 0.1; done
[[ -S $dir/conduitd.sock ]] || fail "conduitd did not open its socket"
running_free=$(free_pages)
echo "conduitd running: $running_free pages free (DPDK -m 128 = 64 pages)"
((running_free <= free0 - 64)) || fail "conduitd does not use the hugepages ($running_free of $free0 free)"
out=$(CONDUIT_SOCKET=$dir/conduitd.sock timeout 30 "$hello") || fail "hello_send failed: $out"
echo "$out"
[[ $out == *"received: hello, conduit"* ]] || fail "hello_send did not get its message"

# A hostile client punches a hole into its hugetlb region, empties the pool and makes the
# engine read the hole: conduitd must survive (SIGBUS guard), disconnect that client only,
# count the fault, and keep serving others.
hole=$build/tests/integration/hugetlb_hole_client
hrc=0
CONDUIT_SOCKET=$dir/conduitd.sock timeout 30 "$hole" >"$dir/hole.out" 2>&1 || hrc=$?
cat "$dir/hole.out"
if [[ $hrc -eq 2 ]]; then
  echo "note: no hugetlb-backed client region here; the hole-punching client was not run"
else
  [[ $hrc -eq 0 ]] || fail "the hole-punching client was not disconnected (exit $hrc)"
  kill -0 "$pid" 2>/dev/null || fail "conduitd died after a client punched a hole in its region"
  grep -q "its region faulted" "$dir/log" || fail "no disconnect for the faulted region in the log"
  faults=$("$build/tools/conduitctl/conduitctl" --socket "$dir/conduitd.sock" stats --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("control.region_sigbus_faults", 0))' ||
    echo "?")
  echo "control.region_sigbus_faults = $faults"
  [[ $faults =~ ^[1-9][0-9]*$ ]] || fail "the fault was not counted (control.region_sigbus_faults=$faults)"
  out=$(CONDUIT_SOCKET=$dir/conduitd.sock timeout 30 "$hello") || fail "hello_send after the hostile client failed: $out"
  [[ $out == *"received: hello, conduit"* ]] || fail "hello_send after the hostile client got no message"
fi
kill -TERM "$pid"
wait "$pid" && rc=0 || rc=$?
pid=
[[ $rc -eq 0 ]] || fail "conduitd exit status $rc"
grep -q 'conduitd stopped' "$dir/log" || fail "no clean stop in the log"
# DPDK's own files live in the mount; with --no-shconf the pages must all come back.
rm -f "$mnt"/* 2>/dev/null || true
after_free=$(free_pages)
((after_free == free0)) || fail "pages not returned after the stop ($after_free free, $free0 before)"

"$setup" --release --mount "$mnt" || fail "--release failed"
grep -q " $mnt hugetlbfs " /proc/mounts && fail "--release left $mnt mounted"
echo "OK: $((got - before)) pages reserved, conduitd used $((free0 - running_free)), all returned"
