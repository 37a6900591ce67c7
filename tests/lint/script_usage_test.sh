#!/usr/bin/env bash
# The README's two commands explain themselves and refuse what they do not take: --help prints
# the settings and exits 0 (as any user, before any install, build or namespace), an unknown
# argument exits 2 naming it. Bounded: a script that ignored its arguments would start its job.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
check() {  # check SCRIPT WORD: --help mentions WORD; a bad argument exits 2
  local script=$1 word=$2 out rc
  out=$(timeout 10 "$top/$script" --help 2>&1 </dev/null); rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q -- "$word" <<<"$out"; then
    echo "FAIL: $script --help: exit $rc, '$word' not in its output:"; echo "$out" | head -5; fail=1
  fi
  out=$(timeout 10 "$top/$script" --no-such-option 2>&1 </dev/null); rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q -- "--no-such-option" <<<"$out"; then
    echo "FAIL: $script --no-such-option: exit $rc (want 2 and the argument named):"
    echo "$out" | head -5; fail=1
  fi
}
check scripts/demo DEMO_MTU
check scripts/test CONDUIT_FUZZ_SECONDS
[[ $fail -eq 0 ]] && echo "script usage: OK"
exit "$fail"
