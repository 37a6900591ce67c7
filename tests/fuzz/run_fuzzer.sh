#!/usr/bin/env bash
# run_fuzzer.sh EXE SEED_DIR [extra libFuzzer args]: time-bounded libFuzzer run.
# New inputs go to a scratch corpus, never into the source tree.
set -euo pipefail
exe=$1; seeds=$2; shift 2
secs=${CONDUIT_FUZZ_SECONDS:-45}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -rss_limit_mb guards against runaway allocations; leaks fail the run (ASan).
# -error_exitcode=1: libFuzzer's default for a crash is 77, which meson counts as a skip.
"$exe" "$work" "$seeds" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
  -timeout=10 -error_exitcode=1 "$@" 2>&1 | tail -n 80
exit "${PIPESTATUS[0]}"
