#!/usr/bin/env bash
# conduitd's command line, without starting a daemon: --help and --version, --config and
# --check-config in both spellings (FILE as the next argument or after '='), and usage
# mistakes: one line on stderr naming the argument and 'conduitd --help', status 2, nothing
# on stdout.
# usage: conduitd_usage_test.sh CONDUITD POLICY_FILE
set -u
conduitd=$1 policy=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
expect() {  # expect STATUS STDOUT_TEXT STDERR_TEXT ARGS...
  local want_rc=$1 want_out=$2 want_err=$3; shift 3
  local out err rc=0
  out=$("$conduitd" "$@" 2>"$dir/err") || rc=$?
  err=$(<"$dir/err")
  if [[ $rc -ne $want_rc || $out != *"$want_out"* || $err != *"$want_err"* ]]; then
    echo "FAIL: conduitd $*: status $rc, stdout '$out', stderr '$err'"
    echo "  wanted status $want_rc, stdout with '$want_out', stderr with '$want_err'"
    fails=$((fails + 1))
  fi
}
usage() {  # usage TEXT ARGS...: a one-line usage error
  local want=$1; shift
  expect 2 "" "$want" "$@"
  local out rc=0
  out=$("$conduitd" "$@" 2>"$dir/err") || rc=$?
  if [[ -n $out || $(wc -l <"$dir/err") -ne 1 || $(<"$dir/err") != *"(see conduitd --help)"* ]]; then
    echo "FAIL: conduitd $*: not one line on stderr with the hint, or output on stdout"
    fails=$((fails + 1))
  fi
}
expect 0 "--check-config FILE" "" --help
expect 0 "conduitd 0." "" --version
expect 0 "OK" "" --check-config "$policy"
expect 0 "OK" "" --check-config="$policy"
usage "unknown option '--bogus'" --bogus
usage "--config needs a FILE" --config
usage "--config needs a FILE" --config=
usage "--check-config needs a FILE" --check-config=
usage "unexpected argument 'x.yaml'" x.yaml
usage "--config is given twice" --config=a.yaml --config b.yaml
# Both spellings reach the same check: neither starts a daemon here.
usage "drop --config" --config "$policy" --check-config "$policy"
usage "drop --config" --config="$policy" --check-config="$policy"
[[ $fails -eq 0 ]] || exit 1
echo OK
