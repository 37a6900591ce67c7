// NetStack's IPv6: Neighbor Discovery, ICMPv6 echo, UDP, filters, routing.
// Frames come from test_frames.h (byte by byte from the RFC layouts) and
// every checksum is recomputed here with the reference implementation.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>

#include "net/net_stack.h"
#include "stack_harness.h"
#include "test_frames.h"

using namespace conduit::net;
using namespace conduit::net::test;

namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint16_t kCmPort = 18515;
using Resolve = NeighbourTable6::Resolve;

NetStackConfig config6() {
  NetStackConfig c;
  c.mac = kOurMac;
  c.addr = kOurIp;
  c.prefix_len = 24;
  c.gateway = kGwIp;
  c.udp_ports = {4791, kCmPort};
  c.neighbour.capacity = 8;
  c.neighbour.max_pending_per_hop = 4;
  c.neighbour.max_requests = 3;
  c.neighbour.retry_interval_ns = kSec;
  c.neighbour.randomize_reachable = false;  // exact lifetimes (drawn ones: neighbour_table_test)
  c.addr6 = kOurIp6;
  c.prefix_len6 = 64;
  c.gateway6 = kGwIp6;
  return c;
}

std::vector<uint8_t> bytes_of(const NetAction& a) {
  return std::vector<uint8_t>(a.bytes.begin(), a.bytes.begin() + a.len);
}

// Checks an NS or NA we built, starting at l3: every header field, and the
// ICMPv6 checksum recomputed over the pseudo-header.
void check_ndp(const std::vector<uint8_t>& f, size_t l3, uint8_t type, uint32_t flags,
               const Ipv6Addr& ip_dst, const Ipv6Addr& target) {
  REQUIRE(f.size() == l3 + 40 + 32);
  CHECK(get32(f, l3) == 0x60000000u);  // version 6, traffic class 0, flow label 0
  CHECK(get16(f, l3 + 4) == 32);       // payload length
  CHECK(f[l3 + 6] == 58);              // ICMPv6
  CHECK(f[l3 + 7] == 255);             // hop limit
  CHECK(get_ip6(f, l3 + 8) == kOurIp6);
  CHECK(get_ip6(f, l3 + 24) == ip_dst);
  const size_t l4 = l3 + 40;
  CHECK(f[l4] == type);
  CHECK(f[l4 + 1] == 0);
  CHECK(get32(f, l4 + 4) == flags);
  CHECK(get_ip6(f, l4 + 8) == target);
  CHECK(f[l4 + 24] == (type == 135 ? 1 : 2));  // SLLA / TLLA option
  CHECK(f[l4 + 25] == 1);                      // 8 bytes
  CHECK(get_mac(f, l4 + 26) == kOurMac);
  CHECK(ref_checksum(f.data() + l4, 32, ref_pseudo6(kOurIp6, ip_dst, 32, 58)) == 0);
  // And the exact value: recompute with the checksum field zeroed.
  std::vector<uint8_t> m(f.begin() + static_cast<std::ptrdiff_t>(l4), f.end());
  m[2] = m[3] = 0;
  CHECK(get16(f, l4 + 2) == ref_checksum(m.data(), m.size(), ref_pseudo6(kOurIp6, ip_dst, 32, 58)));
}

}  // namespace

TEST_CASE("NS for our address gets an exact NA", "[stack6][ndp]") {
  NetStack s(config6());
  const Rx rx = receive(s, ns_for_us(), 5);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  const auto& r = rx.reply;
  REQUIRE(r.size() == 86);
  CHECK(get_mac(r, 0) == kPeerMac);
  CHECK(get_mac(r, 6) == kOurMac);
  CHECK(get16(r, 12) == 0x86DD);
  check_ndp(r, 14, 136, 0x60000000u, kPeerIp6, kOurIp6);  // Solicited | Override
  CHECK(s.counters().rx_ns == 1);
  CHECK(s.counters().tx_na == 1);
  // The solicitor's SLLA was learned (created: RFC 4861 7.2.3), STALE: an NS does not prove
  // the solicitor reachable, so the entry's first use sends it a unicast NS (and uses it).
  const auto n = s.neighbours6().find(kPeerIp6);
  REQUIRE(n);
  CHECK(n->mac == kPeerMac);
  CHECK(n->state == NeighbourState::kReachable);
  CHECK(n->deadline_ns == 5 + NeighbourConfig{}.refresh_window_ns);
  const auto res = s.resolve6(kPeerIp6, 6, 77);
  CHECK(res.status == Resolve::kResolved);
  CHECK(res.mac == kPeerMac);
  const auto probe = take_all(s);
  REQUIRE(probe.size() == 1);
  check_ndp(bytes_of(probe[0]), 14, 135, 0, kPeerIp6, kPeerIp6);
}

TEST_CASE("NS unicast to our address without SLLA is answered, nothing learned", "[stack6][ndp]") {
  NetStack s(config6());
  const Rx rx = receive(s, ns_frame(kOurIp6, {}, Ip6Opts{}));
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(get_mac(rx.reply, 0) == kPeerMac);
  check_ndp(rx.reply, 14, 136, 0x60000000u, kPeerIp6, kOurIp6);
  CHECK(s.neighbours6().size() == 0);
}

TEST_CASE("DAD NS (source ::) gets an NA to all nodes without S", "[stack6][ndp]") {
  NetStack s(config6());
  Ip6Opts o;
  o.src = Ipv6Addr{};
  o.dst = Ipv6Addr::solicited_node(kOurIp6);
  o.eth_dst = kOurSolicitedMac;
  const Rx rx = receive(s, ns_frame(kOurIp6, {}, o));
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(get_mac(rx.reply, 0) == kAllNodesMac);
  CHECK(get_mac(rx.reply, 6) == kOurMac);
  check_ndp(rx.reply, 14, 136, 0x20000000u, Ipv6Addr::all_nodes(), kOurIp6);  // Override only
  CHECK(s.neighbours6().size() == 0);
  CHECK(s.counters().rx_ns == 1);

  // A DAD NS must go to a solicited-node group and carry no SLLA.
  CHECK(drop_of(s, ns_frame(kOurIp6, lla_option(1, kPeerMac), o)) == RxDrop::kNdpMalformed);
  Ip6Opts uni = o;
  uni.dst = kOurIp6;
  uni.eth_dst = kOurMac;
  CHECK(drop_of(s, ns_frame(kOurIp6, {}, uni)) == RxDrop::kNdpMalformed);
  // :: is no source for anything but an NS.
  Ip6Opts u = o;
  u.dst = kOurIp6;
  u.eth_dst = kOurMac;
  CHECK(drop_of(s, ipv6_frame(17, udp6_segment(1, 4791, {1}, false, Ipv6Addr{}), u)) ==
        RxDrop::kIpv6BadSource);
  u.hop_limit = 255;
  CHECK(drop_of(s, ipv6_frame(58, icmp6(136, 0, ndp_body(0, kPeerIp6), Ipv6Addr{}, kOurIp6), u)) ==
        RxDrop::kIpv6BadSource);
  CHECK(s.counters().drops(RxDrop::kNdpMalformed) == 2);
}

TEST_CASE("Invalid NS and NA are dropped by reason", "[stack6][ndp]") {
  NetStack s(config6());
  Ip6Opts o;  // unicast from the peer to us
  const auto slla = lla_option(1, kPeerMac);

  // Hop limit != 255: not from this link.
  Ip6Opts hop = o;
  hop.hop_limit = 254;
  CHECK(drop_of(s, ipv6_frame(58, icmp6(135, 0, ndp_body(0, kOurIp6, slla), o.src, o.dst), hop)) ==
        RxDrop::kNdpBadHopLimit);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(136, 0, ndp_body(0, kPeerIp6), o.src, o.dst), hop)) ==
        RxDrop::kNdpBadHopLimit);
  // Bad checksum.
  auto f = ns_for_us();
  f[14 + 40 + 10] ^= 0x01;  // a target byte
  CHECK(drop_of(s, f) == RxDrop::kIcmp6BadChecksum);
  f = na_frame(0x20000000u, kPeerIp6, {}, o);
  f.back() ^= 0x80;
  CHECK(drop_of(s, f) == RxDrop::kIcmp6BadChecksum);
  // Truncated: ICMP length < 24 (checksum still right), and < 4.
  Ip6Opts ndp = o;
  ndp.hop_limit = 255;
  const std::vector<uint8_t> short_body(16, 0);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(135, 0, short_body, o.src, o.dst), ndp)) ==
        RxDrop::kNdpMalformed);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(136, 0, short_body, o.src, o.dst), ndp)) ==
        RxDrop::kNdpMalformed);
  CHECK(drop_of(s, ipv6_frame(58, {135, 0, 0}, ndp)) == RxDrop::kIcmp6Truncated);
  // IPv6 payload length beyond the frame.
  f = ns_for_us();
  f.resize(f.size() - 1);
  CHECK(drop_of(s, f) == RxDrop::kIpv6Truncated);
  // Zero-length option, option past the end, a lone option byte.
  CHECK(drop_of(s, ns_frame(kOurIp6, {1, 0, 0, 0, 0, 0, 0, 0}, o)) == RxDrop::kNdpMalformed);
  CHECK(drop_of(s, ns_frame(kOurIp6, {1, 2, 0, 0, 0, 0, 0, 0}, o)) == RxDrop::kNdpMalformed);
  CHECK(drop_of(s, ns_frame(kOurIp6, {1}, o)) == RxDrop::kNdpMalformed);
  CHECK(drop_of(s, na_frame(0, kPeerIp6, {2, 0, 0, 0, 0, 0, 0, 0}, o)) == RxDrop::kNdpMalformed);
  // Multicast target.
  CHECK(drop_of(s, ns_frame(Ipv6Addr::all_nodes(), slla, o)) == RxDrop::kNdpMalformed);
  CHECK(drop_of(s, na_frame(0, Ipv6Addr::solicited_node(kPeerIp6), {}, o)) ==
        RxDrop::kNdpMalformed);
  // Code != 0.
  CHECK(drop_of(s, ipv6_frame(58, icmp6(135, 1, ndp_body(0, kOurIp6, slla), o.src, o.dst), ndp)) ==
        RxDrop::kNdpMalformed);
  // NA with S set to a multicast destination.
  Ip6Opts all = o;
  all.dst = Ipv6Addr::all_nodes();
  all.eth_dst = kAllNodesMac;
  CHECK(drop_of(s, na_frame(0x60000000u, kPeerIp6, {}, all)) == RxDrop::kNdpMalformed);
  CHECK(receive(s, na_frame(0x20000000u, kPeerIp6, {}, all)).result.verdict ==
        RxVerdict::kConsumed);
  // NS for another address.
  CHECK(drop_of(s, ns_frame(kPeerIp6, slla, o)) == RxDrop::kNdpNotForUs);
  // Multicast sender MAC on a unicast-source NS: nowhere to answer (the
  // L2 check drops every frame from a group MAC first).
  Ip6Opts mc = o;
  mc.eth_src = MacAddr{{0x01, 0, 0x5e, 0, 0, 1}};
  CHECK(drop_of(s, ns_frame(kOurIp6, slla, mc)) == RxDrop::kL2BadSource);

  CHECK(s.counters().rx_ns == 0);
  CHECK(s.counters().tx_na == 0);
  CHECK(s.counters().rx_na == 1);
  CHECK(s.neighbours6().size() == 0);
}

TEST_CASE("resolve6 sends an exact NS; the NA releases the queue", "[stack6][ndp]") {
  NetStack s(config6());
  CHECK(s.resolve6(kPeerIp6, 100, 42).status == Resolve::kQueued);
  CHECK(s.resolve6(kPeerIp6, 101, 43).status == Resolve::kQueued);
  auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == NetAction::Kind::kTransmit);
  CHECK(actions[0].ipv6);
  CHECK(actions[0].next_hop6 == kPeerIp6);
  const auto ns = bytes_of(actions[0]);
  const Ipv6Addr group = Ipv6Addr::solicited_node(kPeerIp6);
  CHECK(group == *Ipv6Addr::parse("ff02::1:ff00:2"));
  CHECK(get_mac(ns, 0) == MacAddr{{0x33, 0x33, 0xff, 0x00, 0x00, 0x02}});
  CHECK(get_mac(ns, 6) == kOurMac);
  CHECK(get16(ns, 12) == 0x86DD);
  check_ndp(ns, 14, 135, 0, group, kPeerIp6);
  CHECK(s.counters().tx_ns == 1);
  CHECK(s.next_deadline_ns() == 100 + kSec);

  // Our NS looped back is not for us (source is ours).
  CHECK(drop_of(s, ns) == RxDrop::kNotOurMac);

  // An NA without the Override flag still completes an incomplete entry.
  const auto na = na_frame(0x40000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{});
  CHECK(receive(s, na, 200).result.verdict == RxVerdict::kConsumed);
  actions = take_all(s);
  REQUIRE(actions.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(actions[i].kind == NetAction::Kind::kTransmitQueued);
    CHECK(actions[i].ipv6);
    CHECK(actions[i].dst_mac == kPeerMac);
    CHECK(actions[i].next_hop6 == kPeerIp6);
  }
  CHECK(actions[0].frame == 42);
  CHECK(actions[1].frame == 43);
  CHECK(s.counters().rx_na == 1);
  const auto r = s.resolve6(kPeerIp6, 300, 44);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kPeerMac);

  // Reachable: another MAC needs Override. Without it the known MAC stays but is in doubt
  // (RFC 4861 7.2.5: STALE): the next use probes it, unicast, at once.
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x22}};
  const uint64_t gen = s.generation();
  receive(s, na_frame(0x40000000u, kPeerIp6, lla_option(2, moved), Ip6Opts{}), 400);
  CHECK(s.neighbours6().find(kPeerIp6)->mac == kPeerMac);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 400 + NeighbourConfig{}.refresh_window_ns);
  CHECK(s.neighbours6().counters().marked_stale == 1);
  CHECK(s.generation() == gen + 1);
  CHECK(s.resolve6(kPeerIp6, 401).mac == kPeerMac);
  actions = take_all(s);
  REQUIRE(actions.size() == 1);
  const auto probe = bytes_of(actions[0]);
  CHECK(get_mac(probe, 0) == kPeerMac);
  check_ndp(probe, 14, 135, 0, kPeerIp6, kPeerIp6);
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, moved), Ip6Opts{}), 500);
  CHECK(s.neighbours6().find(kPeerIp6)->mac == moved);
}

TEST_CASE("A refresh answered as Linux answers it (S, no Override, no TLLA) confirms the entry",
          "[stack6][ndp]") {
  NetStackConfig c = config6();
  c.neighbour.reachable_ns = 30 * kSec;
  c.neighbour.refresh_window_ns = 5 * kSec;
  NetStack s(c);
  s.resolve6(kPeerIp6, 0);  // resolved: reachable until 30 s
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 0);
  take_all(s);
  CHECK(s.resolve6(kPeerIp6, 26 * kSec).status == Resolve::kResolved);
  REQUIRE(take_all(s).size() == 1);  // the unicast NS
  const uint64_t gen = s.generation();
  // Unsolicited and without a TLLA: says nothing about reachability.
  receive(s, na_frame(0x00000000u, kPeerIp6, {}, Ip6Opts{}), 26 * kSec + 1);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 30 * kSec);
  // Linux's answer to a unicast NS (ndisc_recv_ns): Solicited, no Override, no TLLA.
  receive(s, na_frame(0x40000000u, kPeerIp6, {}, Ip6Opts{}), 27 * kSec);
  CHECK(s.counters().rx_na == 3);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 57 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->mac == kPeerMac);
  s.poll_timers(31 * kSec);
  REQUIRE(s.neighbours6().find(kPeerIp6));
  CHECK(s.neighbours6().counters().aged_out == 0);
  CHECK(s.generation() == gen);
  // An incomplete entry needs the TLLA: such an NA does not complete it.
  CHECK(s.resolve6(kPeerLl6, 32 * kSec, 7).status == Resolve::kQueued);
  take_all(s);
  Ip6Opts from_ll;
  from_ll.src = kPeerLl6;
  receive(s, na_frame(0x40000000u, kPeerLl6, {}, from_ll), 32 * kSec);
  CHECK(s.neighbours6().find(kPeerLl6)->state == NeighbourState::kIncomplete);
  CHECK(s.pending_actions() == 0);
}

TEST_CASE("NS refresh of a reachable entry goes unicast", "[stack6][ndp]") {
  NetStackConfig c = config6();
  c.neighbour.reachable_ns = 30 * kSec;
  c.neighbour.refresh_window_ns = 5 * kSec;
  NetStack s(c);
  s.resolve6(kPeerIp6, 0);  // resolved: reachable until 30 s
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 0);
  take_all(s);
  CHECK(s.resolve6(kPeerIp6, 26 * kSec).status == Resolve::kResolved);
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  const auto ns = bytes_of(actions[0]);
  CHECK(get_mac(ns, 0) == kPeerMac);
  check_ndp(ns, 14, 135, 0, kPeerIp6, kPeerIp6);
}

TEST_CASE("NS retries come from poll_timers; failure drops the queue", "[stack6][ndp]") {
  NetStack s(config6());
  s.resolve6(kPeerIp6, 0, 1);
  s.resolve6(kPeerIp6, 0, 2);
  CHECK(take_all(s).size() == 1);
  CHECK(s.next_deadline_ns() == kSec);
  s.poll_timers(kSec);
  auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == NetAction::Kind::kTransmit);
  check_ndp(bytes_of(actions[0]), 14, 135, 0, Ipv6Addr::solicited_node(kPeerIp6), kPeerIp6);
  s.poll_timers(2 * kSec);
  CHECK(take_all(s).size() == 1);
  s.poll_timers(3 * kSec);
  actions = take_all(s);
  REQUIRE(actions.size() == 2);
  CHECK(actions[0].kind == NetAction::Kind::kDropQueued);
  CHECK(actions[0].frame == 1);
  CHECK(actions[1].kind == NetAction::Kind::kDropQueued);
  CHECK(actions[1].frame == 2);
  CHECK(actions[1].ipv6);
  CHECK(s.counters().tx_ns == 3);
  CHECK_FALSE(s.neighbours6().find(kPeerIp6));
  CHECK(s.neighbours6().counters().resolve_failed == 1);
  CHECK(s.next_deadline_ns() == UINT64_MAX);
}

TEST_CASE("Both families share one action queue and one deadline", "[stack6][ndp]") {
  NetStack s(config6());
  s.resolve(kPeerIp, 0, 1);
  s.resolve6(kPeerIp6, kSec / 2, 2);
  CHECK(s.next_deadline_ns() == kSec);
  auto actions = take_all(s);
  REQUIRE(actions.size() == 2);
  CHECK_FALSE(actions[0].ipv6);
  CHECK(get16(bytes_of(actions[0]), 12) == 0x0806);
  CHECK(actions[1].ipv6);
  CHECK(get16(bytes_of(actions[1]), 12) == 0x86DD);
  s.poll_timers(kSec);
  actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK_FALSE(actions[0].ipv6);
  CHECK(s.next_deadline_ns() == kSec + kSec / 2);
  s.poll_timers(kSec + kSec / 2);
  actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].ipv6);
}

namespace {
// n NS for our address from n distinct link-local senders (each with its SLLA), each answered.
void ns_flood(NetStack& s, int n, uint64_t now_ns = kSec) {
  for (int i = 0; i < n; ++i) {
    Ip6Opts o;
    o.src = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0, 0, 0x1000, static_cast<uint16_t>(i + 1)});
    o.dst = Ipv6Addr::solicited_node(kOurIp6);
    o.eth_dst = kOurSolicitedMac;
    const MacAddr m{{0x02, 0xaa, 0, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)}};
    o.eth_src = m;
    REQUIRE(receive(s, ns_frame(kOurIp6, lla_option(1, m), o), now_ns).result.verdict ==
            RxVerdict::kReply);
  }
}
}  // namespace

TEST_CASE("An NS flood from on-link sources cannot lock out a new next hop", "[stack6][ndp]") {
  NetStackConfig c = config6();
  c.neighbour.capacity = 256;
  NetStack s(c);
  // A next hop we resolved before the flood.
  s.resolve6(kGwIp6, 0, 1);
  Ip6Opts na;
  na.src = kGwIp6;
  receive(s, na_frame(0x60000000u, kGwIp6, lla_option(2, kGwMac), na), 0);
  REQUIRE(s.neighbours6().find(kGwIp6)->state == NeighbourState::kReachable);
  ns_flood(s, 300);
  take_all(s);
  CHECK(s.neighbours6().size() == 256);
  CHECK(s.resolve6(kPeerIp6, 2 * kSec, 77).status == Resolve::kQueued);
  CHECK(s.neighbours6().counters().table_full_drops == 0);
  CHECK(s.neighbours6().find(kGwIp6)->state == NeighbourState::kReachable);
}

TEST_CASE("An NA for an unknown target creates nothing", "[stack6][ndp]") {
  NetStack s(config6());
  const auto na = na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{});
  CHECK(receive(s, na).result.verdict == RxVerdict::kConsumed);
  CHECK(s.neighbours6().size() == 0);
  CHECK(s.pending_actions() == 0);
  CHECK(s.counters().rx_na == 1);
  // Nor does an NA without TLLA complete a resolution.
  s.resolve6(kPeerIp6, 0, 5);
  take_all(s);
  CHECK(receive(s, na_frame(0x60000000u, kPeerIp6, {}, Ip6Opts{})).result.verdict ==
        RxVerdict::kConsumed);
  CHECK(s.pending_actions() == 0);
  CHECK(s.neighbours6().find(kPeerIp6)->state == NeighbourState::kIncomplete);
}

TEST_CASE("ICMPv6 echo request gets an exact reply", "[stack6][icmp6]") {
  NetStack s(config6());
  std::vector<uint8_t> body = {0x12, 0x34, 0x00, 0x07};  // id, seq
  for (uint8_t i = 0; i < 57; ++i) body.push_back(i);    // odd length
  Ip6Opts o;
  o.traffic_class = 0xb8;
  const auto req = ipv6_frame(58, icmp6(128, 0, body, kPeerIp6, kOurIp6), o);
  const Rx rx = receive(s, req);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  const auto& r = rx.reply;
  REQUIRE(r.size() == req.size());
  CHECK(get_mac(r, 0) == kPeerMac);
  CHECK(get_mac(r, 6) == kOurMac);
  CHECK(get16(r, 12) == 0x86DD);
  CHECK(get32(r, 14) == (6u << 28 | 0xb8u << 20));  // traffic class echoed, no flow label
  CHECK(get16(r, 18) == body.size() + 4);
  CHECK(r[20] == 58);
  CHECK(r[21] == 64);  // config ttl
  CHECK(get_ip6(r, 22) == kOurIp6);
  CHECK(get_ip6(r, 38) == kPeerIp6);
  CHECK(r[54] == 129);
  CHECK(r[55] == 0);
  CHECK(std::equal(body.begin(), body.end(), r.begin() + 58));
  const size_t icmp_len = body.size() + 4;
  CHECK(ref_checksum(r.data() + 54, icmp_len,
                     ref_pseudo6(kOurIp6, kPeerIp6, static_cast<uint32_t>(icmp_len), 58)) == 0);
  CHECK(s.counters().rx_icmp6_echo_requests == 1);
  CHECK(s.counters().tx_icmp6_echo_replies == 1);

  // Bad checksum, truncated echo, unhandled types, to a group, turned off.
  auto bad = req;
  bad[60] ^= 1;
  CHECK(drop_of(s, bad) == RxDrop::kIcmp6BadChecksum);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(128, 0, {0, 1}, kPeerIp6, kOurIp6))) ==
        RxDrop::kIcmp6Truncated);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(129, 0, body, kPeerIp6, kOurIp6))) ==
        RxDrop::kIcmp6Unhandled);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(128, 1, body, kPeerIp6, kOurIp6))) ==
        RxDrop::kIcmp6Unhandled);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(1, 4, body, kPeerIp6, kOurIp6))) ==
        RxDrop::kIcmp6Unhandled);
  Ip6Opts ra;
  ra.src = kGwIp6;
  ra.dst = Ipv6Addr::all_nodes();
  ra.eth_dst = kAllNodesMac;
  ra.hop_limit = 255;
  // A Router Advertisement (lifetime 0) is taken (router discovery), a Redirect is not.
  CHECK(drop_of(s, ipv6_frame(58, icmp6(134, 0, std::vector<uint8_t>(12, 0), kGwIp6, ra.dst),
                              ra)) == RxDrop::kNone);
  CHECK(s.counters().rx_ra == 1);
  CHECK(drop_of(s, ipv6_frame(58, icmp6(137, 0, std::vector<uint8_t>(36, 0), kGwIp6, ra.dst),
                              ra)) == RxDrop::kIcmp6Unhandled);
  Ip6Opts group;
  group.dst = Ipv6Addr::all_nodes();
  group.eth_dst = kAllNodesMac;
  CHECK(drop_of(s, ipv6_frame(58, icmp6(128, 0, body, kPeerIp6, group.dst), group)) ==
        RxDrop::kIpv6NotForUs);
  std::vector<uint8_t> small(100);
  const RxResult tight = s.on_rx_frame(req, 0, small);
  CHECK(tight.drop == RxDrop::kReplyBufferTooSmall);

  NetStackConfig c = config6();
  c.answer_ping = false;
  NetStack quiet(c);
  CHECK(drop_of(quiet, req) == RxDrop::kIcmpDisabled);
}

TEST_CASE("ICMPv6 echo and NS from a group source MAC get no reply", "[stack6][l2]") {
  // A reply to 33:33:.. or ff:ff:.. would reach every host on the link.
  NetStack s(config6());
  const MacAddr bad_sources[] = {MacAddr{{0x33, 0x33, 0, 0, 0, 1}}, MacAddr::broadcast()};
  for (const MacAddr& src : bad_sources) {
    Ip6Opts o;
    o.eth_src = src;
    CHECK(drop_of(s, ipv6_frame(58, icmp6(128, 0, {0, 1, 0, 1, 9, 9}, o.src, o.dst), o)) ==
          RxDrop::kL2BadSource);
    Ip6Opts ns;
    ns.src = kPeerLl6;
    ns.dst = Ipv6Addr::solicited_node(kOurIp6);
    ns.eth_dst = kOurSolicitedMac;
    ns.hop_limit = 255;
    ns.eth_src = src;
    CHECK(drop_of(s, ns_frame(kOurIp6, lla_option(1, kPeerMac), ns)) == RxDrop::kL2BadSource);
  }
  CHECK(s.counters().drops(RxDrop::kL2BadSource) == 4);
  CHECK(s.counters().tx_icmp6_echo_replies == 0);
  CHECK(s.counters().tx_na == 0);
  CHECK(s.neighbours6().size() == 0);
}

TEST_CASE("UDP over IPv6 is delivered with offsets", "[stack6][udp]") {
  NetStack s(config6());
  const std::vector<uint8_t> payload = {0x64, 0, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8};
  Ip6Opts o;
  o.traffic_class = 0x03;  // CE
  auto f = ipv6_frame(17, udp6_segment(50000, 4791, payload, false), o);
  f.resize(f.size() + 6, 0);  // Ethernet padding
  const Rx rx = receive(s, f);
  REQUIRE(rx.result.verdict == RxVerdict::kDeliverUdp);
  const UdpDatagram& d = rx.result.udp;
  CHECK(d.ipv6);
  CHECK(d.src_mac == kPeerMac);
  CHECK(d.src_ip6 == kPeerIp6);
  CHECK(d.dst_ip6 == kOurIp6);
  CHECK(d.src_ip.is_zero());
  CHECK(d.dst_ip.is_zero());
  CHECK(d.src_port == 50000);
  CHECK(d.dst_port == 4791);
  CHECK(d.tos == 0x03);
  CHECK(d.ip_offset == 14);
  CHECK(d.payload_offset == 62);
  CHECK(d.payload_len == payload.size());
  CHECK(std::equal(payload.begin(), payload.end(), f.begin() + d.payload_offset));
  CHECK(s.counters().rx_udp_delivered == 1);
  CHECK(s.counters().rx_udp6_delivered == 1);
  // The RoCE fast path learns from IPv6 datagrams too (roce_expect_test.cc).
  conduit::wire::ParseOptions opt;
  const conduit::wire::RxExpect e = s.make_roce_expect(f, d, opt);
  CHECK(e.usable);
  CHECK(e.ipv6);

  // A correct non-zero checksum, a wrong one, and the check turned off.
  auto good = ipv6_frame(17, udp6_segment(1, kCmPort, {9, 8, 7}, true));
  REQUIRE(get16(good, 60) != 0);
  CHECK(receive(s, good).result.verdict == RxVerdict::kDeliverUdp);
  auto bad = good;
  bad.back() ^= 0x01;
  CHECK(drop_of(s, bad) == RxDrop::kUdpBadChecksum);
  NetStackConfig c = config6();
  c.verify_udp_checksum = false;
  NetStack lax(c);
  CHECK(receive(lax, bad).result.verdict == RxVerdict::kDeliverUdp);

  CHECK(drop_of(s, ipv6_frame(17, udp6_segment(1, 4792, {1}, false))) == RxDrop::kUdpPortClosed);
  auto len = ipv6_frame(17, udp6_segment(1, 4791, {1, 2}, false));
  len[14 + 40 + 5] = 11;  // UDP length beyond the payload
  CHECK(drop_of(s, len) == RxDrop::kUdpTruncated);
  len[14 + 40 + 5] = 7;
  CHECK(drop_of(s, len) == RxDrop::kUdpTruncated);
  CHECK(drop_of(s, ipv6_frame(17, {0, 1, 0x12, 0xb7})) == RxDrop::kUdpTruncated);
}

TEST_CASE("Bad IPv6 headers are dropped by reason", "[stack6][ipv6]") {
  NetStack s(config6());
  const auto good = ipv6_frame(17, udp6_segment(1, 4791, {1, 2, 3, 4}, false));
  REQUIRE(receive(s, good).result.verdict == RxVerdict::kDeliverUdp);
  auto f = good;
  f.resize(14 + 39);
  CHECK(drop_of(s, f) == RxDrop::kIpv6Truncated);
  f = good;
  f.resize(f.size() - 1);
  CHECK(drop_of(s, f) == RxDrop::kIpv6Truncated);
  f = good;
  f[14] = 0x40;
  CHECK(drop_of(s, f) == RxDrop::kIpv6BadVersion);

  // Extension headers (not walked), fragments included; other protocols.
  const auto udp = udp6_segment(1, 4791, {1, 2, 3, 4}, false);
  std::vector<uint8_t> hbh = {17, 0, 1, 4, 0, 0, 0, 0};  // hop-by-hop, PadN
  hbh.insert(hbh.end(), udp.begin(), udp.end());
  CHECK(drop_of(s, ipv6_frame(0, hbh)) == RxDrop::kIpv6ExtHeader);
  std::vector<uint8_t> frag = {17, 0, 0, 0, 0, 0, 0, 1};  // first fragment, M = 0
  frag.insert(frag.end(), udp.begin(), udp.end());
  CHECK(drop_of(s, ipv6_frame(44, frag)) == RxDrop::kIpv6ExtHeader);
  for (uint8_t nh : {43, 60, 50, 51, 135}) {
    INFO(int{nh});
    CHECK(drop_of(s, ipv6_frame(nh, hbh)) == RxDrop::kIpv6ExtHeader);
  }
  CHECK(drop_of(s, ipv6_frame(6, std::vector<uint8_t>(20, 0))) == RxDrop::kIpUnknownProtocol);
  CHECK(drop_of(s, ipv6_frame(59, {})) == RxDrop::kIpUnknownProtocol);  // no next header
  CHECK(s.counters().drops(RxDrop::kIpv6ExtHeader) == 7);

  // Sources.
  auto from = [&](const Ipv6Addr& src) {
    Ip6Opts o;
    o.src = src;
    return ipv6_frame(17, udp6_segment(1, 4791, {1}, false, src), o);
  };
  CHECK(drop_of(s, from(kOurIp6)) == RxDrop::kIpv6BadSource);
  CHECK(drop_of(s, from(Ipv6Addr::all_nodes())) == RxDrop::kIpv6BadSource);
  CHECK(drop_of(s, from(*Ipv6Addr::parse("::1"))) == RxDrop::kIpv6BadSource);
  CHECK(drop_of(s, from(*Ipv6Addr::parse("::ffff:198.18.0.2"))) == RxDrop::kIpv6BadSource);
  CHECK(receive(s, from(kPeerLl6)).result.verdict == RxVerdict::kDeliverUdp);
  CHECK(receive(s, from(kRemoteIp6)).result.verdict == RxVerdict::kDeliverUdp);

  // Destinations: only addr6; the groups carry only NDP.
  auto to = [&](const Ipv6Addr& dst, MacAddr mac) {
    Ip6Opts o;
    o.dst = dst;
    o.eth_dst = mac;
    return ipv6_frame(17, udp6_segment(1, 4791, {1}, false, kPeerIp6, dst), o);
  };
  CHECK(drop_of(s, to(kPeerIp6, kOurMac)) == RxDrop::kIpv6NotForUs);
  CHECK(drop_of(s, to(*Ipv6Addr::parse("2001:db8:0:1::1:1"), kOurMac)) == RxDrop::kIpv6NotForUs);
  CHECK(drop_of(s, to(Ipv6Addr::all_nodes(), kAllNodesMac)) == RxDrop::kIpv6NotForUs);
  CHECK(drop_of(s, to(Ipv6Addr::solicited_node(kOurIp6), kOurSolicitedMac)) ==
        RxDrop::kIpv6NotForUs);
  CHECK(drop_of(s, to(*Ipv6Addr::parse("ff02::2"), kOurMac)) == RxDrop::kIpv6NotForUs);
}

TEST_CASE("IPv6 off: every IPv6 frame is dropped and counted", "[stack6][ipv6]") {
  NetStackConfig c = config6();
  c.addr6.reset();
  c.gateway6.reset();
  NetStack s(c);
  CHECK(drop_of(s, ns_for_us()) == RxDrop::kIpv6Off);
  CHECK(drop_of(s, ipv6_frame(17, udp6_segment(1, 4791, {1}, false))) == RxDrop::kIpv6Off);
  auto other = ipv6_frame(17, udp6_segment(1, 4791, {1}, false));
  other[5] = 0x77;
  CHECK(drop_of(s, other) == RxDrop::kIpv6Off);
  CHECK(s.counters().drops(RxDrop::kIpv6Off) == 3);
  CHECK_FALSE(s.next_hop6(kPeerIp6));
  CHECK(s.resolve6(kPeerIp6, 0, 1).status == Resolve::kDropped);
  CHECK_FALSE(s.add_static_neighbour6(kPeerIp6, kPeerMac));
  s.announce();
  CHECK(take_all(s).size() == 1);  // the gratuitous ARP only
  CHECK(s.counters().no_route == 2);
}

TEST_CASE("A VLAN stack takes tagged IPv6 and tags its NDP", "[stack6][l2]") {
  NetStackConfig c = config6();
  c.vlan_id = 100;
  c.vlan_pcp = 5;
  NetStack s(c);
  CHECK(drop_of(s, ns_for_us()) == RxDrop::kVlanMismatch);
  CHECK(drop_of(s, ns_for_us(uint16_t{101})) == RxDrop::kVlanMismatch);
  const Rx rx = receive(s, ns_for_us(uint16_t{100}));
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  REQUIRE(rx.reply.size() == 90);
  CHECK(get16(rx.reply, 12) == 0x8100);
  CHECK(get16(rx.reply, 14) == (5 << 13 | 100));
  CHECK(get16(rx.reply, 16) == 0x86DD);
  check_ndp(rx.reply, 18, 136, 0x60000000u, kPeerIp6, kOurIp6);

  s.resolve6(kGwIp6, 0, 3);
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  REQUIRE(actions[0].len == 90);
  const auto ns = bytes_of(actions[0]);
  CHECK(get16(ns, 14) == (5 << 13 | 100));
  check_ndp(ns, 18, 135, 0, Ipv6Addr::solicited_node(kGwIp6), kGwIp6);

  Ip6Opts o;
  o.vid = uint16_t{100};
  const Rx u = receive(s, ipv6_frame(17, udp6_segment(1, 4791, {5}, true), o));
  REQUIRE(u.result.verdict == RxVerdict::kDeliverUdp);
  CHECK(u.result.udp.ip_offset == 18);
  CHECK(u.result.udp.payload_offset == 66);
}

TEST_CASE("Priority-tagged (VID 0) NS is answered on an untagged port", "[stack6][l2]") {
  NetStack s(config6());
  const Rx rx = receive(s, ns_for_us(uint16_t{3 << 13}));
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(get16(rx.reply, 12) == 0x86DD);  // untagged, as this port sends
  CHECK(s.counters().tx_na == 1);
}

TEST_CASE("MAC filter for 33:33 groups", "[stack6][l2]") {
  NetStack s(config6());
  // Our solicited-node group MAC and all-nodes are ours.
  CHECK(receive(s, ns_for_us()).result.verdict == RxVerdict::kReply);
  Ip6Opts all;
  all.dst = Ipv6Addr::all_nodes();
  all.eth_dst = kAllNodesMac;
  CHECK(receive(s, na_frame(0x20000000u, kPeerIp6, {}, all)).result.verdict ==
        RxVerdict::kConsumed);
  // Other groups are not.
  Ip6Opts other = all;
  other.eth_dst = MacAddr{{0x33, 0x33, 0, 0, 0, 2}};
  CHECK(drop_of(s, na_frame(0x20000000u, kPeerIp6, {}, other)) == RxDrop::kNotOurMac);
  other.eth_dst = MacAddr{{0x33, 0x33, 0xff, 0, 0, 2}};  // the peer's solicited-node group
  CHECK(drop_of(s, na_frame(0x20000000u, kPeerIp6, {}, other)) == RxDrop::kNotOurMac);
  other.eth_dst = MacAddr::broadcast();
  CHECK(drop_of(s, na_frame(0x20000000u, kPeerIp6, {}, other)) == RxDrop::kNotOurMac);
  // 33:33 MACs carry only IPv6.
  CHECK(drop_of(s, arp_frame(1, kAllNodesMac, kPeerMac, kPeerIp, MacAddr{}, kOurIp)) ==
        RxDrop::kNotOurMac);
  auto v4 = ipv4_frame(17, udp_segment(1, 4791, {1}, false));
  for (size_t i = 0; i < 6; ++i) v4[i] = kOurSolicitedMac.bytes[i];
  CHECK(drop_of(s, v4) == RxDrop::kNotOurMac);
  CHECK(s.counters().drops(RxDrop::kNotOurMac) == 5);
}

TEST_CASE("IPv6 routing: on-link by prefix or link-local scope, else gateway6", "[stack6][route]") {
  NetStack s(config6());
  CHECK(s.next_hop6(kPeerIp6) == kPeerIp6);
  CHECK(s.next_hop6(*Ipv6Addr::parse("2001:db8:0:1:ffff::9")) ==
        *Ipv6Addr::parse("2001:db8:0:1:ffff::9"));
  CHECK(s.next_hop6(kPeerLl6) == kPeerLl6);  // fe80::/10 is always on-link
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
  CHECK(s.next_hop6(*Ipv6Addr::parse("2001:db8:0:2::1")) == kGwIp6);
  CHECK(s.counters().no_route == 0);
  CHECK_FALSE(s.next_hop6(kOurIp6));
  CHECK_FALSE(s.next_hop6(Ipv6Addr{}));
  CHECK_FALSE(s.next_hop6(*Ipv6Addr::parse("::1")));
  CHECK_FALSE(s.next_hop6(Ipv6Addr::all_nodes()));
  CHECK_FALSE(s.next_hop6(*Ipv6Addr::parse("::ffff:198.18.0.2")));
  CHECK(s.counters().no_route == 5);
  // resolve6 takes on-link peers only.
  CHECK(s.resolve6(kRemoteIp6, 0, 1).status == Resolve::kDropped);
  CHECK(s.resolve6(Ipv6Addr::all_nodes(), 0, 1).status == Resolve::kDropped);
  CHECK(s.resolve6(kOurIp6, 0, 1).status == Resolve::kDropped);
  CHECK(s.counters().no_route == 8);
  CHECK(s.pending_actions() == 0);

  // Without gateway6 off-link is unreachable.
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack flat(c);
  CHECK_FALSE(flat.next_hop6(kRemoteIp6));
  CHECK(flat.counters().no_route == 1);

  // A link-local addr6: only fe80::/10 is on-link (plus its own /64).
  NetStackConfig ll = config6();
  ll.addr6 = *Ipv6Addr::parse("fe80::1");
  ll.gateway6.reset();
  NetStack lls(ll);
  CHECK(lls.next_hop6(*Ipv6Addr::parse("fe80::1:2:3:4")) == *Ipv6Addr::parse("fe80::1:2:3:4"));
  CHECK(lls.next_hop6(*Ipv6Addr::parse("febf::9")) == *Ipv6Addr::parse("febf::9"));
  CHECK_FALSE(lls.next_hop6(kPeerIp6));
  // prefix_len6 128: only link-local neighbours are on-link.
  NetStackConfig host = config6();
  host.prefix_len6 = 128;
  NetStack hs(host);
  CHECK(hs.next_hop6(kPeerIp6) == kGwIp6);
  CHECK(hs.next_hop6(kPeerLl6) == kPeerLl6);
}

TEST_CASE("Static IPv6 neighbours resolve without NDP", "[stack6][ndp]") {
  NetStackConfig c = config6();
  c.static_neighbours6 = {{kGwIp6, kGwMac}};
  NetStack s(c);
  const auto r = s.resolve6(*s.next_hop6(kRemoteIp6), 0, 9);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kGwMac);
  CHECK(s.pending_actions() == 0);
  // An NA does not move a static entry.
  Ip6Opts from_gw;
  from_gw.src = kGwIp6;
  receive(s, na_frame(0x60000000u, kGwIp6, lla_option(2, kPeerMac), from_gw));
  CHECK(s.neighbours6().find(kGwIp6)->mac == kGwMac);
  CHECK(s.add_static_neighbour6(kPeerIp6, kPeerMac));
  CHECK_FALSE(s.add_static_neighbour6(kOurIp6, kPeerMac));
  CHECK_FALSE(s.add_static_neighbour6(Ipv6Addr::all_nodes(), kPeerMac));
  CHECK(s.remove_neighbour6(kGwIp6));
  CHECK_FALSE(s.remove_neighbour6(kGwIp6));
  CHECK(s.resolve6(kGwIp6, 0, 9).status == Resolve::kQueued);
}

TEST_CASE("announce() adds an unsolicited NA when IPv6 is on", "[stack6][ndp]") {
  NetStack s(config6());
  s.announce();
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 2);
  CHECK(get16(bytes_of(actions[0]), 12) == 0x0806);
  CHECK(actions[1].kind == NetAction::Kind::kTransmit);
  CHECK(actions[1].ipv6);
  const auto na = bytes_of(actions[1]);
  CHECK(get_mac(na, 0) == kAllNodesMac);
  check_ndp(na, 14, 136, 0x20000000u, Ipv6Addr::all_nodes(), kOurIp6);
  CHECK(s.counters().tx_na == 1);
  // Looped back, our own NA is dropped (source is ours).
  CHECK(drop_of(s, na) == RxDrop::kIpv6BadSource);
}

namespace {
// A Router Advertisement from `router` (link-local) to all nodes: hop limit 255 unless
// overridden, router lifetime `lifetime_s`, then `options`.
std::vector<uint8_t> ra_frame(const Ipv6Addr& router, uint16_t lifetime_s,
                              const std::vector<uint8_t>& options, uint8_t hop_limit = 255,
                              uint8_t code = 0, uint32_t reachable_ms = 0, uint32_t retrans_ms = 0,
                              uint8_t cur_hop_limit = 64) {
  Ip6Opts o;
  o.src = router;
  o.dst = Ipv6Addr::all_nodes();
  o.eth_dst = kAllNodesMac;
  o.eth_src = kGwMac;
  o.hop_limit = hop_limit;
  std::vector<uint8_t> body = {cur_hop_limit, 0};  // cur hop limit, flags
  put16(body, lifetime_s);
  put32(body, reachable_ms);
  put32(body, retrans_ms);
  body.insert(body.end(), options.begin(), options.end());
  return ipv6_frame(58, icmp6(134, code, body, router, Ipv6Addr::all_nodes()), o);
}
}  // namespace

TEST_CASE("Router discovery: an RS at start, the RA's router is the default next hop",
          "[stack6][ndp][route]") {
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack s(c);
  CHECK_FALSE(s.next_hop6(kRemoteIp6));  // off-link, no router yet

  // announce(): ARP, NA, then a Router Solicitation to ff02::2 with our MAC.
  s.announce();
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 3);
  const auto rs = bytes_of(actions[2]);
  REQUIRE(rs.size() == 14 + 40 + 16);
  CHECK(get_mac(rs, 0) == MacAddr{{0x33, 0x33, 0, 0, 0, 2}});
  CHECK(get16(rs, 12) == 0x86DD);
  CHECK(get32(rs, 14) == 0x60000000u);
  CHECK(get16(rs, 18) == 16);  // payload length
  CHECK(rs[20] == 58);
  CHECK(rs[21] == 255);
  CHECK(get_ip6(rs, 22) == kOurIp6);
  CHECK(get_ip6(rs, 38) == *Ipv6Addr::parse("ff02::2"));
  CHECK(rs[54] == 133);
  CHECK(rs[55] == 0);
  CHECK(get32(rs, 58) == 0);  // reserved
  CHECK(rs[62] == 1);         // source link-layer address option
  CHECK(rs[63] == 1);
  CHECK(get_mac(rs, 64) == kOurMac);
  CHECK(ref_checksum(rs.data() + 54, 16,
                     ref_pseudo6(kOurIp6, *Ipv6Addr::parse("ff02::2"), 16, 58)) == 0);
  CHECK(s.counters().tx_rs == 1);

  // The router's RA (lifetime 1800 s, SLLA): it is the next hop for off-link peers, and its
  // MAC is known (no NS).
  const Rx rx = receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 5 * kSec);
  CHECK(rx.result.verdict == RxVerdict::kConsumed);
  CHECK(s.counters().rx_ra == 1);
  REQUIRE(s.learned_router6());
  CHECK(*s.learned_router6() == kGwIp6);
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
  CHECK(s.next_hop6(kPeerIp6) == kPeerIp6);  // on-link peers stay direct
  const auto r = s.resolve6(kGwIp6, 5 * kSec, 7);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kGwMac);
  CHECK(s.counters().tx_ns == 0);

  // Its lifetime runs out: off-link is unreachable again.
  s.poll_timers(5 * kSec + 1799 * kSec);
  CHECK(s.learned_router6());
  s.poll_timers(5 * kSec + 1800 * kSec);
  CHECK_FALSE(s.learned_router6());
  CHECK_FALSE(s.next_hop6(kRemoteIp6));

  // Learned again, then withdrawn with lifetime 0 (a router going away).
  receive(s, ra_frame(kGwIp6, 600, {}), 2000 * kSec);
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
  receive(s, ra_frame(kPeerLl6, 0, {}), 2001 * kSec);  // another router's 0: not ours
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
  receive(s, ra_frame(kGwIp6, 0, {}), 2002 * kSec);
  CHECK_FALSE(s.learned_router6());
  CHECK(s.counters().rx_ra == 4);
}

TEST_CASE("Router discovery: an NS flood cannot evict the RA's router, nor gateway6",
          "[stack6][ndp][route]") {
  // The router's entry is made by a peer's packet (its RA; gateway6's own NS), not by a
  // resolve6() of ours: before its first use it must still outlast a flood of NS from more
  // on-link sources than the table holds, or off-link traffic waits for it to be found again.
  for (const bool configured : {false, true}) {
    INFO((configured ? "gateway6, which sent us an NS" : "the router of an RA"));
    NetStackConfig c = config6();
    c.neighbour.capacity = 256;
    if (!configured) c.gateway6.reset();
    NetStack s(c);
    if (configured) {
      Ip6Opts o;
      o.src = kGwIp6;
      o.dst = Ipv6Addr::solicited_node(kOurIp6);
      o.eth_dst = kOurSolicitedMac;
      o.eth_src = kGwMac;
      REQUIRE(receive(s, ns_frame(kOurIp6, lla_option(1, kGwMac), o), 0).result.verdict ==
              RxVerdict::kReply);
    } else {
      REQUIRE(receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 0).result.verdict ==
              RxVerdict::kConsumed);
    }
    REQUIRE(s.neighbours6().find(kGwIp6));
    ns_flood(s, 300);
    take_all(s);
    CHECK(s.neighbours6().size() == 256);
    CHECK(s.neighbours6().counters().evicted > 0);  // the flood churned the others
    const auto info = s.neighbours6().find(kGwIp6);
    REQUIRE(info);
    CHECK(info->state == NeighbourState::kReachable);
    CHECK_FALSE(info->evictable);
    // Off-link traffic goes to the router at once, no NS.
    const auto hop = s.next_hop6(kRemoteIp6);
    REQUIRE(hop);
    CHECK(*hop == kGwIp6);
    const auto r = s.resolve6(*hop, 2 * kSec, 7);
    CHECK(r.status == Resolve::kResolved);
    CHECK(r.mac == kGwMac);
  }
}

TEST_CASE("Router discovery: a router that withdraws, is replaced or times out loses its keep",
          "[stack6][ndp][route]") {
  // Only the current router is our next hop: once an RA withdraws it (lifetime 0), another
  // router's RA replaces it or its lifetime runs out, its entry is a peer's like any other and
  // an NS flood may evict it. (The entry itself stays until then: it is still a neighbour.)
  const MacAddr other_mac{{0x02, 0, 0, 0, 0, 0xfd}};
  for (const int how : {0, 1, 2}) {
    INFO((how == 0 ? "withdrawn" : how == 1 ? "replaced" : "timed out"));
    NetStackConfig c = config6();
    c.gateway6.reset();
    c.neighbour.capacity = 256;
    NetStack s(c);
    REQUIRE(receive(s, ra_frame(kGwIp6, 30, lla_option(1, kGwMac)), 0).result.verdict ==
            RxVerdict::kConsumed);
    REQUIRE(s.learned_router6() == kGwIp6);
    REQUIRE_FALSE(s.neighbours6().find(kGwIp6)->evictable);
    // Confirmed by its answer to our probe (R | S): reachable for 60 s.
    Ip6Opts from_gw;
    from_gw.src = kGwIp6;
    from_gw.eth_src = kGwMac;
    receive(s, na_frame(0xC0000000u, kGwIp6, {}, from_gw), 0);
    REQUIRE(s.neighbours6().find(kGwIp6)->deadline_ns == NeighbourConfig{}.reachable_ns);
    if (how == 0) {
      receive(s, ra_frame(kGwIp6, 0, lla_option(1, kGwMac)), kSec);
      CHECK_FALSE(s.learned_router6());
    } else if (how == 1) {
      receive(s, ra_frame(kPeerLl6, 1800, lla_option(1, other_mac)), kSec);
      CHECK(s.learned_router6() == kPeerLl6);
    } else {
      s.poll_timers(30 * kSec);
      CHECK_FALSE(s.learned_router6());
    }
    auto old_router = s.neighbours6().find(kGwIp6);
    REQUIRE(old_router);  // still reachable (60 s), no longer kept
    CHECK(old_router->state == NeighbourState::kReachable);
    CHECK(old_router->evictable);
    ns_flood(s, 300, 31 * kSec);
    take_all(s);
    CHECK(s.neighbours6().counters().table_full_drops == 0);
    CHECK_FALSE(s.neighbours6().find(kGwIp6));  // the least recently used: evicted first
    if (how == 1) {
      // The new router is kept through the flood, and is the next hop at once.
      const auto info = s.neighbours6().find(kPeerLl6);
      REQUIRE(info);
      CHECK_FALSE(info->evictable);
      CHECK(s.next_hop6(kRemoteIp6) == kPeerLl6);
      const auto r = s.resolve6(kPeerLl6, 32 * kSec, 7);
      CHECK(r.status == Resolve::kResolved);
      CHECK(r.mac == other_mac);
    }
  }
}

TEST_CASE(
    "Router discovery: gateway6 stays kept when its RA says lifetime 0 or another replaces it",
    "[stack6][ndp][route]") {
  // gateway6 is the policy's next hop whatever RAs say about it.
  for (const bool replaced : {false, true}) {
    INFO((replaced ? "another router's RA" : "its own RA with lifetime 0"));
    NetStackConfig c = config6();  // gateway6 fe80::fe
    c.neighbour.capacity = 256;
    NetStack s(c);
    REQUIRE(receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 0).result.verdict ==
            RxVerdict::kConsumed);
    REQUIRE(s.learned_router6() == kGwIp6);
    if (replaced) {
      receive(s, ra_frame(kPeerLl6, 1800, lla_option(1, kPeerMac)), kSec);
      CHECK(s.learned_router6() == kPeerLl6);
    } else {
      receive(s, ra_frame(kGwIp6, 0, lla_option(1, kGwMac)), kSec);
      CHECK_FALSE(s.learned_router6());
    }
    ns_flood(s, 300, 2 * kSec);
    take_all(s);
    const auto info = s.neighbours6().find(kGwIp6);
    REQUIRE(info);
    CHECK_FALSE(info->evictable);
    CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
    const auto r = s.resolve6(kGwIp6, 3 * kSec, 7);
    CHECK(r.status == Resolve::kResolved);
    CHECK(r.mac == kGwMac);
  }
}

TEST_CASE("Router discovery: with gateway6 an RA's router is not kept (not our next hop)",
          "[stack6][ndp][route]") {
  NetStackConfig c = config6();  // gateway6 fe80::fe
  c.neighbour.capacity = 256;
  NetStack s(c);
  REQUIRE(receive(s, ra_frame(kPeerLl6, 1800, lla_option(1, kPeerMac)), 0).result.verdict ==
          RxVerdict::kConsumed);
  CHECK(s.learned_router6() == kPeerLl6);
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);
  // Its RA made an entry (RFC 4861 6.3.4), and its NS refreshes it: a peer's, evictable.
  Ip6Opts o;
  o.src = kPeerLl6;
  o.dst = Ipv6Addr::solicited_node(kOurIp6);
  o.eth_dst = kOurSolicitedMac;
  o.eth_src = kPeerMac;
  REQUIRE(receive(s, ns_frame(kOurIp6, lla_option(1, kPeerMac), o), kSec / 2).result.verdict ==
          RxVerdict::kReply);
  const auto info = s.neighbours6().find(kPeerLl6);
  REQUIRE(info);
  CHECK(info->evictable);
  ns_flood(s, 300, kSec);
  take_all(s);
  CHECK_FALSE(s.neighbours6().find(kPeerLl6));
  CHECK(s.neighbours6().counters().table_full_drops == 0);
}

TEST_CASE("Router discovery: gateway6 wins, no RS; bad RAs are dropped by reason",
          "[stack6][ndp][route]") {
  NetStack s(config6());  // gateway6 fe80::fe
  s.announce();
  CHECK(take_all(s).size() == 2);  // ARP and NA, no RS
  CHECK(s.counters().tx_rs == 0);
  receive(s, ra_frame(kPeerLl6, 1800, {}));
  CHECK(s.counters().rx_ra == 1);
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);  // the policy's router, not the advertised one

  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack d(c);
  CHECK(drop_of(d, ra_frame(kGwIp6, 1800, {}, 64)) == RxDrop::kNdpBadHopLimit);
  CHECK(drop_of(d, ra_frame(kGwIp6, 1800, {}, 255, 1)) == RxDrop::kNdpMalformed);
  // Not from a link-local address (RFC 4861 section 6.1.2).
  CHECK(drop_of(d, ra_frame(kPeerIp6, 1800, {})) == RxDrop::kNdpMalformed);
  // An option of length 0.
  CHECK(drop_of(d, ra_frame(kGwIp6, 1800, {1, 0, 0, 0, 0, 0, 0, 0})) == RxDrop::kNdpMalformed);
  // Truncated: 12 bytes of RA body.
  auto shortra = ra_frame(kGwIp6, 1800, {});
  shortra.resize(shortra.size() - 4);
  CHECK(drop_of(d, shortra) != RxDrop::kNone);
  CHECK(d.counters().rx_ra == 0);
  CHECK_FALSE(d.learned_router6());
}

TEST_CASE("Bad IPv6 configuration is rejected with a reason", "[stack6]") {
  auto rejects = [](auto mutate, const char* what) {
    NetStackConfig c = config6();
    mutate(c);
    try {
      NetStack s(c);
      FAIL("accepted: " << what);
    } catch (const std::invalid_argument& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  rejects([](NetStackConfig& c) { c.addr6 = Ipv6Addr{}; }, "addr6");
  rejects([](NetStackConfig& c) { c.addr6 = *Ipv6Addr::parse("::1"); }, "addr6");
  rejects([](NetStackConfig& c) { c.addr6 = Ipv6Addr::all_nodes(); }, "addr6");
  rejects([](NetStackConfig& c) { c.addr6 = *Ipv6Addr::parse("::ffff:1.2.3.4"); }, "addr6");
  rejects([](NetStackConfig& c) { c.prefix_len6 = 0; }, "prefix_len6");
  rejects([](NetStackConfig& c) { c.prefix_len6 = 129; }, "prefix_len6");
  rejects([](NetStackConfig& c) { c.gateway6 = kRemoteIp6; }, "gateway6");
  rejects([](NetStackConfig& c) { c.gateway6 = kOurIp6; }, "gateway6");
  rejects([](NetStackConfig& c) { c.gateway6 = Ipv6Addr::all_nodes(); }, "gateway6");
  rejects(
      [](NetStackConfig& c) {
        c.static_neighbours6 = {{kPeerIp6, MacAddr{}}};
      },
      "static_neighbours6");
  rejects(
      [](NetStackConfig& c) {
        c.static_neighbours6 = {{kOurIp6, kPeerMac}};
      },
      "static_neighbours6");
  rejects(
      [](NetStackConfig& c) {
        c.addr6.reset();
        c.gateway6 = kGwIp6;
      },
      "gateway6");
}

namespace {
// RFC 4861 section 4.6.2: Prefix Information (32 bytes).
std::vector<uint8_t> prefix_option(const Ipv6Addr& prefix, uint8_t len, uint8_t flags,
                                   uint32_t valid_s, uint8_t units = 4) {
  std::vector<uint8_t> o = {3, units, len, flags};
  put32(o, valid_s);
  put32(o, valid_s);  // preferred lifetime
  put32(o, 0);        // reserved
  o.insert(o.end(), prefix.bytes.begin(), prefix.bytes.end());
  o.resize(size_t{units} * 8, 0);
  return o;
}
// RFC 4861 section 4.6.4: MTU (8 bytes).
std::vector<uint8_t> mtu_option(uint32_t mtu, uint8_t units = 1) {
  std::vector<uint8_t> o = {5, units, 0, 0};
  put32(o, mtu);
  o.resize(size_t{units} * 8, 0);
  return o;
}
std::vector<uint8_t> joined(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}
constexpr Ipv6Addr kAdvertised = Ipv6Addr::from_groups({0x2001, 0xdb8, 0x5, 0, 0, 0, 0, 0});
constexpr Ipv6Addr kInAdvertised = Ipv6Addr::from_groups({0x2001, 0xdb8, 0x5, 0, 0, 0, 0, 7});
}  // namespace

TEST_CASE("Router discovery: on-link prefixes from RAs, for their valid lifetime",
          "[stack6][ndp][route]") {
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack s(c);
  receive(s, ra_frame(kGwIp6, 1800, {}), kSec);
  CHECK(s.next_hop6(kInAdvertised) == kGwIp6);  // off-link: through the router

  // L set, valid 600 s: its addresses are on-link (resolved by NS, not sent to the router).
  const auto pio = prefix_option(kAdvertised, 64, 0x80 | 0x40, 600);
  CHECK(receive(s, ra_frame(kGwIp6, 1800, pio), 2 * kSec).result.verdict == RxVerdict::kConsumed);
  REQUIRE(s.learned_prefixes6().size() == 1);
  CHECK(s.learned_prefixes6()[0].len == 64);
  CHECK(s.counters().ra_prefixes == 1);
  CHECK(s.next_hop6(kInAdvertised) == kInAdvertised);
  CHECK(s.next_hop6(kRemoteIp6) == kGwIp6);  // other prefixes stay off-link
  CHECK(s.resolve6(kInAdvertised, 2 * kSec, 5).status == Resolve::kQueued);

  // Refreshed at 500 s for another 600 s: still on-link at 1000 s, gone at 1100 s.
  receive(s, ra_frame(kGwIp6, 1800, pio), 500 * kSec);
  CHECK(s.counters().ra_prefixes == 1);  // the same prefix, refreshed
  s.poll_timers(1000 * kSec);
  CHECK(s.next_hop6(kInAdvertised) == kInAdvertised);
  s.poll_timers(1100 * kSec);
  CHECK(s.learned_prefixes6().empty());
  CHECK(s.next_hop6(kInAdvertised) == kGwIp6);

  // Valid lifetime 0 removes it at once; an infinite one (0xffffffff) never runs out.
  receive(s, ra_frame(kGwIp6, 1800, pio), 1200 * kSec);
  CHECK(s.next_hop6(kInAdvertised) == kInAdvertised);
  receive(s, ra_frame(kGwIp6, 1800, prefix_option(kAdvertised, 64, 0x80, 0)), 1201 * kSec);
  CHECK(s.learned_prefixes6().empty());
  receive(s, ra_frame(kGwIp6, 1800, prefix_option(kAdvertised, 64, 0x80, 0xFFFFFFFFu)),
          1202 * kSec);
  s.poll_timers(UINT64_MAX - 1);
  CHECK(s.next_hop6(kInAdvertised) == kInAdvertised);
}

TEST_CASE("Router discovery: prefixes and MTUs an RA may not set are ignored and counted",
          "[stack6][ndp][route]") {
  NetStackConfig c = config6();
  c.gateway6.reset();
  c.link_mtu = 1500;
  NetStack s(c);
  const Ipv6Addr ll = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0, 0, 0, 0});
  const Ipv6Addr mc = Ipv6Addr::from_groups({0xff05, 0, 0, 0, 0, 0, 0, 0});
  // Without L; link-local; multicast; a prefix length over 128; a 24-byte option. The RA itself
  // is valid (its router is learned); only the options are not taken.
  const auto ra =
      ra_frame(kGwIp6, 1800,
               joined({prefix_option(kAdvertised, 64, 0x40, 600), prefix_option(ll, 64, 0x80, 600),
                       prefix_option(mc, 16, 0x80, 600), prefix_option(kAdvertised, 129, 0x80, 600),
                       prefix_option(kAdvertised, 64, 0x80, 600, 3)}));
  CHECK(receive(s, ra, kSec).result.verdict == RxVerdict::kConsumed);
  CHECK(s.learned_router6());
  CHECK(s.learned_prefixes6().empty());
  CHECK(s.counters().ra_options_ignored == 4);  // (without L: not an on-link statement)
  CHECK(s.next_hop6(kInAdvertised) == kGwIp6);

  // At most kMaxLearnedPrefixes6: one more is ignored, and counted.
  std::vector<uint8_t> many;
  for (uint16_t i = 0; i <= NetStack::kMaxLearnedPrefixes6; ++i) {
    const auto p =
        prefix_option(Ipv6Addr::from_groups({0x2001, 0xdb8, 0x100, i, 0, 0, 0, 0}), 64, 0x80, 600);
    many.insert(many.end(), p.begin(), p.end());
  }
  receive(s, ra_frame(kGwIp6, 1800, many), 2 * kSec);
  CHECK(s.learned_prefixes6().size() == NetStack::kMaxLearnedPrefixes6);
  CHECK(s.counters().ra_prefixes == NetStack::kMaxLearnedPrefixes6);
  CHECK(s.counters().ra_options_ignored == 5);

  // MTU: taken from 1280 up to the port's MTU; below, above, or a wrong length: ignored.
  CHECK(s.link_mtu6() == 0);
  receive(s, ra_frame(kGwIp6, 1800, mtu_option(1400)), 3 * kSec);
  CHECK(s.link_mtu6() == 1400);
  receive(s, ra_frame(kGwIp6, 1800, mtu_option(1279)), 4 * kSec);
  receive(s, ra_frame(kGwIp6, 1800, mtu_option(9000)), 5 * kSec);
  receive(s, ra_frame(kGwIp6, 1800, mtu_option(1300, 2)), 6 * kSec);
  CHECK(s.link_mtu6() == 1400);
  CHECK(s.counters().ra_options_ignored == 8);
  receive(s, ra_frame(kGwIp6, 1800, mtu_option(1500)), 7 * kSec);
  CHECK(s.link_mtu6() == 1500);
}

TEST_CASE("The generation moves when the RA's router or prefixes change, or an NA moves a MAC",
          "[stack6][ndp][route][generation]") {
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack s(c);
  uint64_t g = s.generation();
  // Each step: does it move the generation?
  const auto moved = [&] {
    const uint64_t now = s.generation();
    const bool changed = now != g;
    g = now;
    return changed;
  };
  const MacAddr other_mac{{0x02, 0, 0, 0, 0, 0xfd}};
  receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), kSec);
  CHECK(moved());  // a default router now: off-link peers go through it
  receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 2 * kSec);
  CHECK_FALSE(moved());  // the same router, its lifetime renewed
  receive(s, ra_frame(kPeerLl6, 1800, lla_option(1, other_mac)), 3 * kSec);
  CHECK(moved());  // replaced
  CHECK(s.next_hop6(kRemoteIp6) == kPeerLl6);
  receive(s, ra_frame(kPeerLl6, 0, lla_option(1, other_mac)), 4 * kSec);
  CHECK(moved());  // withdrawn
  receive(s, ra_frame(kGwIp6, 30, {}), 5 * kSec);
  CHECK(moved());
  s.poll_timers(35 * kSec);
  CHECK_FALSE(s.learned_router6());
  CHECK(moved());  // timed out

  // On-link prefixes (the router unchanged): learned and gone move it, renewed does not.
  receive(s, ra_frame(kGwIp6, 1800, {}), 39 * kSec);
  CHECK(moved());
  const auto pio = prefix_option(kAdvertised, 64, 0x80, 600);
  receive(s, ra_frame(kGwIp6, 1800, pio), 40 * kSec);
  CHECK(s.next_hop6(kInAdvertised) == kInAdvertised);
  CHECK(moved());
  receive(s, ra_frame(kGwIp6, 1800, pio), 41 * kSec);
  CHECK_FALSE(moved());
  receive(s, ra_frame(kGwIp6, 1800, prefix_option(kAdvertised, 64, 0x80, 0)), 42 * kSec);
  CHECK(s.learned_prefixes6().empty());
  CHECK(moved());
  receive(s, ra_frame(kGwIp6, 1800, prefix_option(kAdvertised, 64, 0x80, 1)), 42 * kSec);
  CHECK(moved());
  s.poll_timers(43 * kSec);  // its valid lifetime ran out
  CHECK(s.learned_prefixes6().empty());
  CHECK(moved());

  // A neighbour's NA: the same MAC refreshes, an overriding new one moves it.
  CHECK(s.resolve6(kPeerIp6, 43 * kSec, 1).status == Resolve::kQueued);
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 43 * kSec);
  take_all(s);
  CHECK_FALSE(moved());  // resolved: nothing was given out before
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 44 * kSec);
  receive(s, na_frame(0x20000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 45 * kSec);
  CHECK_FALSE(moved());
  receive(s, na_frame(0x40000000u, kPeerIp6, lla_option(2, other_mac), Ip6Opts{}), 46 * kSec);
  // No Override: the known MAC stays (RFC 4861 7.2.5), in doubt: users look it up (probe) again.
  CHECK(moved());
  CHECK(s.resolve6(kPeerIp6, 46 * kSec).mac == kPeerMac);
  receive(s, na_frame(0x40000000u, kPeerIp6, lla_option(2, other_mac), Ip6Opts{}), 46 * kSec);
  CHECK_FALSE(moved());  // already in doubt
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, other_mac), Ip6Opts{}), 47 * kSec);
  CHECK(moved());
  CHECK(s.resolve6(kPeerIp6, 47 * kSec).mac == other_mac);
}

TEST_CASE("Router discovery: an NA from the RA's router without the Router flag removes it",
          "[stack6][ndp][route]") {
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack s(c);
  receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), kSec);
  REQUIRE(s.learned_router6() == kGwIp6);
  Ip6Opts from_gw;
  from_gw.src = kGwIp6;
  from_gw.eth_src = kGwMac;
  const MacAddr other_mac{{0x02, 0, 0, 0, 0, 0xfd}};
  // Router, Solicited, Override: still a router.
  receive(s, na_frame(0xE0000000u, kGwIp6, lla_option(2, kGwMac), from_gw), 2 * kSec);
  CHECK(s.learned_router6() == kGwIp6);
  // Another MAC without Override updates nothing (the entry is only put in doubt): the flag
  // is not looked at.
  receive(s, na_frame(0x40000000u, kGwIp6, lla_option(2, other_mac), from_gw), 3 * kSec);
  CHECK(s.learned_router6() == kGwIp6);
  // An accepted NA with R clear: a host now, no longer the default router.
  const uint64_t g = s.generation();
  receive(s, na_frame(0x60000000u, kGwIp6, lla_option(2, kGwMac), from_gw), 4 * kSec);
  CHECK_FALSE(s.learned_router6());
  CHECK(s.generation() != g);
  CHECK_FALSE(s.next_hop6(kRemoteIp6));
  CHECK(s.neighbours6().find(kGwIp6)->evictable);  // released: a peer's entry like any other
  // Without a TLLA too (an update of a reachable entry).
  receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 5 * kSec);
  REQUIRE(s.learned_router6() == kGwIp6);
  receive(s, na_frame(0x40000000u, kGwIp6, {}, from_gw), 6 * kSec);
  CHECK_FALSE(s.learned_router6());

  // gateway6 is configured, not learned: an NA without R leaves it the next hop.
  NetStack g6(config6());
  receive(g6, na_frame(0x60000000u, kGwIp6, lla_option(2, kGwMac), from_gw), kSec);
  CHECK(g6.next_hop6(kRemoteIp6) == kGwIp6);
}

TEST_CASE("NS, RA and unsolicited NA make a new MAC STALE; the known MAC keeps its state",
          "[stack6][ndp][generation]") {
  // Linux's ndisc_recv_ns, ndisc_router_discovery and ndisc_recv_na update to NUD_STALE; only
  // a solicited NA to NUD_REACHABLE (RFC 4861 7.2.3 to 7.2.5, 6.3.4).
  NetStackConfig c = config6();
  c.gateway6.reset();
  NetStack s(c);
  const uint64_t reachable = c.neighbour.reachable_ns;
  const uint64_t window = c.neighbour.refresh_window_ns;
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  s.resolve6(kPeerIp6, 0);
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 10);
  CHECK(s.resolve6(kPeerIp6, 10).mac == kPeerMac);  // in use
  take_all(s);
  REQUIRE(s.neighbours6().find(kPeerIp6)->deadline_ns == 10 + reachable);
  const uint64_t g0 = s.generation();
  // Its NS and an unsolicited NA (Override) with the MAC we know: nothing changes.
  receive(s, ns_for_us(), kSec);
  receive(s, na_frame(0x20000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 2 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 10 + reachable);
  CHECK(s.generation() == g0);
  // An unsolicited NA (Override) with a new MAC: taken, STALE.
  receive(s, na_frame(0x20000000u, kPeerIp6, lla_option(2, moved), Ip6Opts{}), 3 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->mac == moved);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 3 * kSec + window);
  CHECK(s.generation() == g0 + 1);
  // A solicited one (the answer to the probe) confirms it.
  receive(s, na_frame(0x40000000u, kPeerIp6, lla_option(2, moved), Ip6Opts{}), 4 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 4 * kSec + reachable);
  // Its NS from the old MAC again: taken (NS override), STALE.
  receive(s, ns_for_us(), 5 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->mac == kPeerMac);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 5 * kSec + window);
  // An RA makes its router's entry STALE.
  receive(s, ra_frame(kGwIp6, 1800, lla_option(1, kGwMac)), 6 * kSec);
  REQUIRE(s.neighbours6().find(kGwIp6));
  CHECK(s.neighbours6().find(kGwIp6)->deadline_ns == 6 * kSec + window);
  CHECK(s.neighbours6().counters().learned_stale == 3);
  // Off-link traffic uses it at once, and probes it.
  const auto r = s.resolve6(*s.next_hop6(kRemoteIp6), 6 * kSec + 1);
  CHECK(r.status == Resolve::kResolved);
  CHECK(r.mac == kGwMac);
  const auto probe = take_all(s);
  REQUIRE(probe.size() == 1);
  check_ndp(bytes_of(probe[0]), 14, 135, 0, kGwIp6, kGwIp6);
}

TEST_CASE(
    "Router discovery: an RA's Reachable Time and Retrans Timer, bounded, set the IPv6 "
    "table's",
    "[stack6][ndp]") {
  // RFC 4861 6.3.4; Linux's ndisc_router_discovery sets the interface's BASE_REACHABLE_TIME and
  // RETRANS_TIME from nonzero fields.
  NetStackConfig c = config6();  // reachable 60 s, retry 1 s, refresh window 5 s
  NetStack s(c);
  const auto ra = [&](uint32_t reachable_ms, uint32_t retrans_ms, uint64_t now) {
    REQUIRE(receive(s, ra_frame(kGwIp6, 1800, {}, 255, 0, reachable_ms, retrans_ms), now)
                .result.verdict == RxVerdict::kConsumed);
  };
  const NeighbourConfig& n6 = s.neighbours6().config();
  ra(20'000, 2'500, 0);
  CHECK(n6.reachable_ns == 20 * kSec);
  CHECK(n6.retry_interval_ns == 2500 * 1'000'000ull);
  CHECK(s.counters().ra_timers_set == 2);
  CHECK(s.counters().ra_timers_clamped == 0);
  // IPv4's are its own.
  CHECK(s.neighbours().config().reachable_ns == c.neighbour.reachable_ns);
  CHECK(s.neighbours().config().retry_interval_ns == kSec);
  // Unspecified (0), or the same again: nothing changes.
  ra(0, 0, kSec);
  ra(20'000, 2'500, 2 * kSec);
  CHECK(n6.reachable_ns == 20 * kSec);
  CHECK(n6.retry_interval_ns == 2500 * 1'000'000ull);
  CHECK(s.counters().ra_timers_set == 2);
  // The new values in use: requests every 2.5 s, a confirmed entry lives 20 s.
  CHECK(s.resolve6(kPeerIp6, 3 * kSec).status == Resolve::kQueued);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 5500 * 1'000'000ull);
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 4 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 24 * kSec);
  // Out of bounds: taken at the bound. A reachable time under twice the refresh window, a
  // retrans timer under 100 ms; above an hour, above 10 s.
  ra(1, 1, 5 * kSec);
  // (A reachable entry keeps the lifetime it was given: Linux judges it against the new time
  // when that runs out.)
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 24 * kSec);
  CHECK(n6.reachable_ns == 2 * c.neighbour.refresh_window_ns);
  CHECK(n6.reachable_ns == s.ra_reachable_min_ns());
  CHECK(n6.retry_interval_ns == NetStack::kRaRetransMinNs);
  CHECK(s.counters().ra_timers_clamped == 2);
  ra(0xFFFFFFFFu, 0xFFFFFFFFu, 6 * kSec);
  CHECK(s.neighbours6().find(kPeerIp6)->deadline_ns == 4 * kSec + NetStack::kRaReachableMaxNs);
  CHECK(n6.reachable_ns == NetStack::kRaReachableMaxNs);
  CHECK(n6.retry_interval_ns == NetStack::kRaRetransMaxNs);
  CHECK(s.counters().ra_timers_clamped == 4);
  CHECK(s.counters().ra_timers_set == 6);
}

TEST_CASE("Reachable times are drawn per host: the port MAC seeds each table", "[stack6][ndp]") {
  // Two hosts with the default seed still draw differently (so their entries do not age out in
  // step), each the same every run.
  const auto lifetime = [](MacAddr mac) {
    NetStackConfig c = config6();
    c.mac = mac;
    c.neighbour.randomize_reachable = true;
    NetStack s(c);
    s.resolve(kPeerIp, 0);
    receive(s, arp_frame(2, mac, kPeerMac, kPeerIp, mac, kOurIp), 0);
    s.resolve6(kPeerIp6, 0);
    Ip6Opts o;
    o.eth_dst = mac;
    receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), o), 0);
    return std::pair{s.neighbours().find(kPeerIp)->deadline_ns,
                     s.neighbours6().find(kPeerIp6)->deadline_ns};
  };
  const auto a = lifetime(kOurMac);
  const auto b = lifetime(MacAddr{{0x02, 0, 0, 0, 0, 0x09}});
  CHECK(a == lifetime(kOurMac));
  CHECK(a.first != b.first);
  CHECK(a.second != b.second);
  CHECK(a.first != a.second);  // and each family its own
  for (uint64_t d : {a.first, a.second, b.first, b.second}) {
    CHECK(d >= NeighbourConfig{}.reachable_ns / 2);
    CHECK(d < NeighbourConfig{}.reachable_ns * 3 / 2);
  }
}

TEST_CASE(
    "Each family's table draws its reachable time again every 300 s, on its own: the stack's "
    "deadline has the draws",
    "[stack6][ndp]") {
  // Linux's neigh_periodic_work, per neighbour table (ARP's, NDP's).
  NetStackConfig c = config6();
  c.neighbour.randomize_reachable = true;
  NetStack s(c);
  s.resolve6(kPeerIp6, 0);
  receive(s, na_frame(0x60000000u, kPeerIp6, lla_option(2, kPeerMac), Ip6Opts{}), 0);
  const uint64_t v6 = s.neighbours6().reachable_time_ns();
  const uint64_t v4 = s.neighbours().reachable_time_ns();
  REQUIRE(s.neighbours6().find(kPeerIp6)->deadline_ns == v6);
  s.poll_timers(v6);  // unused: kept STALE; the IPv4 table's period starts
  REQUIRE(s.neighbours6().find(kPeerIp6)->stale);
  CHECK(s.next_deadline_ns() == 300 * kSec);  // the IPv6 table's draw
  s.poll_timers(300 * kSec);
  CHECK(s.neighbours6().reachable_time_ns() != v6);
  CHECK(s.neighbours().reachable_time_ns() == v4);
  CHECK(s.next_deadline_ns() == v6 + 300 * kSec);  // the IPv4 table's
  s.poll_timers(v6 + 300 * kSec);
  CHECK(s.neighbours().reachable_time_ns() != v4);
  CHECK(s.next_deadline_ns() == 600 * kSec);
}

TEST_CASE(
    "Router discovery: an RA's nonzero Cur Hop Limit is the hop limit of the IPv6 frames we "
    "originate, NDP's staying 255",
    "[stack6][ndp]") {
  // RFC 4861 6.3.4; Linux's ndisc_router_discovery sets the interface's hop_limit.
  NetStackConfig c = config6();
  c.ttl = 64;
  NetStack s(c);
  std::array<uint8_t, 256> out{};
  const auto udp6_hop_limit = [&] {
    REQUIRE(s.write_udp6_headers(out, kPeerMac, kPeerIp6, 1, 4791, 0, 16) != 0);
    return out[14 + 7];
  };
  CHECK(s.hop_limit6() == 64);
  CHECK(udp6_hop_limit() == 64);
  const uint64_t gen = s.generation();
  REQUIRE(receive(s, ra_frame(kGwIp6, 1800, {}, 255, 0, 0, 0, 17), 0).result.verdict ==
          RxVerdict::kConsumed);
  CHECK(s.hop_limit6() == 17);
  CHECK(udp6_hop_limit() == 17);
  CHECK(s.counters().ra_hop_limit_set == 1);
  CHECK(s.generation() > gen);  // callers restamp their templates
  // IPv4 keeps its TTL.
  REQUIRE(s.write_udp_headers(out, kPeerMac, kPeerIp, 1, 4791, 0, 16) != 0);
  CHECK(out[14 + 8] == 64);
  // 0 is unspecified; the same value again changes nothing.
  const uint64_t gen2 = s.generation();
  receive(s, ra_frame(kGwIp6, 1800, {}, 255, 0, 0, 0, 0), kSec);
  receive(s, ra_frame(kGwIp6, 1800, {}, 255, 0, 0, 0, 17), 2 * kSec);
  CHECK(s.hop_limit6() == 17);
  CHECK(s.counters().ra_hop_limit_set == 1);
  CHECK(s.generation() == gen2);
  // Echo replies carry it; Neighbor Solicitations keep 255.
  Ip6Opts o;
  o.src = kPeerIp6;
  const std::vector<uint8_t> echo_body = {0, 1, 0, 1, 'h', 'i'};
  const Rx rx =
      receive(s, ipv6_frame(58, icmp6(128, 0, echo_body, kPeerIp6, kOurIp6), o), 3 * kSec);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(rx.reply[14 + 7] == 17);
  s.resolve6(kPeerIp6, 3 * kSec);
  std::array<NetAction, 4> acts;
  REQUIRE(s.take_actions(acts) == 1);
  CHECK(acts[0].bytes[14 + 7] == 255);
}
