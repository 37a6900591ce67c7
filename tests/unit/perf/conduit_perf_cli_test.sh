#!/usr/bin/env bash
# conduit-perf's command line without a daemon: --help and --version on stdout (status 0);
# usage mistakes one line on stderr, nothing on stdout, status 2 (with --perftest 1, and -h and
# -V 1 too, as perftest 4.5's binaries exit); and a side whose conduitd
# is not there says so at once, naming the socket, instead of first waiting for its peer.
# usage: conduit_perf_cli_test.sh CONDUIT_PERF
set -u
perf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# expect STATUS STDOUT_TEXT STDERR_TEXT ARGS...; an empty STDOUT_TEXT means nothing on stdout.
expect() {
  local want_rc=$1 want_out=$2 want_err=$3; shift 3
  local out err rc=0
  out=$(timeout 20 "$perf" "$@" 2>"$dir/err") || rc=$?
  err=$(<"$dir/err")
  if [[ $rc -ne $want_rc || $err != *"$want_err"* ]] ||
    { [[ -z $want_out ]] && [[ -n $out ]]; } || [[ $out != *"$want_out"* ]]; then
    echo "FAIL: conduit-perf $*: status $rc, stdout '${out:0:200}', stderr '$err'"
    echo "  wanted status $want_rc, stdout with '$want_out', stderr with '$want_err'"
    fails=$((fails + 1))
  fi
}
usage() {  # usage TEXT ARGS...: status 2 (--perftest: 1), one line on stderr, nothing on stdout
  local want=$1 rc=2; shift
  [[ " $* " == *" --perftest "* ]] && rc=1
  expect "$rc" "" "$want" "$@"
  if [[ $(wc -l <"$dir/err") -ne 1 ]]; then
    echo "FAIL: conduit-perf $*: $(wc -l <"$dir/err") lines on stderr, wanted one"
    fails=$((fails + 1))
  fi
}
expect 0 "#bytes #iterations" "" --help
expect 0 "conduit-perf" "" --version
expect 1 "#bytes #iterations" "" send_bw --perftest -h
expect 1 "conduit-perf" "" --perftest --version
usage "name a test" -s 64
usage "unknown test 'frob'" frob
usage "unknown option '--frob'" send_bw --frob
usage "option -s: '12x' is not a size" send_bw -s 12x
usage "option -s: '99999999999999999999' is not a size" send_bw -s 99999999999999999999
usage "option -s: '-5' is not a size" send_bw -s -5
usage "option -s: '2G' is not a size" send_bw -s 2G
usage "option -n: '0' is not a number from 1" send_bw -n 0
usage "option -D: '0' is not a number from 1" send_bw -D 0
usage "option -q: '0' is not a number from 1 to 4096" send_bw -q 0
usage "exclude each other" send_bw -a -s 64
usage "--perftest needs -x ADDR" send_bw --perftest
# perftest's own options: refused with the reason where they matter.
usage "option -c UC: conduit runs RC QPs only" send_bw -c UC
usage "a conduitd drives one port (-i 1)" send_bw -i 2
usage "looks like perftest's GID index" send_bw --perftest -x 3
# perftest's -S SL, -T TOS and -W counters are not taken as our socket, class and timeout.
usage "option -S 3: looks like perftest's service level" send_bw -S 3 --perftest -x 198.18.0.1
usage "option -T 106: looks like perftest's type of service" write_bw --perftest -x 1.2.3.4 -T 106
usage "looks like perftest's -W (--report-counters)" send_bw -W counters/port_xmit_data
# No conduitd behind the socket: both roles fail at once (-W 5: a server would otherwise wait
# 20 s for a client first), naming the socket and what to do.
port=$((20000 + RANDOM % 20000))
for role in server client; do
  args=(send_bw -S "$dir/none.sock" -W 5 -p "$port")
  [[ $role == client ]] && args+=(127.0.0.1)
  start=$SECONDS
  expect 1 "" "there is no socket at $dir/none.sock" "${args[@]}"
  if ((SECONDS - start > 3)); then
    echo "FAIL: conduit-perf ($role) took $((SECONDS - start)) s to say conduitd is missing"
    fails=$((fails + 1))
  fi
  expect 1 "" "there is no socket at $dir/none.sock" "${args[@]}" --perftest -x 198.18.0.1
done
# A perftest command line runs: -i 1, -F, -c RC and --report_gbits taken; -d said to be ignored
# (a note on stderr before anything else), then the missing conduitd as above.
args=(write_bw -S "$dir/none.sock" -W 5 -p "$port" --perftest -x 198.18.0.1 -d mlx5_0 -i 1 -F
  --report_gbits -c RC)
expect 1 "" "conduit-perf: note: option -d mlx5_0 ignored" "${args[@]}"
expect 1 "" "there is no socket at $dir/none.sock" "${args[@]}"
if [[ $(head -c 100 "$dir/err") != "conduit-perf: note: option -d mlx5_0 ignored"* ]]; then
  echo "FAIL: the -d note does not come first: $(<"$dir/err")"
  fails=$((fails + 1))
fi
[[ $fails -eq 0 ]] || exit 1
echo OK
