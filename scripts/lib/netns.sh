# shellcheck shell=bash
# netns.sh: test hosts as network namespaces, for integration and interop tests. Source it:
#
#   . scripts/lib/netns.sh
#   netns_init                      # unique prefix per run, cleanup trap on EXIT INT TERM
#   netns_dumbbell 1gbit            # s1, s2 -> r (tbf 1gbit on r's egress to d) -> d
#   netns_exec d iperf3 -s -1 &     # run a command in host d (bounded by the caller)
#   ...                             # namespaces and processes go away on exit, also on failure
#
# Hosts are named by short logical names (s1, r, d, ...); the real namespace name is
# "$NETNS_PREFIX<name>" (netns_name NAME prints it). Addresses come only from 198.18.0.0/15.
# Every function returns non-zero on failure; netns_cleanup is idempotent.
# Bash runs a trap only after the current foreground command returns: wait for long commands
# with "CMD & wait $!" (wait is interrupted by signals) so INT/TERM clean up at once.
#
# Functions:
#   netns_init [PREFIX]                  prefix (default cdt<PID>-), trap EXIT/INT/TERM
#   netns_add NAME...                    create hosts (lo up)
#   netns_name NAME                      the namespace's real name
#   netns_exec NAME CMD...               run CMD inside host NAME
#   netns_link A IFA ADDR_A B IFB ADDR_B  veth pair A:IFA <-> B:IFB with CIDR addresses ("" = none)
#   netns_route NAME DEST VIA            add a route (DEST may be "default")
#   netns_forward NAME                   enable IPv4 forwarding in NAME
#   netns_tbf NAME IF RATE [BURST [LATENCY]]  shape IF's egress with tbf
#   netns_pair [MTU]                     hosts a (198.18.0.1/24, if eth0) and b (198.18.0.2/24, eth0)
#   netns_dumbbell [RATE]                s1 198.18.1.1, s2 198.18.2.1 -> r -> d 198.18.3.1;
#                                        r's interface to d is "tod" (tbf RATE, default 1gbit)
#   netns_pids NAME                      PIDs running in host NAME
#   netns_list                           namespaces of this run
#   netns_cleanup                        kill processes, delete this run's namespaces
#   netns_require_root                   exit 77 with a reason when not root or tools missing

NETNS_PREFIX=${NETNS_PREFIX:-}
NETNS_STATE=${NETNS_STATE:-}

netns_require_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: needs root (creates network namespaces)"
    exit 77
  fi
  local t
  for t in ip tc "$@"; do
    if ! command -v "$t" >/dev/null 2>&1; then
      echo "SKIP: tool '$t' not found (scripts/bootstrap installs it)"
      exit 77
    fi
  done
}

netns_init() {
  NETNS_PREFIX=${1:-cdt$$-}
  # A state file survives subshells (e.g. "$(netns_add x)") where a variable would not.
  NETNS_STATE=$(mktemp "/tmp/netns.${NETNS_PREFIX%-}.XXXXXX")
  export NETNS_PREFIX NETNS_STATE
  trap 'netns_cleanup' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

netns_name() { printf '%s%s\n' "$NETNS_PREFIX" "$1"; }

netns_add() {
  [[ -n $NETNS_PREFIX ]] || { echo "netns_add: call netns_init first" >&2; return 1; }
  local n full
  for n in "$@"; do
    full=$(netns_name "$n")
    # Record before creating so an interrupt between the two still cleans it up.
    echo "$full" >>"$NETNS_STATE"
    ip netns add "$full" || return 1
    ip -n "$full" link set lo up || return 1
  done
}

netns_exec() {
  local n=$1; shift
  ip netns exec "$(netns_name "$n")" "$@"
}

netns_link() {
  local a=$1 ifa=$2 addr_a=$3 b=$4 ifb=$5 addr_b=$6
  local na nb
  na=$(netns_name "$a"); nb=$(netns_name "$b")
  # Created directly inside the namespaces: no name can collide in the root namespace.
  ip link add name "$ifa" netns "$na" type veth peer name "$ifb" netns "$nb" || return 1
  [[ -z $addr_a ]] || ip -n "$na" addr add "$addr_a" dev "$ifa" || return 1
  [[ -z $addr_b ]] || ip -n "$nb" addr add "$addr_b" dev "$ifb" || return 1
  ip -n "$na" link set "$ifa" up && ip -n "$nb" link set "$ifb" up
}

netns_route() { ip -n "$(netns_name "$1")" route add "$2" via "$3"; }

netns_forward() { netns_exec "$1" sysctl -qw net.ipv4.ip_forward=1; }

# tbf: BURST defaults to 1 ms worth of bytes at RATE (min 16 KiB) so that 1 Gbit/s shapes
# smoothly; LATENCY bounds the queue (default 10 ms).
netns_tbf() {
  local n=$1 dev=$2 rate=$3 burst=${4:-} latency=${5:-10ms}
  if [[ -z $burst ]]; then
    local bps
    bps=$(netns_rate_bps "$rate") || return 1
    burst=$((bps / 8 / 1000))
    ((burst >= 16384)) || burst=16384
  fi
  ip netns exec "$(netns_name "$n")" tc qdisc replace dev "$dev" root tbf rate "$rate" \
    burst "$burst" latency "$latency"
}

# netns_rate_bps RATE: "1gbit" -> 1000000000 (tc's decimal units: kbit, mbit, gbit, bit).
netns_rate_bps() {
  local r=${1,,}
  case $r in
    *gbit) echo $((${r%gbit} * 1000000000)) ;;
    *mbit) echo $((${r%mbit} * 1000000)) ;;
    *kbit) echo $((${r%kbit} * 1000)) ;;
    *bit) echo "${r%bit}" ;;
    *) echo "netns_rate_bps: unknown rate $1" >&2; return 1 ;;
  esac
}

netns_pair() {
  local mtu=${1:-1500}
  netns_add a b || return 1
  netns_link a eth0 198.18.0.1/24 b eth0 198.18.0.2/24 || return 1
  ip -n "$(netns_name a)" link set eth0 mtu "$mtu" && ip -n "$(netns_name b)" link set eth0 mtu "$mtu"
}

# Dumbbell: two senders and one receiver around a router whose egress to the receiver is the
# bottleneck (tbf). Subnets: 198.18.1.0/24 (s1), 198.18.2.0/24 (s2), 198.18.3.0/24 (d);
# the router is .254 on each.
netns_dumbbell() {
  local rate=${1:-1gbit}
  netns_add s1 s2 r d || return 1
  netns_link s1 eth0 198.18.1.1/24 r tos1 198.18.1.254/24 || return 1
  netns_link s2 eth0 198.18.2.1/24 r tos2 198.18.2.254/24 || return 1
  netns_link d eth0 198.18.3.1/24 r tod 198.18.3.254/24 || return 1
  netns_forward r || return 1
  netns_route s1 default 198.18.1.254 || return 1
  netns_route s2 default 198.18.2.254 || return 1
  netns_route d default 198.18.3.254 || return 1
  netns_tbf r tod "$rate"
}

netns_pids() { ip netns pids "$(netns_name "$1")" 2>/dev/null; }

netns_list() {
  [[ -n $NETNS_PREFIX ]] || return 0
  ip netns list 2>/dev/null | awk -v p="$NETNS_PREFIX" 'index($1, p) == 1 {print $1}'
}

netns_cleanup() {
  local rc=$?
  [[ -n $NETNS_PREFIX ]] || return "$rc"
  local all n pids i
  # Both sources: the state file (namespaces being created) and the live list (by prefix).
  all=$({ [[ -f $NETNS_STATE ]] && cat "$NETNS_STATE"; netns_list; } | sort -u)
  for n in $all; do
    pids=$(ip netns pids "$n" 2>/dev/null) || continue
    [[ -z $pids ]] || kill $pids 2>/dev/null || true
  done
  for n in $all; do
    for i in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$n" 2>/dev/null) || break
      [[ -n $pids ]] || break
      if [[ $i == 10 ]]; then kill -9 $pids 2>/dev/null || true; else sleep 0.1; fi
    done
    ip netns del "$n" 2>/dev/null || true
  done
  [[ -z $NETNS_STATE ]] || rm -f "$NETNS_STATE"
  return "$rc"
}
