#!/usr/bin/env bash
# Only the engine thread is pinned to the policy's lcore (daemon.lcores: [0]): conduitd's
# main and control threads keep the CPUs it was started with. rte_eal_init pins the thread
# that calls it to the main lcore, and the threads started after it inherited that pin, so
# the control thread shared one core with the polling engine. No root: a net_ring port.
# Skipped (77) when this test may run on one CPU only.
# usage: conduitd_affinity_test.sh CONDUITD
conduitd=$1
. "$(dirname "$0")/common.sh"
cpus_of() { awk '$1 == "Cpus_allowed_list:" {print $2}' "$1/status"; }
ours=$(cpus_of /proc/$$)
if [[ $ours == 0 || $ours =~ ^[0-9]+$ ]]; then
  echo "SKIP: this test may use CPU $ours only"
  exit 77
fi
daemon_start af
engine=
for _ in $(seq 100); do
  for t in /proc/"$pid"/task/*; do
    [[ $(cat "$t/comm" 2>/dev/null) == conduit-engine ]] && engine=$t
  done
  [[ -n $engine ]] && break
  sleep 0.05
done
[[ -n $engine ]] || fail "no conduit-engine thread"
[[ $(cpus_of "$engine") == 0 ]] || fail "the engine thread may run on $(cpus_of "$engine"), not lcore 0"
n=0
for t in /proc/"$pid"/task/*; do
  [[ $(cat "$t/comm") == conduitd ]] || continue  # main and the control thread
  n=$((n + 1))
  c=$(cpus_of "$t")
  echo "thread ${t##*/} (conduitd): CPUs $c"
  [[ $c == "$ours" ]] || fail "thread ${t##*/} is pinned to CPUs $c; conduitd was started on $ours"
done
((n >= 2)) || fail "expected the main and the control thread, found $n"
echo "engine thread: CPUs $(cpus_of "$engine"); started on $ours"
kill -TERM "$pid"
wait "$pid" || fail "conduitd exit status $?"
pid=
echo "OK"
