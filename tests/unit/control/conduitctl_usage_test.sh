#!/usr/bin/env bash
# conduitctl's command line without a daemon: usage mistakes exit 2 and say what
# is wrong; sockets that cannot be a conduitd's are named as such (exit 1).
# usage: conduitctl_usage_test.sh CONDUITCTL
set -u
ctl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
expect() {  # expect STATUS TEXT ARGS...
  local want_rc=$1 want=$2; shift 2
  local out rc=0
  out=$("$ctl" "$@" 2>&1) || rc=$?
  if [[ $rc -ne $want_rc || $out != *"$want"* ]]; then
    echo "FAIL: conduitctl $*: status $rc, output:"
    echo "$out" | sed 's/^/    /'
    echo "  wanted status $want_rc and '$want'"
    fails=$((fails + 1))
  fi
}
expect 0 "conduitctl 0." --version
expect 0 "Commands:" --help
expect 0 "DCQCN rate (bit/s)" --help
expect 0 "clients, QPs and the policy file" --help
expect 2 "no command given"
expect 2 "unknown command 'frob'" frob
expect 2 "policy takes 'show' or 'reload'" policy
expect 2 "unknown command 'policy frob'" policy frob
expect 2 "--json applies to 'qps' and 'stats' only" status --json
expect 2 "--socket needs a PATH" status --socket
expect 2 "unknown option '--frob'" --frob status
# A usage mistake is one line on stderr, with where to look, and nothing on stdout.
one_line() {  # one_line ARGS...
  local out err rc=0
  out=$("$ctl" "$@" 2>"$dir/err") || rc=$?
  err=$(<"$dir/err")
  if [[ $rc -ne 2 || -n $out || $(wc -l <"$dir/err") -ne 1 || $err != *"conduitctl --help"* ]]; then
    echo "FAIL: conduitctl $*: status $rc, stdout '$out', stderr:"
    echo "$err" | sed 's/^/    /'
    echo "  wanted status 2, nothing on stdout, one line naming 'conduitctl --help' on stderr"
    fails=$((fails + 1))
  fi
}
one_line
one_line frob
one_line policy
one_line status --json
one_line --frob status
one_line status --socket
# Output that cannot be written (a full disk under `conduitctl stats --json > f`) is an
# error, not a silent exit 0 with the output cut short.
if [[ -w /dev/full ]]; then
  rc=0
  "$ctl" --help >/dev/full 2>"$dir/err" || rc=$?
  if [[ $rc -ne 1 || $(<"$dir/err") != *"writing the output"* ]]; then
    echo "FAIL: conduitctl --help >/dev/full: status $rc, stderr:"
    sed 's/^/    /' "$dir/err"
    echo "  wanted status 1 and 'writing the output'"
    fails=$((fails + 1))
  fi
fi
touch "$dir/file"
expect 1 "$dir/file is not a socket" --socket "$dir/file" status
expect 1 "there is no socket at $dir/none.sock" --socket "$dir/none.sock" status
expect 1 "a part of $dir/file/x.sock is not a directory" --socket "$dir/file/x.sock" status
# A socket file nobody listens on any more (a daemon that was killed).
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind(sys.argv[1])' \
  "$dir/stale.sock"
expect 1 "nothing listens on $dir/stale.sock" --socket="$dir/stale.sock" qps
[[ $fails -eq 0 ]] || exit 1
echo OK
