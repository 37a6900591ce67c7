// Fuzz target: NetStack's receive classifier on arbitrary frames.
//
// Also checks the optimised Internet checksum against a naive one.
// Input: byte 0 selects a configuration (bits 0-1: VLAN or not, UDP checksum
// check or not; bit 2: resolutions pending; bit 3: IPv6 off); the rest is
// one frame. IPv6 is on (2001:db8:0:1::1/64, gateway fe80::fe, except in variant 3, which learns
// its router from Router Advertisements) unless bit 3. Besides crashes/UB it
// checks the classifier's contract: every frame gets exactly one verdict, drops are counted,
// replies fit the scratch buffer, delivered offsets lie inside the frame, and pending actions stay
// bounded. A RoCE datagram it delivers (either family) also trains the engine's receive fast path
// (make_roce_expect): the frame matches its own expectation, and that frame with one bit flipped
// (which bit: the last input byte) gets from on_rx_expected exactly what on_rx_frame and
// wire::parse_roce give it, or misses.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/checksum.h"
#include "net/icmp6.h"
#include "net/net_stack.h"
#include "wire/frame.h"

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

// The engine's full path for one frame: on_rx_frame, then parse_roce of a
// RoCE datagram. True when it was delivered to the RoCE port.
bool full_path(NetStack& s, std::span<const uint8_t> f, uint64_t now_ns,
               const conduit::wire::ParseOptions& opt, RxResult& r, conduit::wire::DropReason& why,
               conduit::wire::RoceView& view) {
  std::vector<uint8_t> reply(std::max(f.size(), NetStack::kMinReplyBytes));
  r = s.on_rx_frame(f, now_ns, reply);
  if (r.verdict != RxVerdict::kDeliverUdp || r.udp.dst_port != opt.udp_dst_port) return false;
  const size_t hdrs = r.udp.ipv6 ? 48 : 28;
  why = conduit::wire::parse_roce(f.subspan(r.udp.ip_offset, hdrs),
                                  f.subspan(r.udp.payload_offset, r.udp.payload_len), opt, view);
  return true;
}

bool same_datagram(const UdpDatagram& a, const UdpDatagram& b) {
  return a.src_mac == b.src_mac && a.src_ip == b.src_ip && a.dst_ip == b.dst_ip &&
         a.src_port == b.src_port && a.dst_port == b.dst_port && a.tos == b.tos &&
         a.ip_offset == b.ip_offset && a.payload_offset == b.payload_offset &&
         a.payload_len == b.payload_len && a.ipv6 == b.ipv6 && a.src_ip6 == b.src_ip6 &&
         a.dst_ip6 == b.dst_ip6;
}

// The receive fast path against the full path, for a frame the full path
// delivered to the RoCE port and parse_roce accepted.
void check_fast_path(NetStack& s, std::span<const uint8_t> frame, const RxResult& r,
                     uint64_t now_ns, uint8_t flip) {
  namespace wire = conduit::wire;
  wire::ParseOptions opt;
  opt.udp_dst_port = 4791;
  opt.pmtu_bytes = 1024;
  wire::RoceView view;
  const size_t hdrs = r.udp.ipv6 ? 48 : 28;
  if (r.udp.dst_port != 4791 ||
      wire::parse_roce(frame.subspan(r.udp.ip_offset, hdrs),
                       frame.subspan(r.udp.payload_offset, r.udp.payload_len), opt,
                       view) != wire::DropReason::kNone) {
    return;
  }
  const wire::RxExpect exp = s.make_roce_expect(frame, r.udp, opt);
  if (!exp.usable) return;
  check(exp.ipv6 == r.udp.ipv6);
  const size_t csum_at = r.udp.payload_offset - 2;
  const bool zero_csum = frame[csum_at] == 0 && frame[csum_at + 1] == 0;
  UdpDatagram udp;
  wire::DropReason why = wire::DropReason::kCount;
  // The frame it was learned from matches it, unless it carries a UDP
  // checksum (matching frames may not: they skip its check) or was sent to
  // a multicast MAC the stack accepts (all-nodes, solicited-node): the fast
  // path takes only frames to our own MAC.
  const bool to_our_mac =
      std::equal(s.config().mac.bytes.begin(), s.config().mac.bytes.end(), frame.begin());
  if (zero_csum && to_our_mac) {
    check(s.on_rx_expected(frame, exp, udp, view, why));
    check(why == wire::DropReason::kNone && same_datagram(udp, r.udp));
  }
  // One bit flipped anywhere: a match decides as the full path does.
  std::vector<uint8_t> mut(frame.begin(), frame.end());
  mut[(size_t{flip} * 131) % mut.size()] ^= static_cast<uint8_t>(1u << (flip & 7));
  wire::RoceView fast_view;
  UdpDatagram fast_udp;
  wire::DropReason fast_why = wire::DropReason::kCount;
  if (!s.on_rx_expected(mut, exp, fast_udp, fast_view, fast_why)) return;
  RxResult want;
  wire::DropReason want_why = wire::DropReason::kCount;
  wire::RoceView want_view;
  check(full_path(s, mut, now_ns, opt, want, want_why, want_view));
  check(same_datagram(fast_udp, want.udp) && fast_why == want_why);
  if (want_why == wire::DropReason::kNone) {
    check(fast_view.bth == want_view.bth && fast_view.payload.data() == want_view.payload.data() &&
          fast_view.payload.size() == want_view.payload.size());
  }
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
    // IPv6 off: an IPv6 frame is dropped, for an L2 reason (VLAN, MAC, a group source MAC:
    // appended after the IPv6 reasons) or as kIpv6Off (the first IPv6 reason; none after it
    // applies).
    check(type != 0x86DD || (r.verdict == RxVerdict::kDrop &&
                             (r.drop <= RxDrop::kIpv6Off || r.drop == RxDrop::kL2BadSource)));
  }
  // Off-link IPv6 goes to gateway6, else to the router an RA named (link-local), else nowhere;
  // inside a prefix an RA made on-link it goes direct. Learned prefixes stay bounded and are
  // neither link-local nor multicast; an RA's MTU is at least IPv6's minimum.
  if (s.config().addr6) {
    const Ipv6Addr remote = Ipv6Addr::from_groups({0x2001, 0xdb8, 9, 0, 0, 0, 0, 9});
    const auto hop = s.next_hop6(remote);
    const auto& router = s.learned_router6();
    check(!router || router->is_link_local());
    bool on_link = false;
    check(s.learned_prefixes6().size() <= NetStack::kMaxLearnedPrefixes6);
    for (const auto& p : s.learned_prefixes6()) {
      check(p.len <= 128 && !p.prefix.is_link_local() && !p.prefix.is_multicast());
      on_link = on_link || ipv6_prefix_match(remote, p.prefix, p.len);
    }
    check(hop == (on_link ? remote : s.config().gateway6 ? s.config().gateway6 : router));
    check(s.link_mtu6() == 0 || s.link_mtu6() >= kIpv6MinMtu);
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
  if (r.verdict == RxVerdict::kDeliverUdp) check_fast_path(s, frame, r, now_ns, data[size - 1]);
  return 0;
}
