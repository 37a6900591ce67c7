# shellcheck shell=bash
# tcbpf.sh: attach the test eBPF programs (tests/integration/bpf) with tc clsact, configure them
# and read their counters through bpftool (map ids are global, so no bpffs pinning is needed).
# Needs scripts/lib/netns.sh (hosts are its logical names). Source both:
#
#   . scripts/lib/netns.sh; . scripts/lib/tcbpf.sh
#   tcbpf_attach r tod egress build/tests/integration/bpf/red_ecn.o
#   red_ecn_config r tod 1000000000 30000 150000 100000 2000000   # rate_bps kmin kmax pmax limit
#   red_ecn_stats r tod          # "packets=… ect=… marked=… queue_max_bytes=…" one per line
#   tcbpf_attach d eth0 ingress build/tests/integration/bpf/drop.o
#   drop_config d eth0 ingress 10000 4791                      # 1 % of UDP/4791 frames
#   drop_stats d eth0 ingress    # packets=… matched=… dropped=…
#
# Functions:
#   tcbpf_attach HOST IF DIR OBJ   clsact on IF (kept if present), filter DIR (ingress|egress)
#   tcbpf_detach HOST IF DIR       remove the DIR filters
#   tcbpf_prog_id HOST IF DIR      id of the attached program
#   tcbpf_map_id HOST IF DIR MAP   id of the program's map named MAP
#   tcbpf_map_write ID PYFMT V...  write key 0 of array map ID as struct.pack(PYFMT, V...)
#   tcbpf_map_read ID              key 0 of map ID as "field=value" lines (from BTF)
#   red_ecn_config HOST IF RATE_BPS KMIN_BYTES KMAX_BYTES PMAX_PPM LIMIT_BYTES
#   red_ecn_stats HOST IF
#   drop_config HOST IF DIR SHARE_PPM UDP_PORT [FLAGS]   (UDP_PORT 0 = every UDP frame;
#                                  FLAGS 1 = spare RoCE ACK/NAK frames, see drop.c)
#   drop_stats HOST IF DIR
#   tcbpf_stat STATS_TEXT FIELD    pick one field from *_stats output

tcbpf_attach() {
  local host=$1 dev=$2 dir=$3 obj=$4
  [[ -f $obj ]] || { echo "tcbpf_attach: no object $obj" >&2; return 1; }
  netns_exec "$host" tc qdisc replace dev "$dev" clsact || return 1
  netns_exec "$host" tc filter del dev "$dev" "$dir" 2>/dev/null || true
  netns_exec "$host" tc filter add dev "$dev" "$dir" bpf da obj "$obj" sec tc
}

tcbpf_detach() { netns_exec "$1" tc filter del dev "$2" "$3"; }

tcbpf_prog_id() {
  netns_exec "$1" tc -j filter show dev "$2" "$3" | /usr/bin/python3 -c '
import json, sys
for f in json.load(sys.stdin):
    p = f.get("options", {}).get("prog")
    if p:
        print(p["id"]); break
else:
    sys.exit("no bpf program attached")'
}

tcbpf_map_id() {
  local prog
  prog=$(tcbpf_prog_id "$1" "$2" "$3") || return 1
  local ids id
  ids=$(bpftool -j prog show id "$prog" | /usr/bin/python3 -c '
import json, sys
print(" ".join(str(i) for i in json.load(sys.stdin).get("map_ids", [])))') || return 1
  for id in $ids; do
    if [[ $(bpftool -j map show id "$id" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["name"])') == "$4" ]]; then
      echo "$id"
      return 0
    fi
  done
  echo "tcbpf_map_id: program $prog has no map $4" >&2
  return 1
}

tcbpf_map_write() {
  local id=$1 fmt=$2; shift 2
  local hex
  hex=$(/usr/bin/python3 -c '
import struct, sys
print(" ".join("%02x" % b for b in struct.pack(sys.argv[1], *map(int, sys.argv[2:]))))' "$fmt" "$@") \
    || return 1
  # shellcheck disable=SC2086
  bpftool map update id "$id" key hex 00 00 00 00 value hex $hex
}

tcbpf_map_read() {
  bpftool -j map lookup id "$1" key hex 00 00 00 00 | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
f = v.get("formatted", v)["value"]
for k, x in f.items():
    print(f"{k}={x}")'
}

tcbpf_stat() { sed -n "s/^$2=//p" <<<"$1"; }

# struct red_cfg { u64 rate_bps; u32 kmin_bytes, kmax_bytes, pmax_ppm, limit_bytes; }
red_ecn_config() {
  local id
  id=$(tcbpf_map_id "$1" "$2" egress red_cfg) || return 1
  tcbpf_map_write "$id" '<QIIII' "$3" "$4" "$5" "$6" "$7"
}

red_ecn_stats() {
  local id
  id=$(tcbpf_map_id "$1" "$2" egress red_stats) || return 1
  tcbpf_map_read "$id"
}

# struct drop_cfg { u32 share_ppm; u16 udp_port; u16 pad; }
drop_config() {
  local id
  id=$(tcbpf_map_id "$1" "$2" "$3" drop_cfg) || return 1
  tcbpf_map_write "$id" '<IHH' "$4" "$5" "${6:-0}"
}

drop_stats() {
  local id
  id=$(tcbpf_map_id "$1" "$2" "$3" drop_stats) || return 1
  tcbpf_map_read "$id"
}
