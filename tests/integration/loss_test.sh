#!/usr/bin/env bash
# The loss injector: drop.o on the receiver's ingress drops the configured share of UDP/4791
# frames and nothing else; 100 % drops every frame of the port.
# Usage: loss_test.sh DROP_OBJ
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "$0")/common.sh"
netns_require_root bpftool
obj=${1:-}
need_obj "$obj"
py=/usr/bin/python3

netns_init
out=$(mktemp /tmp/losstest.XXXXXX)
trap 'rm -f "$out"; netns_cleanup' EXIT
netns_pair
tcbpf_attach b eth0 ingress "$obj"

# blast PORT COUNT: a→b UDP datagrams, paced in small bursts; prints how many b received.
blast() {
  local port=$1 count=$2
  timeout 60 ip netns exec "$(netns_name b)" "$py" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind(("198.18.0.2", int(sys.argv[1])))
s.settimeout(1.0)
n = 0
try:
    while True:
        s.recv(2048); n += 1
except socket.timeout:
    pass
print(n)' "$port" >"$out" &
  local rpid=$!
  sleep 0.3
  timeout 60 ip netns exec "$(netns_name a)" "$py" -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    s.sendto(b"x" * 256, ("198.18.0.2", int(sys.argv[1])))
    if i % 200 == 199: time.sleep(0.002)' "$port" "$count" || fail "sender failed"
  wait "$rpid" || fail "receiver failed"
  cat "$out"
}

share_ppm=100000   # 10 %
drop_config b eth0 ingress "$share_ppm" 4791
n=20000
got=$(blast 4791 "$n")
s=$(drop_stats b eth0 ingress); echo "$s" | tr '\n' ' '; echo
matched=$(tcbpf_stat "$s" matched) dropped=$(tcbpf_stat "$s" dropped)
echo "sent $n to UDP/4791 with ${share_ppm} ppm drop: matched $matched, dropped $dropped, received $got"
[[ $matched -eq $n ]] || fail "matched $matched of $n frames"
# 10 % of 20000: sd = 42 frames; accept +-1 percentage point (about 5 sd).
[[ $dropped -ge 1800 && $dropped -le 2200 ]] || fail "dropped $dropped, expected about 2000"
[[ $got -le $((n - dropped)) ]] || fail "received more than were let through"
[[ $got -ge $(((n - dropped) * 95 / 100)) ]] || fail "received $got of $((n - dropped)) let through"

echo "other ports pass untouched"
got=$(blast 5000 2000)
s=$(drop_stats b eth0 ingress)
[[ $(tcbpf_stat "$s" matched) -eq $matched ]] || fail "frames to port 5000 matched"
[[ $(tcbpf_stat "$s" dropped) -eq $dropped ]] || fail "frames to port 5000 dropped"
[[ $got -ge 1900 ]] || fail "port 5000 received only $got of 2000"

echo "100 % drops every frame of the port"
drop_config b eth0 ingress 1000000 4791
got=$(blast 4791 1000)
s=$(drop_stats b eth0 ingress)
[[ $got -eq 0 ]] || fail "received $got frames at 100 % drop"
[[ $(tcbpf_stat "$s" dropped) -eq $((dropped + 1000)) ]] || fail "drop counter off: $s"
echo "PASS"
