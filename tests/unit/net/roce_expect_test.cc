// The engine's RoCE receive fast path (NetStack::make_roce_expect +
// on_rx_expected) against its full path (NetStack::on_rx_frame, then
// wire::parse_roce and the peer check), frame by frame, over IPv4 and IPv6: a
// frame the fast path takes must get the full path's verdict, view, datagram
// and counters; every other frame goes to on_rx_frame as in the engine, so the
// two stacks' counters stay equal throughout.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "net/net_stack.h"
#include "test_frames.h"
#include "wire/frame.h"

using namespace conduit;
using namespace conduit::net;
using namespace conduit::net::test;

namespace {

using Bytes = std::vector<uint8_t>;
constexpr uint16_t kRocePort = wire::kRoceUdpPort;
constexpr uint16_t kCmPort = 4792;
constexpr uint32_t kQpn = 0xABC;
constexpr uint16_t kVid = 100;

NetStackConfig stack_config(bool vlan) {
  NetStackConfig c;
  c.mac = kOurMac;
  c.addr = kOurIp;
  c.prefix_len = 24;
  c.addr6 = kOurIp6;
  c.prefix_len6 = 64;
  c.udp_ports = {kRocePort, kCmPort};
  if (vlan) c.vlan_id = kVid;
  return c;
}

wire::ParseOptions parse_options(uint32_t pmtu_bytes) {
  wire::ParseOptions opt;
  opt.udp_dst_port = kRocePort;
  opt.pmtu_bytes = pmtu_bytes;
  return opt;
}

// The peer's frames as it sends them to us (conduit's own header values).
wire::FrameAddr peer_addr(bool vlan, bool v6 = false) {
  wire::FrameAddr a;
  a.dst_mac = kOurMac.bytes;
  a.src_mac = kPeerMac.bytes;
  a.has_vlan = vlan;
  a.vlan_tci = static_cast<uint16_t>(3 << 13 | kVid);
  a.src_ip = kPeerIp.value;
  a.dst_ip = kOurIp.value;
  a.src_port = wire::udp_sport_for_qp(0x11, kQpn);
  a.dscp = 26;
  a.ecn = wire::kEcnEct0;
  if (v6) {
    a.ipv6 = true;
    a.src_ip6 = kPeerIp6.bytes;
    a.dst_ip6 = kOurIp6.bytes;
    a.flow_label = wire::flow_label_for_qp(0x11, kQpn);
  }
  return a;
}

Bytes build(const wire::FrameAddr& a, wire::RoceHeader h, const Bytes& payload) {
  Bytes out(wire::frame_bytes(h, payload.size(), a.has_vlan, a.ipv6));
  const wire::BuildResult r = wire::build_frame(out, a, h, wire::PayloadGather(payload));
  REQUIRE(r.ok());
  return out;
}

wire::RoceHeader header(wire::Opcode op, uint32_t psn) {
  wire::RoceHeader h;
  h.bth.opcode = static_cast<uint8_t>(op);
  h.bth.dest_qp = kQpn;
  h.bth.psn = psn & 0xFFFFFF;
  h.reth = wire::Reth{0x1000, 0x202, 64};
  h.aeth = wire::Aeth{0, 5};
  return h;
}

// test_frames.h's fix_ip_checksum() without trusting the IHL (frames here are corrupted).
void fix_ip_header_checksum(Bytes& f, size_t l3) {
  if (f.size() < l3 + 20) return;
  f[l3 + 10] = f[l3 + 11] = 0;
  const uint16_t c = ref_checksum(f.data() + l3, 20);
  f[l3 + 10] = static_cast<uint8_t>(c >> 8);
  f[l3 + 11] = static_cast<uint8_t>(c);
}

// A correct UDP checksum (RFC 768; RFC 8200 8.1 over IPv6) over the datagram
// as the frame has it.
void set_udp_checksum(Bytes& f, size_t l3, bool v6 = false) {
  const size_t l4 = l3 + (v6 ? 40 : 20);
  const size_t udp_len = get16(f, l4 + 4);
  f[l4 + 6] = f[l4 + 7] = 0;
  uint64_t pseudo = (get32(f, l3 + 12) >> 16) + (get32(f, l3 + 12) & 0xFFFF) +
                    (get32(f, l3 + 16) >> 16) + (get32(f, l3 + 16) & 0xFFFF) + 17 + udp_len;
  if (v6) pseudo = ref_pseudo6(get_ip6(f, l3 + 8), get_ip6(f, l3 + 24), udp_len, 17);
  uint16_t c = ref_checksum(f.data() + l4, udp_len, pseudo);
  if (c == 0) c = 0xFFFF;
  f[l4 + 6] = static_cast<uint8_t>(c >> 8);
  f[l4 + 7] = static_cast<uint8_t>(c);
}

// The engine's peer check: the peer's address in either family.
bool from_peer(const UdpDatagram& u) {
  return u.ipv6 ? u.src_ip6 == kPeerIp6 : u.src_ip == kPeerIp;
}

// What the engine's full path makes of a frame.
struct FullPath {
  RxResult net;
  bool roce = false;  // delivered to the RoCE port
  wire::DropReason why = wire::DropReason::kNone;
  wire::RoceView view;
};

FullPath full_path(NetStack& s, const Bytes& f, uint32_t pmtu_bytes) {
  FullPath out;
  Bytes reply(4096);
  out.net = s.on_rx_frame(f, 0, reply);
  if (out.net.verdict != RxVerdict::kDeliverUdp || out.net.udp.dst_port != kRocePort) return out;
  out.roce = true;
  const UdpDatagram& u = out.net.udp;
  const auto ip_udp = std::span<const uint8_t>(f).subspan(u.ip_offset, u.ipv6 ? 48 : 28);
  const auto payload = std::span<const uint8_t>(f).subspan(u.payload_offset, u.payload_len);
  out.why = wire::parse_roce(ip_udp, payload, parse_options(pmtu_bytes), out.view);
  return out;
}

bool same_counters(const NetCounters& a, const NetCounters& b) {
  return a.rx_frames == b.rx_frames && a.rx_udp_delivered == b.rx_udp_delivered &&
         a.rx_arp_requests == b.rx_arp_requests && a.rx_arp_replies == b.rx_arp_replies &&
         a.rx_icmp_echo_requests == b.rx_icmp_echo_requests &&
         a.tx_arp_replies == b.tx_arp_replies && a.tx_icmp_echo_replies == b.tx_icmp_echo_replies &&
         a.tx_arp_requests == b.tx_arp_requests && a.no_route == b.no_route &&
         a.rx_udp6_delivered == b.rx_udp6_delivered && a.rx_ns == b.rx_ns && a.tx_na == b.tx_na &&
         a.rx_drops == b.rx_drops;
}

// The two stacks of one comparison: `full` sees every frame through
// on_rx_frame, `fast` as the engine does (on_rx_expected, else on_rx_frame).
struct Pair {
  NetStack full;
  NetStack fast;
  wire::RxExpect exp;
  uint32_t pmtu_bytes;

  Pair(bool vlan, uint32_t pmtu, const Bytes& first)
      : full(stack_config(vlan)), fast(stack_config(vlan)), pmtu_bytes(pmtu) {
    // The expectation comes from a frame the full path accepted from the peer.
    const FullPath p = full_path(full, first, pmtu);
    REQUIRE(p.roce);
    REQUIRE(p.why == wire::DropReason::kNone);
    REQUIRE(from_peer(p.net.udp));
    exp = fast.make_roce_expect(first, p.net.udp, parse_options(pmtu));
    Bytes reply(4096);
    fast.on_rx_frame(first, 0, reply);  // the engine's full path saw it too
  }

  // One frame through both; true when the fast path took it. Fails the test
  // when the fast path's outcome differs from the full path's.
  bool check(const Bytes& f, const std::string& what) {
    INFO(what << " (" << f.size() << " bytes)");
    const FullPath want = full_path(full, f, pmtu_bytes);
    UdpDatagram udp;
    wire::RoceView view;
    wire::DropReason why = wire::DropReason::kCount;
    const bool matched = fast.on_rx_expected(f, exp, udp, view, why);
    if (matched) {
      REQUIRE(want.roce);
      REQUIRE(why == want.why);
      // The engine's peer check and QP lookup would pass as they do for the full path.
      CHECK(from_peer(want.net.udp));
      CHECK(udp.src_mac == want.net.udp.src_mac);
      CHECK(udp.ipv6 == want.net.udp.ipv6);
      CHECK(udp.src_ip == want.net.udp.src_ip);
      CHECK(udp.dst_ip == want.net.udp.dst_ip);
      CHECK(udp.src_ip6 == want.net.udp.src_ip6);
      CHECK(udp.dst_ip6 == want.net.udp.dst_ip6);
      CHECK(udp.src_port == want.net.udp.src_port);
      CHECK(udp.dst_port == want.net.udp.dst_port);
      CHECK(udp.tos == want.net.udp.tos);
      CHECK(udp.ip_offset == want.net.udp.ip_offset);
      CHECK(udp.payload_offset == want.net.udp.payload_offset);
      CHECK(udp.payload_len == want.net.udp.payload_len);
      if (why == wire::DropReason::kNone) {
        CHECK(view.bth == want.view.bth);
        CHECK(view.info == want.view.info);
        CHECK(view.payload.data() == want.view.payload.data());
        CHECK(view.payload.size() == want.view.payload.size());
        CHECK(view.dest_qp() == kQpn);
      }
    } else {
      Bytes reply(4096);
      fast.on_rx_frame(f, 0, reply);
    }
    REQUIRE(same_counters(fast.counters(), full.counters()));
    return matched;
  }
};

}  // namespace

TEST_CASE("roce expect: frames like the first accepted one take the fast path", "[net][roce]") {
  for (const auto& [vlan, v6] :
       {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    INFO("vlan " << vlan << " ipv6 " << v6);
    const wire::FrameAddr a = peer_addr(vlan, v6);
    Pair p(vlan, 1024, build(a, header(wire::Opcode::kSendOnly, 1), Bytes(64, 0x5A)));
    REQUIRE(p.exp.usable);
    uint32_t psn = 2;
    Bytes pl1024(1024, 0x33);
    CHECK(p.check(build(a, header(wire::Opcode::kSendOnly, psn++), Bytes(64, 1)), "send only"));
    CHECK(p.check(build(a, header(wire::Opcode::kSendFirst, psn++), pl1024), "send first"));
    CHECK(p.check(build(a, header(wire::Opcode::kWriteOnly, psn++), Bytes(3, 7)), "write"));
    CHECK(p.check(build(a, header(wire::Opcode::kAcknowledge, psn++), {}), "ack"));
    CHECK(p.check(build(a, wire::make_cnp_header(kQpn), {}), "cnp"));
    wire::FrameAddr ce = a;
    ce.ecn = wire::kEcnCe;  // a switch marked it: the engine reads the ToS from udp
    CHECK(p.check(build(ce, header(wire::Opcode::kSendOnly, psn++), {}), "CE marked"));
    wire::FrameAddr other_sport = a;
    other_sport.src_port = 0xC123;
    CHECK(p.check(build(other_sport, header(wire::Opcode::kSendOnly, psn++), {}), "UDP sport"));
    wire::FrameAddr other_mac = a;
    other_mac.src_mac[5] ^= 0x40;  // on_rx_frame ignores the source MAC too
    CHECK(p.check(build(other_mac, header(wire::Opcode::kSendOnly, psn++), {}), "src MAC"));
    if (v6) {  // neither path checks these IPv6 fields (the ICRC masks them)
      wire::FrameAddr hop = a;
      hop.ttl = 3;
      CHECK(p.check(build(hop, header(wire::Opcode::kSendOnly, psn++), {}), "hop limit"));
      wire::FrameAddr label = a;
      label.flow_label ^= 0x12345;
      CHECK(p.check(build(label, header(wire::Opcode::kSendOnly, psn++), {}), "flow label"));
      wire::FrameAddr dscp = a;
      dscp.dscp = 46;
      CHECK(p.check(build(dscp, header(wire::Opcode::kSendOnly, psn++), {}), "traffic class"));
    }
    if (vlan) {
      wire::FrameAddr pcp = a;
      pcp.vlan_tci = static_cast<uint16_t>(5 << 13 | 1 << 12 | kVid);  // priority, DEI
      CHECK(p.check(build(pcp, header(wire::Opcode::kSendOnly, psn++), {}), "VLAN PCP"));
    }
    Bytes padded = build(a, header(wire::Opcode::kAcknowledge, psn++), {});
    padded.resize(padded.size() + 6, 0);  // Ethernet minimum-size padding
    CHECK(p.check(padded, "padded"));
    // Verdicts the fast path gives itself: drops after a header match.
    Bytes bad_icrc = build(a, header(wire::Opcode::kSendOnly, psn++), Bytes(8, 1));
    bad_icrc.back() ^= 1;
    CHECK(p.check(bad_icrc, "bad ICRC"));
    CHECK(p.check(build(a, header(wire::Opcode::kSendFirst, psn++), Bytes(64, 1)), "not PMTU"));
    CHECK(p.check(build(a, header(wire::Opcode::kSendOnly, psn++), Bytes(1100, 1)), "> PMTU"));
    CHECK(p.full.counters().rx_udp_delivered == p.fast.counters().rx_udp_delivered);
  }
}

TEST_CASE("roce expect: a frame differing in any one checked field gets the full path's verdict",
          "[net][roce]") {
  for (bool vlan : {false, true}) {
    const wire::FrameAddr a = peer_addr(vlan);
    const size_t l3 = vlan ? 18 : 14;
    Pair p(vlan, 1024, build(a, header(wire::Opcode::kSendOnly, 1), Bytes(64, 0x5A)));
    REQUIRE(p.exp.usable);
    const Bytes good = build(a, header(wire::Opcode::kSendOnly, 9), Bytes(64, 0x5A));
    REQUIRE(p.check(good, "good"));
    // Each mutation: name, edit, whether the fast path may still take it.
    struct Case {
      const char* name;
      void (*edit)(Bytes&, size_t l3);
      bool fix_ip_csum;
    };
    const Case misses[] = {
        {"dst MAC", [](Bytes& f, size_t) { f[5] ^= 1; }, false},
        {"dst MAC broadcast", [](Bytes& f, size_t) { std::memset(f.data(), 0xFF, 6); }, false},
        {"ether type", [](Bytes& f, size_t l3) { f[l3 - 1] = 0x06; }, false},
        {"QinQ TPID", [](Bytes& f, size_t) { f[12] = 0x88, f[13] = 0xA8; }, false},
        {"IP version", [](Bytes& f, size_t l3) { f[l3] = 0x65; }, true},
        {"IP options", [](Bytes& f, size_t l3) { f[l3] = 0x46; }, true},
        {"IP total length", [](Bytes& f, size_t l3) { f[l3 + 3] -= 4; }, true},
        {"IP ID", [](Bytes& f, size_t l3) { f[l3 + 5] ^= 1; }, true},
        {"IP DF cleared", [](Bytes& f, size_t l3) { f[l3 + 6] = 0; }, true},
        {"IP MF", [](Bytes& f, size_t l3) { f[l3 + 6] |= 0x20; }, true},
        {"IP fragment offset", [](Bytes& f, size_t l3) { f[l3 + 7] = 1; }, true},
        {"TTL", [](Bytes& f, size_t l3) { f[l3 + 8] -= 1; }, true},
        {"protocol", [](Bytes& f, size_t l3) { f[l3 + 9] = 1; }, true},
        {"IP checksum", [](Bytes& f, size_t l3) { f[l3 + 10] ^= 0x10; }, false},
        {"src IP other peer", [](Bytes& f, size_t l3) { f[l3 + 15] = 3; }, true},
        {"src IP ours", [](Bytes& f, size_t l3) { f[l3 + 15] = 1; }, true},
        {"src IP broadcast", [](Bytes& f, size_t l3) { f[l3 + 15] = 255; }, true},
        {"dst IP", [](Bytes& f, size_t l3) { f[l3 + 19] = 9; }, true},
        {"UDP dst port CM", [](Bytes& f, size_t l3) { f[l3 + 23] = 0xB8; }, false},
        {"UDP dst port closed", [](Bytes& f, size_t l3) { f[l3 + 23] = 0x00; }, false},
        {"UDP length", [](Bytes& f, size_t l3) { f[l3 + 25] -= 4; }, false},
        {"UDP checksum wrong", [](Bytes& f, size_t l3) { f[l3 + 27] = 1; }, false},
        {"UDP checksum right", [](Bytes& f, size_t l3) { set_udp_checksum(f, l3); }, false},
        {"BTH TVer", [](Bytes& f, size_t l3) { f[l3 + 29] |= 1; }, false},
        {"P_Key", [](Bytes& f, size_t l3) { f[l3 + 31] ^= 1; }, false},
        {"dest QPN", [](Bytes& f, size_t l3) { f[l3 + 35] ^= 1; }, false},
        {"truncated", [](Bytes& f, size_t l3) { f.resize(l3 + 40); }, false},
    };
    for (const Case& c : misses) {
      Bytes f = good;
      c.edit(f, l3);
      if (c.fix_ip_csum) fix_ip_header_checksum(f, l3);
      CHECK_FALSE(p.check(f, c.name));
    }
    // Drops the matching frame decides itself, with parse_roce's reason.
    const Case matches[] = {
        {"ICRC", [](Bytes& f, size_t) { f.back() ^= 0x80; }, false},
        {"payload byte", [](Bytes& f, size_t l3) { f[l3 + 50] ^= 1; }, false},
        {"opcode", [](Bytes& f, size_t l3) { f[l3 + 28] = 0x1F; }, false},
        {"PSN", [](Bytes& f, size_t l3) { f[l3 + 39] ^= 1; }, false},
    };
    for (const Case& c : matches) {
      Bytes f = good;
      c.edit(f, l3);
      CHECK(p.check(f, c.name));
    }
    // A VLAN tag where the stack has none, and none where it has one.
    wire::FrameAddr flip = a;
    flip.has_vlan = !vlan;
    CHECK_FALSE(p.check(build(flip, header(wire::Opcode::kSendOnly, 10), {}), "VLAN presence"));
    if (vlan) {
      wire::FrameAddr vid = a;
      vid.vlan_tci = static_cast<uint16_t>(3 << 13 | (kVid + 1));
      CHECK_FALSE(p.check(build(vid, header(wire::Opcode::kSendOnly, 11), {}), "VLAN ID"));
    }
    // Not RoCE at all: ARP and ICMP echo for us.
    CHECK_FALSE(p.check(arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kOurIp,
                                  vlan ? std::optional<uint16_t>(kVid) : std::nullopt),
                        "ARP request"));
  }
}

TEST_CASE(
    "roce expect: an IPv6 frame differing in any one checked field gets the full path's "
    "verdict",
    "[net][roce]") {
  for (bool vlan : {false, true}) {
    INFO("vlan " << vlan);
    const wire::FrameAddr a = peer_addr(vlan, true);
    const size_t l3 = vlan ? 18 : 14;
    Pair p(vlan, 1024, build(a, header(wire::Opcode::kSendOnly, 1), Bytes(64, 0x5A)));
    REQUIRE(p.exp.usable);
    REQUIRE(p.exp.ipv6);
    const Bytes good = build(a, header(wire::Opcode::kSendOnly, 9), Bytes(64, 0x5A));
    REQUIRE(p.check(good, "good"));
    struct Case {
      const char* name;
      void (*edit)(Bytes&, size_t l3);
    };
    const Case misses[] = {
        {"dst MAC", [](Bytes& f, size_t) { f[5] ^= 1; }},
        {"dst MAC all-nodes",
         [](Bytes& f, size_t) {
           std::copy(kAllNodesMac.bytes.begin(), kAllNodesMac.bytes.end(), f.begin());
         }},
        {"ether type IPv4", [](Bytes& f, size_t l3) { f[l3 - 2] = 0x08, f[l3 - 1] = 0x00; }},
        {"IP version",
         [](Bytes& f, size_t l3) { f[l3] = static_cast<uint8_t>(0x40 | (f[l3] & 15)); }},
        {"payload length", [](Bytes& f, size_t l3) { f[l3 + 5] -= 4; }},
        {"payload length past the frame", [](Bytes& f, size_t l3) { f[l3 + 4] = 0x40; }},
        {"next header hop-by-hop", [](Bytes& f, size_t l3) { f[l3 + 6] = 0; }},
        {"next header TCP", [](Bytes& f, size_t l3) { f[l3 + 6] = 6; }},
        {"src IP other peer", [](Bytes& f, size_t l3) { f[l3 + 23] = 3; }},
        {"src IP ours", [](Bytes& f, size_t l3) { f[l3 + 23] = 1; }},
        {"src IP multicast", [](Bytes& f, size_t l3) { f[l3 + 8] = 0xFF; }},
        {"dst IP", [](Bytes& f, size_t l3) { f[l3 + 39] = 9; }},
        {"dst IP all-nodes",
         [](Bytes& f, size_t l3) {
           const Ipv6Addr g = Ipv6Addr::all_nodes();
           std::copy(g.bytes.begin(), g.bytes.end(), f.begin() + static_cast<long>(l3) + 24);
         }},
        {"UDP dst port CM", [](Bytes& f, size_t l3) { f[l3 + 43] = 0xB8; }},
        {"UDP dst port closed", [](Bytes& f, size_t l3) { f[l3 + 43] = 0x00; }},
        {"UDP length", [](Bytes& f, size_t l3) { f[l3 + 45] -= 4; }},
        {"UDP checksum wrong", [](Bytes& f, size_t l3) { f[l3 + 47] = 1; }},
        {"UDP checksum right", [](Bytes& f, size_t l3) { set_udp_checksum(f, l3, true); }},
        {"BTH TVer", [](Bytes& f, size_t l3) { f[l3 + 49] |= 1; }},
        {"P_Key", [](Bytes& f, size_t l3) { f[l3 + 51] ^= 1; }},
        {"dest QPN", [](Bytes& f, size_t l3) { f[l3 + 55] ^= 1; }},
        {"truncated", [](Bytes& f, size_t l3) { f.resize(l3 + 60); }},
    };
    for (const Case& c : misses) {
      Bytes f = good;
      c.edit(f, l3);
      CHECK_FALSE(p.check(f, c.name));
    }
    // Lengths changed together (IPv6 payload and UDP): still a match, and
    // parse_roce's verdict on what the lengths now say.
    const Case matches[] = {
        {"ICRC", [](Bytes& f, size_t) { f.back() ^= 0x80; }},
        {"payload byte", [](Bytes& f, size_t l3) { f[l3 + 70] ^= 1; }},
        {"opcode", [](Bytes& f, size_t l3) { f[l3 + 48] = 0x1F; }},
        {"PSN", [](Bytes& f, size_t l3) { f[l3 + 59] ^= 1; }},
        {"hop limit", [](Bytes& f, size_t l3) { f[l3 + 7] = 1; }},
        {"flow label", [](Bytes& f, size_t l3) { f[l3 + 3] ^= 0x5A; }},
        {"traffic class CE", [](Bytes& f, size_t l3) { f[l3 + 1] |= 0x30; }},
        {"UDP src port", [](Bytes& f, size_t l3) { f[l3 + 41] ^= 1; }},
        {"both lengths 4 shorter",
         [](Bytes& f, size_t l3) {
           f[l3 + 5] -= 4;
           f[l3 + 45] -= 4;
         }},
    };
    for (const Case& c : matches) {
      Bytes f = good;
      c.edit(f, l3);
      CHECK(p.check(f, c.name));
    }
    // The same peer over IPv4 is another expectation's business.
    CHECK_FALSE(p.check(build(peer_addr(vlan), header(wire::Opcode::kSendOnly, 10), {}), "IPv4"));
    // A Neighbor Solicitation for us: ICMPv6, never the fast path.
    Ip6Opts o;
    if (vlan) o.vid = kVid;
    CHECK_FALSE(p.check(ns_frame(kOurIp6, {}, o), "neighbor solicitation"));
  }
}

TEST_CASE("roce expect: random corruption of the peer's frames keeps both paths equal",
          "[net][roce]") {
  std::mt19937_64 rng(11);
  const wire::Opcode ops[] = {wire::Opcode::kSendOnly,   wire::Opcode::kSendFirst,
                              wire::Opcode::kSendMiddle, wire::Opcode::kSendLast,
                              wire::Opcode::kWriteOnly,  wire::Opcode::kAcknowledge,
                              wire::Opcode::kReadRequest};
  size_t fast = 0, total = 0, fast6 = 0, total6 = 0;
  for (int round = 0; round < 80; ++round) {
    const bool vlan = (round & 1) != 0;
    const uint32_t pmtu = (round & 2) != 0 ? 256 : 1024;
    const bool v6 = (round & 4) != 0;
    const wire::FrameAddr a = peer_addr(vlan, v6);
    const size_t l3 = vlan ? 18 : 14;
    const size_t headers = l3 + (v6 ? 60 : 40);  // through the BTH
    // IPv4: the header checksum made right again after an edit (IPv6 has none).
    const auto fix_csum = [&](Bytes& f) {
      if (!v6) fix_ip_header_checksum(f, l3);
    };
    Pair p(vlan, pmtu, build(a, header(wire::Opcode::kAcknowledge, 0), {}));
    for (int i = 0; i < 500; ++i, ++total) {
      const wire::Opcode op = ops[rng() % std::size(ops)];
      const size_t len = std::vector<size_t>{0, 1, 4, 64, 256, 1024}[rng() % 6];
      const bool payload = wire::opcode_info(static_cast<uint8_t>(op)).has(wire::kOpPayload);
      Bytes f = build(a, header(op, static_cast<uint32_t>(rng())), Bytes(payload ? len : 0, 9));
      switch (rng() % 6) {
        case 0:
          break;
        case 1: {  // one bit anywhere
          const size_t k = rng() % f.size();
          f[k] ^= static_cast<uint8_t>(1u << (rng() & 7));
          break;
        }
        case 2: {  // one bit in the headers, IPv4 checksum made right again
          const size_t k = rng() % headers;
          f[k] ^= static_cast<uint8_t>(1u << (rng() & 7));
          fix_csum(f);
          break;
        }
        case 3:
          f.resize(rng() % f.size());
          break;
        case 4:
          f.resize(f.size() + rng() % 20, 0);
          break;
        default: {  // a random byte in the headers, checksum fixed
          f[rng() % headers] = static_cast<uint8_t>(rng());
          fix_csum(f);
          break;
        }
      }
      const uint64_t delivered = p.fast.counters().rx_udp_delivered;
      total6 += v6 ? 1 : 0;
      if (p.check(f, "round " + std::to_string(round) + " frame " + std::to_string(i))) {
        ++fast;
        fast6 += v6 ? 1 : 0;
        REQUIRE(p.fast.counters().rx_udp_delivered == delivered + 1);
      }
    }
  }
  INFO(fast << " of " << total << " frames on the fast path, " << fast6 << " of " << total6
            << " IPv6 ones");
  CHECK(fast > total / 4);
  CHECK(fast < total);
  CHECK(fast6 > total6 / 4);
  CHECK(fast6 < total6);
}

TEST_CASE("roce expect: a peer's priority-tagged (VID 0) frames take the fast path once learned",
          "[net][roce]") {
  // 802.1Q VID 0 carries only a priority (PFC without VLANs; port.priority_tagging). On a port
  // without a VLAN the full path takes such frames as untagged; an expectation learned from one
  // takes the peer's priority-tagged frames, whatever their PCP, and no others.
  for (const bool v6 : {false, true}) {
    INFO("ipv6 " << v6);
    const wire::FrameAddr a = peer_addr(false, v6);
    wire::FrameAddr prio = a;
    prio.has_vlan = true;
    prio.vlan_tci = 3 << 13;  // PCP 3, VID 0
    const Bytes f = build(prio, header(wire::Opcode::kSendOnly, 2), Bytes(64, 1));
    {
      // Learned from an untagged frame: a tagged one misses it, and the full path takes it.
      Pair p(false, 1024, build(a, header(wire::Opcode::kSendOnly, 1), {}));
      REQUIRE(p.exp.usable);
      CHECK_FALSE(p.check(f, "priority-tagged"));
      NetStack s(stack_config(false));
      const FullPath want = full_path(s, f, 1024);
      REQUIRE(want.roce);
      CHECK(want.why == wire::DropReason::kNone);
      CHECK(from_peer(want.net.udp));
      CHECK(want.net.udp.ip_offset == 18);
      CHECK(want.view.dest_qp() == kQpn);
    }
    Pair p(false, 1024, f);
    REQUIRE(p.exp.usable);
    CHECK(p.exp.l2_bytes == 18);
    CHECK(p.check(build(prio, header(wire::Opcode::kSendOnly, 3), Bytes(64, 2)), "PCP 3"));
    wire::FrameAddr other_pcp = prio;
    other_pcp.vlan_tci = 5 << 13;
    CHECK(p.check(build(other_pcp, header(wire::Opcode::kSendOnly, 4), {}), "PCP 5"));
    CHECK(p.check(build(prio, header(wire::Opcode::kAcknowledge, 4), {}), "an ACK"));
    CHECK_FALSE(p.check(build(a, header(wire::Opcode::kSendOnly, 5), {}), "untagged"));
    wire::FrameAddr vid7 = prio;
    vid7.vlan_tci = 3 << 13 | 7;
    CHECK_FALSE(p.check(build(vid7, header(wire::Opcode::kSendOnly, 6), {}), "VID 7"));
    // A VLAN port treats VID 0 as it treats untagged frames: not its VLAN.
    NetStack tagged(stack_config(true));
    CHECK(full_path(tagged, f, 1024).net.drop == RxDrop::kVlanMismatch);
  }
}

TEST_CASE("roce expect: no usable expectation from frames the fast path cannot describe",
          "[net][roce]") {
  for (const bool v6 : {false, true}) {
    INFO("ipv6 " << v6);
    const wire::FrameAddr a = peer_addr(false, v6);
    const Bytes f = build(a, header(wire::Opcode::kSendOnly, 1), {});
    NetStack s(stack_config(false));
    Bytes reply(4096);
    const RxResult r = s.on_rx_frame(f, 0, reply);
    REQUIRE(r.verdict == RxVerdict::kDeliverUdp);
    REQUIRE(r.udp.ipv6 == v6);
    const wire::RxExpect e = s.make_roce_expect(f, r.udp, parse_options(1024));
    CHECK(e.usable);
    CHECK(e.ipv6 == v6);
    // Not verifying the IPv4 checksum: no IPv4 expectation (it finishes that
    // checksum); IPv6 has none, so the option changes nothing there.
    wire::ParseOptions no_csum = parse_options(1024);
    no_csum.verify_ip_checksum = false;
    CHECK(s.make_roce_expect(f, r.udp, no_csum).usable == v6);
    wire::ParseOptions other_port = parse_options(1024);
    other_port.udp_dst_port = kCmPort;
    CHECK_FALSE(s.make_roce_expect(f, r.udp, other_port).usable);
    UdpDatagram from_us = r.udp;
    from_us.src_ip = kOurIp;
    from_us.src_ip6 = kOurIp6;
    CHECK_FALSE(s.make_roce_expect(f, from_us, parse_options(1024)).usable);
    // A P_Key that does not match ours (full-member 0xFFFF) never makes one.
    wire::RoceHeader h = header(wire::Opcode::kSendOnly, 1);
    h.bth.pkey = 0x1234;
    const Bytes other_pkey = build(a, h, {});
    const RxResult r3 = s.on_rx_frame(other_pkey, 0, reply);
    REQUIRE(r3.verdict == RxVerdict::kDeliverUdp);
    CHECK_FALSE(s.make_roce_expect(other_pkey, r3.udp, parse_options(1024)).usable);
  }
  // IPv4 without exactly DF: the image has DF set, so nothing would match.
  const Bytes f = build(peer_addr(false), header(wire::Opcode::kSendOnly, 1), {});
  NetStack s(stack_config(false));
  Bytes reply(4096);
  Bytes no_df = f;
  no_df[14 + 6] = 0;
  fix_ip_header_checksum(no_df, 14);
  const RxResult r2 = s.on_rx_frame(no_df, 0, reply);
  REQUIRE(r2.verdict == RxVerdict::kDeliverUdp);
  CHECK_FALSE(s.make_roce_expect(no_df, r2.udp, parse_options(1024)).usable);
}

TEST_CASE("roce expect: IPv6 frames make none unless the stack would deliver them as such",
          "[net][roce]") {
  const wire::FrameAddr a = peer_addr(false, true);
  const Bytes f = build(a, header(wire::Opcode::kSendOnly, 1), {});
  NetStack s(stack_config(false));
  Bytes reply(4096);
  const RxResult r = s.on_rx_frame(f, 0, reply);
  REQUIRE(r.verdict == RxVerdict::kDeliverUdp);
  UdpDatagram not_to_us = r.udp;
  not_to_us.dst_ip6 = kPeerIp6;
  CHECK_FALSE(s.make_roce_expect(f, not_to_us, parse_options(1024)).usable);
  UdpDatagram as_ipv4 = r.udp;  // offsets that do not fit the frame's family
  as_ipv4.ipv6 = false;
  CHECK_FALSE(s.make_roce_expect(f, as_ipv4, parse_options(1024)).usable);
  // A stack without IPv6 never delivers such a frame, and never makes one.
  NetStackConfig v4_only = stack_config(false);
  v4_only.addr6.reset();
  NetStack s4(v4_only);
  CHECK_FALSE(s4.make_roce_expect(f, r.udp, parse_options(1024)).usable);
  // The frame an expectation was learned from may carry a UDP checksum (it
  // was verified); the frames that match it may not (they skip that check).
  Bytes with_csum = f;
  set_udp_checksum(with_csum, 14, true);
  const RxResult r2 = s.on_rx_frame(with_csum, 0, reply);
  REQUIRE(r2.verdict == RxVerdict::kDeliverUdp);
  const wire::RxExpect e2 = s.make_roce_expect(with_csum, r2.udp, parse_options(1024));
  REQUIRE(e2.usable);
  UdpDatagram udp;
  wire::RoceView view;
  wire::DropReason why = wire::DropReason::kCount;
  CHECK_FALSE(s.on_rx_expected(with_csum, e2, udp, view, why));
  CHECK(s.on_rx_expected(f, e2, udp, view, why));
  CHECK(why == wire::DropReason::kNone);
  CHECK(s.counters().rx_udp6_delivered == 3);
}
