#!/usr/bin/env bash
# DCQCN end to end on a three-host dumbbell (scripts/lib/netns.sh netns_dumbbell):
#
#   s1 (conduitd 198.18.1.11) --\
#                                r --tod (tbf RATE + red_ecn.o marker)--> d (conduitd 198.18.3.11)
#   s2 (conduitd 198.18.2.11) --/
#
# The daemons reach each other through the router: each has port.gateway = r's address on its
# subnet (the daemon resolves the gateway with ARP; r's kernel forwards). Two conduit-perf
# write_bw flows, s1 -> d and s2 -> d, run at once with --check. While both run, a 5 s window
# is measured from the senders' per-QP byte counters (conduitctl qps --json). Asserted:
#   - the marker CE-marks packets and d's engine counts CE-marked arrivals;
#   - d sends CNPs (engine.tx_cnps, per-QP cnps_tx) and the senders receive them (cnps_rx);
#   - both senders cut their rates below the line rate with alpha > 0 (conduitctl qps);
#   - Jain's fairness index of the two flows over the window >= 0.9;
#   - nothing lost: both transfers end with "check: OK" (byte-exact WRITE targets).
# Reported: per-flow goodput, utilization of the bottleneck, marks, the marker's queue peak,
# retransmissions.
#
#   dcqcn_dumbbell_test.sh RED_ECN_OBJ [BUILD_DIR]
# Environment:
#   DUMBBELL_RATE   tbf rate (default 100mbit; see below for 1gbit, the rate issue 6 names)
#   DUMBBELL_SECS   measured window (default 5)
#   DUMBBELL_PORT   the daemons' port kind, af_packet (default) or af_xdp
#   DUMBBELL_MTU    MTU of every dumbbell link and the daemons' ports (default 1500 below
#                   1 Gbit/s, 3500 from 1 Gbit/s up); conduit's path MTU follows as in
#                   scripts/demo (2048 from 2148 up, 4096 from 4196 up, else 1024); af_xdp takes
#                   MTUs up to ~3540 on a veth
#   DUMBBELL_LCORES the CPUs of s1's, s2's and d's engines (default "0 1 1" below 1 Gbit/s,
#                   "0 0 1" from 1 Gbit/s up; "f" = float over CPUs 0-1)
#   DUMBBELL_IDLE   the daemons' idle_mode (default adaptive)
#   DUMBBELL_IPV6   1: RoCEv2 over IPv6 through the router (RFC 5180's 2001:2::/48: the
#                   daemons own 2001:2:0:N::11/64 as port.address6; r's kernel forwards IPv6).
#                   s1 names its router in port.gateway6 (r's 2001:2:0:1::fe); s2 and d have
#                   none and learn r's link-local address from a Router Advertisement that r
#                   sends (scapy) once they run; neighbour discovery both ways. The marker sets
#                   CE in the traffic class. conduit-perf's own TCP stays IPv4
#
# meson runs it twice: integration-dcqcn-dumbbell at the default 100 Mbit/s and
# integration-dcqcn-dumbbell-1g at the issue's 1 Gbit/s (5 of 5 passed on a quiet machine,
# 2026-12-02, Jain >= 0.998, 93.9-94.8 % utilization). Why 100 Mbit/s stays the default (measured
# 2026-12-02, BENCHMARKS.md "DCQCN on a dumbbell"): the build machines and CI have 2 cores for
# three daemons, two perf clients and two perf servers, and the senders' engines poll while
# their flows are ACK-clocked (the pacer-gap sleeps of idle_mode adaptive turn themselves off
# when two engines share a core: each wake-up waits for the other's time slice), so two
# engines share a core whatever the placement.
#  - Placement decides 1 Gbit/s. With s2 and d on one core ("0 1 1") s1 has a core and s2
#    half of one: Jain 0.65-0.96 (af_xdp) and 0.68-0.75 (af_packet). With both senders on
#    CPU 0 ("0 0 1", what DUMBBELL_RATE=1gbit picks) they are symmetric: of 60 runs (af_packet
#    and af_xdp, MTU 3500 and 1500, load average 1.8-7.9, some next to a build or a busy loop
#    pinned to either core) 57 passed with Jain >= 0.998 and 27-96 % utilization.
#  - Not reliably either, though not because of the rate: the 3 failures came in one batch
#    of 10 (af_packet, load 6.8-7.5), both senders at once with "transport retry counter
#    exceeded" (8 ACK timeouts, each resending the whole 1024-packet window, none of it seen
#    by d, not even as duplicates). The same failure hit 4 runs in a row at 100 Mbit/s with
#    "0 0 1" (then 6 passes, Jain >= 0.994, 96-98 % utilization), and the default failed
#    once on Jain (0.84: s1, the sender with a core to itself, got 23 Mbit/s). Not explained;
#    the links' and tbf's counters are now printed on failure too.
#  - And it shows less of DCQCN. With the senders on one core they never send at the same
#    instant: the scheduler alternates them (4 ms ticks at HZ 250), each flow's DCQCN rate
#    settles near the bottleneck rate (lowest 0.75-0.98, mean 0.92-1.04 Gbit/s), and the even
#    split is the scheduler's. With DCQCN replaced by a fixed 5 Gbit/s rate the 1 Gbit/s run
#    loses nothing at tbf either (0 drops, its backlog <= 2 KB when sampled, 0 and 526
#    retransmissions, Jain 1.0; why the senders, which move 1.5 Gbit/s together without tbf,
#    do not overrun it is not understood): only the marker notices (95 % of packets CE-marked
#    instead of 0.1-3.6 %). At 100 Mbit/s the same control loses two thirds of the packets at
#    tbf (72,800 retransmissions and 60 ACK timeouts per sender): there the test shows DCQCN
#    preventing loss.
#  - 100 Mbit/s keeps path MTU 1024: with 2048 the queue sat at its limit, each sender
#    retransmitted 6,800-18,300 packets and one of three runs failed with retry exceeded.
# On a machine with a core per engine, DUMBBELL_RATE=1gbit DUMBBELL_LCORES="0 1 2" runs the
# flows at once (not measured here).
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root bpftool
obj=${1:-}
need_obj "$obj"
daemon_test_init db "${2:-}"

rate=${DUMBBELL_RATE:-100mbit}
rate_bps=$(netns_rate_bps "$rate")
ceiling_bps=$((5 * rate_bps))  # the senders' rpg_max_rate
secs=${DUMBBELL_SECS:-5}
port_kind=${DUMBBELL_PORT:-af_packet}
mtu=1500
((rate_bps < 1000000000)) || mtu=3500
mtu=${DUMBBELL_MTU:-$mtu}
pmtu=1024
((mtu < 2048 + 100)) || pmtu=2048
((mtu < 4096 + 100)) || pmtu=4096
lcores="0 1 1"
((rate_bps < 1000000000)) || lcores="0 0 1"
read -r lc_s1 lc_s2 lc_d <<<"${DUMBBELL_LCORES:-$lcores}"
ipv6=${DUMBBELL_IPV6:-0}
# addr_of HOST: the address conduit-perf names for HOST's daemon (its GID).
addr_of() {
  local n=${1#s}
  [[ $1 == d ]] && n=3
  if [[ $ipv6 == 1 ]]; then echo "2001:2:0:$n::11"; else echo "198.18.$n.11"; fi
}
export CONDUITD_IDLE_MODE=${DUMBBELL_IDLE:-adaptive}

# The links' kernel drop counters and the tbf queue's counters.
links_shown=0
link_counters() {
  local hi
  links_shown=1
  echo "-- kernel drop counters of the links (ip -s link: rx/tx dropped)"
  for hi in s1:eth0 s2:eth0 d:eth0 r:tos1 r:tos2 r:tod; do
    netns_exec "${hi%%:*}" ip -j -s link show "${hi#*:}" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats64"]
rx, tx = s["rx"]["dropped"], s["tx"]["dropped"]
print(f"  {sys.argv[1]:8s} rx_dropped {rx} tx_dropped {tx}")' "$hi"
  done
  echo "-- the bottleneck queue (tbf on r's tod)"
  netns_exec r tc -s qdisc show dev tod | sed -n '/tbf/,+2p'
  # A router that cannot resolve d (d's engine did not answer its ARP probes in time) drops
  # everything for d: unresolved_discards (host-wide ARP table statistics, hex per CPU).
  echo "-- r's neighbours, and the ARP table's unresolved discards (all CPUs)"
  netns_exec r ip -s neigh show
  /usr/bin/python3 -c '
rows = [l.split() for l in open("/proc/net/stat/arp_cache")]
i = rows[0].index("unresolved_discards")
print("  unresolved_discards", sum(int(r[i], 16) for r in rows[1:]))' || true
}

# On failure: the links' and tbf's counters and each daemon's non-zero counters, before
# daemon_test_cleanup stops them.
daemon_test_on_exit() {
  local rc=$1 h
  [[ $rc -ne 0 && $rc -ne 77 ]] || return 0
  [[ $links_shown == 1 ]] || link_counters 2>/dev/null || true
  for h in s1 s2 d; do
    [[ -n $(conduitd_pid "$h") ]] || continue
    echo "--- conduitctl stats in $h (non-zero)"
    timeout 5 ip netns exec "$(netns_name "$h")" "$ctl" --socket "$work/$h.sock" stats |
      awk '$2 != 0' | tr '\n' ' ' || true
    echo
  done
}

netns_dumbbell "$rate"
for hi in s1:eth0 s2:eth0 d:eth0 r:tos1 r:tos2 r:tod; do
  netns_exec "${hi%%:*}" ip link set "${hi#*:}" mtu "$mtu"
done
tcbpf_attach r tod egress "$obj"
if [[ $ipv6 == 1 ]]; then
  for l in "tos1 1" "tos2 2" "tod 3"; do
    read -r dev n <<<"$l"
    netns_exec r ip -6 addr add "2001:2:0:$n::fe/64" dev "$dev" nodad || fail "IPv6 on r/$dev"
  done
  netns_exec r sysctl -qw net.ipv6.conf.all.forwarding=1 || fail "IPv6 forwarding on r"
fi

# marker RATE: the virtual queue drains at the bottleneck rate; Kmin 10 KB, Kmax 60 KB (well
# inside tbf's queue, rate x 10 ms, which is also the virtual queue's limit), Pmax 20 %.
marker() {
  local bps=$1
  red_ecn_config r tod "$bps" 10000 60000 200000 $((bps / 8 / 100))
}

# The DCQCN knobs are mlx5's, scaled to this path. The veth reports 10 Gbit/s, but a sender
# here moves ~0.05-2 Gbit/s depending on the load: rpg_max_rate = 5 x the bottleneck keeps the
# reaction point's start and target rates near what the host can send, so that a cut bites. The path's round trip is
# milliseconds (tbf queue, af_packet, shared cores) and a flow gets a CNP every ~5-10 ms, not
# every few microseconds as mlx5's 300 us increase timer and 1 us alpha period assume: with
# those, alpha decays to ~0.01 between CNPs, each cut is ~1 %, the rate stays at the ceiling
# and tbf drops half the packets (measured). As in the DCQCN paper, the alpha period is set
# near the CNP interval (g = 1/16), the increase timer above it, and the increase steps
# shrink with the rates.
# start_daemon HOST ADDR GATEWAY LCORE
start_daemon() {
  local h=$1 addr=$2 gw=$3 lcore=$4 cfg=$work/$1.yaml
  conduitd_config "$cfg" "$work/$h.sock" "$(conduitd_vdev "$port_kind" eth0 "$mtu")" "$addr/24" \
    "$lcore" "cddb$$$h" "$mtu" "$pmtu"
  sed -i "/^  address:/a\\  gateway: $gw" "$cfg"
  if [[ $ipv6 == 1 ]]; then
    local n=${gw%.254}
    n=${n##*.}
    [[ $h == s1 ]] && sed -i "/^  gateway:/a\\  gateway6: 2001:2:0:$n::fe" "$cfg"
    sed -i "/^  gateway:/a\\  address6: 2001:2:0:$n::11/64" "$cfg"
  fi
  if [[ $lcore == f ]]; then
    sed -i "s/\"-l\", \"f\"/\"--lcores\", \"0@(0,1)\"/; s/lcores: \[f\]/lcores: [0]/" "$cfg"
  fi
  cat >>"$cfg" <<YAML
traffic_classes:
  - name: roce
    default: true
    dscp: 26
    ecn: ect0
    congestion_control:
      algorithm: dcqcn
      preset: mlx5
      rpg_max_rate: $((ceiling_bps / 1000000))mbit
      rpg_time_reset: 20ms
      rpg_byte_reset: 1MiB
      rpg_ai_rate: 1mbit
      rpg_hai_rate: 5mbit
      rate_reduce_monitor_period: 100us
      dce_tcp_g: 960
      dce_tcp_rtt: 5ms
cnp:
  dscp: 48
  min_time_between_cnps: 50us
YAML
  conduitd_start "$h" "$cfg" "$work/conduitd-$h.log"
}
start_daemon s1 198.18.1.11 198.18.1.254 "$lc_s1" || fail "conduitd s1 did not start"
start_daemon s2 198.18.2.11 198.18.2.254 "$lc_s2" || fail "conduitd s2 did not start"
start_daemon d 198.18.3.11 198.18.3.254 "$lc_d" || fail "conduitd d did not start"

# router_advertisement DEV: r advertises itself as the default router on DEV (lifetime 1800 s,
# from its link-local address, with its MAC), as radvd would.
router_advertisement() {
  local dev=$1 ll
  for _ in $(seq 50); do  # its link-local address must have left DAD to answer NS for it
    ll=$(netns_exec r ip -6 -o addr show dev "$dev" scope link | grep -v tentative |
      awk '{print $4}' | cut -d/ -f1)
    [[ -n $ll ]] && break
    sleep 0.2
  done
  [[ -n $ll ]] || return 1
  netns_exec r /usr/bin/python3 - "$dev" "$ll" <<'PY'
import sys
from scapy.all import Ether, get_if_hwaddr, sendp
from scapy.layers.inet6 import IPv6, ICMPv6ND_RA, ICMPv6NDOptSrcLLAddr
dev, ll = sys.argv[1], sys.argv[2]
mac = get_if_hwaddr(dev)
sendp(Ether(dst="33:33:00:00:00:01", src=mac) / IPv6(src=ll, dst="ff02::1", hlim=255) /
      ICMPv6ND_RA(routerlifetime=1800) / ICMPv6NDOptSrcLLAddr(lladdr=mac), iface=dev, verbose=False)
PY
}
if [[ $ipv6 == 1 ]]; then
  router_advertisement tos2 || fail "r's Router Advertisement on tos2"
  router_advertisement tod || fail "r's Router Advertisement on tod"
  for h in s2 d; do
    for _ in $(seq 20); do
      ra=$(netns_exec "$h" "$ctl" --socket "$work/$h.sock" stats | awk '$1 == "net.rx_ra" {print $2}')
      ((${ra:-0} >= 1)) && break
      sleep 0.1
    done
    echo "$h: net.rx_ra ${ra:-0} (its router from r's advertisement)"
    ((${ra:-0} >= 1)) || fail "conduitd $h took no Router Advertisement"
  done
fi

ctl_in() { local h=$1; shift; netns_exec "$h" "$ctl" --socket "$work/$h.sock" "$@"; }

# flows DURATION: two write_bw flows s1 -> d and s2 -> d, servers in d on TCP 18515/18516.
flows() {
  local dur=$1 i
  for i in 1 2; do
    netns_exec d timeout $((dur + 30)) "$perf" write_bw -p $((18514 + i)) -e \
      --socket "$work/d.sock" -x "$(addr_of d)" -W 30 >"$work/server$i.out" 2>"$work/server$i.err" &
    eval "spid$i=\$!"
  done
  sleep 0.5
  for i in 1 2; do
    netns_exec "s$i" timeout $((dur + 30)) "$perf" write_bw 198.18.3.1 -p $((18514 + i)) -e \
      -s 64K -m "$pmtu" -D "$dur" --check -W 30 --socket "$work/s$i.sock" -x "$(addr_of "s$i")" \
      >"$work/client$i.out" 2>"$work/client$i.err" &
    eval "cpid$i=\$!"
  done
}

# qp_json HOST: the host's QP table as JSON.
qp_json() { ctl_in "$1" qps --json; }

# tx_bytes JSON: bytes sent by the host's RTS QPs.
tx_bytes() {
  /usr/bin/python3 -c 'import json,sys; print(sum(q["tx_bytes"] for q in json.loads(sys.argv[1])))' "$1"
}

wait_flows() {
  local rc=0 i p
  for i in 1 2; do
    p=cpid$i; wait "${!p}" || { echo "client s$i exit $?"; rc=1; }
    p=spid$i; wait "${!p}" || { echo "server $i exit $?"; rc=1; }
  done
  return "$rc"
}

marker "$rate_bps"

# sending HOST: true when HOST has a QP that has sent bytes.
sending() {
  /usr/bin/python3 -c 'import json,sys; sys.exit(0 if any(q["tx_bytes"] > 0 for q in json.loads(sys.argv[1])) else 1)' \
    "$(qp_json "$1")"
}

# The measured run: both flows start (clients attach a few seconds apart on a loaded machine),
# 1 s warm-up once both send, the window, and a tail so that neither ends inside the window.
dur=$((secs + 8))
echo "== two write_bw flows (s1 -> d, s2 -> d) through tbf $rate for ${dur}s, window ${secs}s"
echo "   $port_kind ports, MTU $mtu, path MTU $pmtu, IPv$([[ $ipv6 == 1 ]] && echo 6 || echo 4);" \
  "engines on CPUs s1 $lc_s1, s2 $lc_s2, d $lc_d; idle_mode $CONDUITD_IDLE_MODE"
m0=$(red_ecn_stats r tod)
flows "$dur"
for _ in $(seq 100); do
  sending s1 && sending s2 && break
  sleep 0.1
done
{ sending s1 && sending s2; } || fail "the two flows did not both start within 10 s"
sleep 1
# Sample both senders' QP tables every ~0.5 s through the window: bytes for the rates, and the
# DCQCN state (rate, alpha, CNPs) as it moves.
samples=$work/samples.txt
: >"$samples"
# cpu_ticks HOST: the CPU time its conduitd has used (user + system, clock ticks).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$(conduitd_pid "$1")/stat"; }
declare -A cpu0=([s1]=$(cpu_ticks s1) [s2]=$(cpu_ticks s2) [d]=$(cpu_ticks d))
t_start=$(date +%s%N)
t_end=$((t_start + secs * 1000000000))
while :; do
  now=$(date +%s%N)
  printf '%s\t%s\t%s\n' "$now" "$(qp_json s1)" "$(qp_json s2)" >>"$samples"
  ((now < t_end)) || break
  sleep 0.5
done
db=$(qp_json d)
cpu_line="CPU of each conduitd over the window (its engine spins unless idle_mode lets it sleep):"
for h in s1 s2 d; do
  cpu_line+=" $h $(((($(cpu_ticks "$h") - cpu0[$h]) * 1000000000 / $(getconf CLK_TCK)) * 100 /
    ($(date +%s%N) - t_start))) %"
done
# Counters while the QPs still exist (transport counters are summed over live QPs).
stats_d=$(ctl_in d stats --json)
declare -A stats_of=([d]=$stats_d [s1]=$(ctl_in s1 stats --json) [s2]=$(ctl_in s2 stats --json))
echo "-- conduitctl qps in s1, s2 and d at the end of the window"
for h in s1 s2 d; do echo "[$h]"; ctl_in "$h" qps; done
wait_flows || fail "a transfer failed (see the logs)"
m1=$(red_ecn_stats r tod)
for i in 1 2; do
  echo "-- client s$i"; cat "$work/client$i.out"
  grep -q 'check: OK' "$work/client$i.out" || fail "flow s$i -> d: no 'check: OK'"
done
echo "-- counters at the end of the window"
for h in s1 s2 d; do
  /usr/bin/python3 -c '
import json, sys
s = json.loads(sys.argv[2])
keys = ["port.rx_packets", "net.rx_udp6_delivered", "port.rx_missed", "engine.rx_ce_marked", "engine.tx_cnps",
        "engine.rx_cnps", "transport.tx_retransmits", "transport.timeouts",
        "transport.naks_sent", "transport.naks_received", "transport.rx_duplicates",
        "transport.rx_out_of_sequence", "engine.stalls", "engine.stalled_us", "engine.stall_max_us", "engine.sleeps",
        "engine.paced_sleeps", "engine.paced_sleeps_late"]
print(sys.argv[1] + ": " + ", ".join(f"{k} {s.get(k, 0)}" for k in keys))' "$h" "${stats_of[$h]}"
done
echo "$cpu_line"

link_counters
verdict=0
/usr/bin/python3 - "$samples" "$db" "$rate_bps" "$m0" "$m1" "$stats_d" "$ceiling_bps" "$ipv6" \
  >"$work/verdict.txt" <<'PY' || verdict=$?
import json, sys
rows = []
for line in open(sys.argv[1]):
    t, a, b = line.rstrip("\n").split("\t")
    rows.append((int(t), json.loads(a), json.loads(b)))
jd = json.loads(sys.argv[2])
bottleneck = int(sys.argv[3])
ceiling = int(sys.argv[7])  # the senders' rpg_max_rate
t0, j1a, j2a = rows[0]
t1, j1b, j2b = rows[-1]
def kv(text):
    return {k: int(v) for k, v in (l.split("=", 1) for l in text.split() if "=" in l)}
m0, m1 = kv(sys.argv[4]), kv(sys.argv[5])
stats_d = json.loads(sys.argv[6])
window_s = (t1 - t0) / 1e9
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

def sender(before, after):
    b = {q["qpn"]: q for q in before}
    qs = [q for q in after if q["qpn"] in b]
    sent = sum(q["tx_bytes"] - b[q["qpn"]]["tx_bytes"] for q in qs)
    return sent * 8 / window_s, qs

x1, q1 = sender(j1a, j1b)
x2, q2 = sender(j2a, j2b)
check(q1 and q2, "both senders have a QP through the window")
jain = (x1 + x2) ** 2 / (2 * (x1 * x1 + x2 * x2)) if x1 + x2 > 0 else 0
util = (x1 + x2) / bottleneck
marked = m1["marked"] - m0["marked"]
print(f"window {window_s:.2f} s: s1 {x1/1e6:.1f} Mbit/s, s2 {x2/1e6:.1f} Mbit/s, "
      f"sum {(x1+x2)/1e6:.1f} Mbit/s = {100*util:.1f} % of {bottleneck/1e6:.0f} Mbit/s")
print(f"Jain index {jain:.4f}")
print(f"marker: {m1['packets']-m0['packets']} packets, {m1['ect']-m0['ect']} ECT, {marked} CE-marked, "
      f"virtual queue peak {m1['queue_max_bytes']} bytes")
ce_d = stats_d.get("engine.rx_ce_marked", 0)
cnps_d = stats_d.get("engine.tx_cnps", 0)
cnp_tx_qps = sum(q["cnps_tx"] for q in jd)
print(f"d: {ce_d} CE-marked arrivals, {cnps_d} CNPs sent ({cnp_tx_qps} by the live QPs)")
# DCQCN state over the samples, per sender: lowest rate, highest alpha.
seen = {}
for _, a, b in rows:
    for name, qs in (("s1", a), ("s2", b)):
        for q in qs:
            s = seen.setdefault(name, {"min_rate": q["rate_bps"], "max_alpha": 0.0, "rates": []})
            s["min_rate"] = min(s["min_rate"], q["rate_bps"])
            s["max_alpha"] = max(s["max_alpha"], q["alpha"])
            s["rates"].append(q["rate_bps"])
for name, qs in (("s1", q1), ("s2", q2)):
    for q in qs:
        st = seen.get(name, {"min_rate": 0, "max_alpha": 0, "rates": []})
        mean = sum(st["rates"]) / len(st["rates"]) if st["rates"] else 0
        print(f"{name} QP {q['qpn']}: DCQCN rate over {len(st['rates'])} samples min "
              f"{st['min_rate']/1e6:.1f} / mean {mean/1e6:.1f} Mbit/s (ceiling {ceiling/1e6:.0f}), alpha max "
              f"{st['max_alpha']:.4f}; CNPs received {q['cnps_rx']}, retransmits {q['retransmits']}")
check(marked > 0, "the marker CE-marked packets")
check(ce_d > 0, "CE marks arrived at d")
check(cnps_d > 0 and cnp_tx_qps > 0, "d sent CNPs")
for name, qs in (("s1", q1), ("s2", q2)):
    st = seen.get(name, {"min_rate": ceiling, "max_alpha": 0})
    check(all(q["cnps_rx"] > 0 for q in qs), f"{name} received CNPs")
    check(st["min_rate"] < ceiling / 2, f"{name} cut its rate (lowest {st['min_rate']/1e6:.1f} Mbit/s)")
    check(st["max_alpha"] > 0, f"{name} alpha rose above 0")
check(jain >= 0.9, f"Jain index {jain:.4f} >= 0.9")
if sys.argv[8] == "1":
    # The flows went over IPv6 (every data frame is a datagram d's stack delivered as UDP6).
    udp6 = stats_d.get("net.rx_udp6_delivered", 0)
    check(udp6 > 1000, f"d received the flows over IPv6 ({udp6} IPv6 datagrams)")
print(f"RESULT jain={jain:.4f} s1_mbps={x1/1e6:.1f} s2_mbps={x2/1e6:.1f} util={util:.3f} "
      f"marked={marked} queue_peak={m1['queue_max_bytes']} cnps={cnps_d}")
sys.exit(0 if ok else 1)
PY
cat "$work/verdict.txt"
[[ $verdict -eq 0 ]] || fail "assertions failed"
echo "PASS"
