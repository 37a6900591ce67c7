#!/usr/bin/env bash
# netns.sh leaves nothing behind: a script that builds a dumbbell, starts a process in a host
# and then fails, is terminated (SIGTERM) or interrupted (SIGINT) ends with no namespace of its
# run and no process left; calling netns_cleanup twice is harmless.
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root
py=/usr/bin/python3
lib=$src/scripts/lib/netns.sh
work=$(mktemp -d /tmp/nscleanup.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The child script: dumbbell, a sleeper inside host d, "ready" file, then the given ending.
cat >"$work/child.sh" <<CHILD
set -euo pipefail
. "$lib"
netns_init "\$1"
netns_dumbbell 100mbit
netns_exec d sleep 300 &
echo \$! >"$work/sleeper"
touch "$work/ready"
# The parent counts the namespaces, then lets the ending happen.
for _ in \$(seq 200); do [[ -f "$work/go" ]] && break; sleep 0.05; done
case \$2 in
  fail) false ;;
  wait) sleep 60 & wait \$! ;;
esac
CHILD

# run_case ENDING SIGNAL: runs the child (signals reset to default: bash ignores SIGINT in
# background jobs), signals it when ready, then checks what is left.
run_case() {
  local ending=$1 sig=$2 prefix=cdtc$$${1:0:1}${2:0:1}-
  rm -f "$work/ready" "$work/sleeper" "$work/go"
  "$py" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp("bash", ["bash"] + sys.argv[1:])' "$work/child.sh" "$prefix" "$ending" &
  local pid=$!
  for _ in $(seq 100); do [[ -f $work/ready ]] && break; sleep 0.1; done
  [[ -f $work/ready ]] || fail "$ending: child never got ready"
  [[ $(ip netns list | grep -c "^$prefix") -eq 4 ]] || fail "$ending: expected 4 namespaces"
  touch "$work/go"
  [[ $sig == none ]] || kill -s "$sig" "$pid"
  local rc=0
  timeout 20 tail --pid="$pid" -f /dev/null || fail "$ending: child did not exit"
  wait "$pid" || rc=$?
  local left sleeper
  left=$(ip netns list | grep -c "^$prefix" || true)
  sleeper=$(cat "$work/sleeper")
  echo "$ending/$sig: child exit $rc, namespaces left $left"
  [[ $rc -ne 0 ]] || fail "$ending/$sig: child should have failed"
  [[ $left -eq 0 ]] || fail "$ending/$sig: $left namespaces left: $(ip netns list | grep "^$prefix")"
  ! kill -0 "$sleeper" 2>/dev/null || fail "$ending/$sig: process $sleeper still running"
}

run_case fail none
run_case wait TERM
run_case wait INT

echo "idempotent cleanup"
(
  netns_init "cdtc$$i-"
  netns_pair
  netns_cleanup
  netns_cleanup
  [[ -z $(netns_list) ]] || fail "namespaces left after netns_cleanup"
) || fail "double cleanup failed"
echo "PASS"
