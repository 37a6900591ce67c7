// Fuzz target: NetStack's receive classifier on arbitrary frames.
//
// Also checks the optimised Internet checksum against a naive one.
// Input: byte 0 selects a configuration (bits 0-1: VLAN or not, UDP checksum
// check or not; bit 2: resolutions pending; bit 3: IPv6 off); the rest is
// one frame. IPv6 is on (2001:db8:0:1::1/64, gateway fe80::fe, except in variant 3, which learns
// its router from Router Advertisements) unless bit 3. Besides crashes/UB it
// checks the classifier's contract: every frame gets exactly one verdict, drops are counted,
// replies fit the scratch buffer, delivered offsets lie inside the frame, and pending actions stay
// bounded.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/checksum.h"
#include "net/net_stack.h"

using namespace conduit::net;

namespace {

NetStack make_stack(bool vlan, bool verify_udp, bool ipv6, bool router_discovery = false) {
  NetStackConfig c;
  c.mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
  c.addr = Ipv4Addr::from_octets(198, 18, 0, 1);
  c.prefix_len = 24;
  c.gateway = Ipv4Addr::from_octets(198, 18, 0, 254);
  if (vlan) c.vlan_id = 100;
  c.udp_ports = {4791, 18515};
  c.verify_udp_checksum = verify_udp;
  c.neighbour.capacity = 16;
  c.neighbour.max_pending_per_hop = 4;
  if (ipv6) {
    c.addr6 = Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 1, 0, 0, 0, 1});
    if (!router_discovery) c.gateway6 = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0, 0, 0, 0xfe});
  }
  return NetStack(c);
}

void check(bool ok) {
  if (!ok) std::abort();
}

// Byte-at-a-time RFC 1071 sum: the optimised checksum must agree with it.
uint16_t naive_checksum(std::span<const uint8_t> b) {
  uint64_t sum = 0;
  for (size_t i = 0; i < b.size(); ++i) sum += (i % 2 == 0) ? uint64_t{b[i]} << 8 : b[i];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static NetStack stacks[8] = {make_stack(false, false, true),  make_stack(false, true, true),
                               make_stack(true, false, true),   make_stack(true, true, true, true),
                               make_stack(false, false, false), make_stack(false, true, false),
                               make_stack(true, false, false),  make_stack(true, true, false)};
  static uint64_t now_ns = 0;
  NetStack& s = stacks[(data[0] & 3) | ((data[0] >> 1) & 4)];
  const std::span<const uint8_t> frame(data + 1, size - 1);
  // The reply buffer is exactly as large as the stack promises to need.
  std::vector<uint8_t> reply(std::max(frame.size(), NetStack::kMinReplyBytes));

  const NetCounters before = s.counters();
  now_ns += 1'000'000;
  // Give the neighbour table something to resolve so ARP replies matter.
  if (data[0] & 4) {
    s.resolve(Ipv4Addr::from_octets(198, 18, 0, 2), now_ns, size);
    s.resolve6(Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 1, 0, 0, 0, 2}), now_ns, size + 1);
  }
  check(checksum_finish(checksum_partial(frame)) == naive_checksum(frame));
  const RxResult r = s.on_rx_frame(frame, now_ns, reply);
  const NetCounters& after = s.counters();
  check(after.rx_frames == before.rx_frames + 1);
  switch (r.verdict) {
    case RxVerdict::kDrop:
      check(r.drop != RxDrop::kNone && r.drop < RxDrop::kCount);
      check(after.total_drops() == before.total_drops() + 1);
      break;
    case RxVerdict::kReply:
      check(r.reply_len >= 60 && r.reply_len <= reply.size());
      break;
    case RxVerdict::kDeliverUdp:
      check(r.udp.payload_offset + size_t{r.udp.payload_len} <= frame.size());
      check(r.udp.ip_offset + (r.udp.ipv6 ? 48u : 28u) == r.udp.payload_offset);
      check(!r.udp.ipv6 || (r.udp.dst_ip6 == *s.config().addr6 && r.udp.src_ip.is_zero()));
      check(r.udp.dst_port == 4791 || r.udp.dst_port == 18515);
      break;
    case RxVerdict::kConsumed:
      break;
  }
  if (r.verdict != RxVerdict::kDrop) check(after.total_drops() == before.total_drops());
  if (!s.config().addr6) {
    const uint16_t type = frame.size() >= 14 ? uint16_t(frame[12] << 8 | frame[13]) : 0;
    // IPv6 off: an IPv6 frame is dropped, for an L2 reason (VLAN, MAC) or as kIpv6Off (the
    // first IPv6 reason; none after it applies).
    check(type != 0x86DD || (r.verdict == RxVerdict::kDrop && r.drop <= RxDrop::kIpv6Off));
  }
  // Off-link IPv6 goes to gateway6, else to the router an RA named (link-local), else nowhere.
  if (s.config().addr6) {
    const auto hop = s.next_hop6(Ipv6Addr::from_groups({0x2001, 0xdb8, 9, 0, 0, 0, 0, 9}));
    const auto& router = s.learned_router6();
    check(!router || router->is_link_local());
    check(hop == (s.config().gateway6 ? s.config().gateway6 : router));
  }
  s.poll_timers(now_ns);
  NetAction actions[8];
  for (size_t n; (n = s.take_actions(actions)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      check(actions[i].len <= actions[i].bytes.size());
      if (actions[i].kind == NetAction::Kind::kTransmit) check(actions[i].len >= 60);
    }
  }
  check(s.pending_actions() == 0);
  check(s.neighbours().size() <= 16);
  check(s.neighbours6().size() <= 16);
  return 0;
}
