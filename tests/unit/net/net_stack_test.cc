#include "net/net_stack.h"

#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "net/checksum.h"
#include "stack_harness.h"
#include "test_frames.h"

using namespace conduit::net;
using namespace conduit::net::test;

namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint16_t kCmPort = 18515;

NetStackConfig base_config() {
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
  return c;
}

std::vector<uint8_t> udp_frame(uint16_t dst_port, const std::vector<uint8_t>& payload,
                               bool csum = false) {
  return ipv4_frame(17, udp_segment(49152, dst_port, payload, csum));
}

}  // namespace

TEST_CASE("ARP request for our address gets a correct reply", "[stack][arp]") {
  NetStack s(base_config());
  const Rx rx = receive(s, arp_request_for_us());
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  const auto& r = rx.reply;
  REQUIRE(r.size() == 60);
  CHECK(MacAddr{{r[0], r[1], r[2], r[3], r[4], r[5]}} == kPeerMac);
  CHECK(MacAddr{{r[6], r[7], r[8], r[9], r[10], r[11]}} == kOurMac);
  CHECK(get16(r, 12) == 0x0806);
  CHECK(get16(r, 14) == 1);
  CHECK(get16(r, 16) == 0x0800);
  CHECK(r[18] == 6);
  CHECK(r[19] == 4);
  CHECK(get16(r, 20) == 2);  // reply
  CHECK(MacAddr{{r[22], r[23], r[24], r[25], r[26], r[27]}} == kOurMac);
  CHECK(get32(r, 28) == kOurIp.value);
  CHECK(MacAddr{{r[32], r[33], r[34], r[35], r[36], r[37]}} == kPeerMac);
  CHECK(get32(r, 38) == kPeerIp.value);
  for (size_t i = 42; i < 60; ++i) CHECK(r[i] == 0);  // padding
  CHECK(s.counters().rx_arp_requests == 1);
  CHECK(s.counters().tx_arp_replies == 1);
  // The requester was learned (RFC 826): no ARP needed to answer it.
  const auto res = s.resolve(kPeerIp, 1);
  CHECK(res.status == NeighbourTable::Resolve::kResolved);
  CHECK(res.mac == kPeerMac);
}

TEST_CASE("ARP probe (sender 0.0.0.0) is answered but not learned", "[stack][arp]") {
  NetStack s(base_config());
  const auto probe = arp_frame(1, MacAddr::broadcast(), kPeerMac, Ipv4Addr{}, MacAddr{}, kOurIp);
  const Rx rx = receive(s, probe);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(get32(rx.reply, 38) == 0);
  CHECK(s.neighbours().size() == 0);
}

TEST_CASE("Resolving a next hop: request out, reply in, queued frames released", "[stack][arp]") {
  NetStack s(base_config());
  auto r = s.resolve(kPeerIp, 100, 42);
  CHECK(r.status == NeighbourTable::Resolve::kQueued);
  auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  REQUIRE(actions[0].kind == NetAction::Kind::kTransmit);
  const std::vector<uint8_t> req(actions[0].bytes.begin(),
                                 actions[0].bytes.begin() + actions[0].len);
  REQUIRE(req.size() == 60);
  CHECK(MacAddr{{req[0], req[1], req[2], req[3], req[4], req[5]}}.is_broadcast());
  CHECK(get16(req, 12) == 0x0806);
  CHECK(get16(req, 20) == 1);
  CHECK(get32(req, 28) == kOurIp.value);
  CHECK(get32(req, 38) == kPeerIp.value);
  CHECK(s.counters().tx_arp_requests == 1);

  const auto reply = arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp);
  CHECK(receive(s, reply, 200).result.verdict == RxVerdict::kConsumed);
  actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == NetAction::Kind::kTransmitQueued);
  CHECK(actions[0].frame == 42);
  CHECK(actions[0].dst_mac == kPeerMac);
  CHECK(actions[0].next_hop == kPeerIp);
  CHECK(s.counters().rx_arp_replies == 1);
}

TEST_CASE("ARP retries come from poll_timers and failure drops the queue", "[stack][arp]") {
  NetStack s(base_config());
  s.resolve(kPeerIp, 0, 1);
  take_all(s);
  CHECK(s.next_deadline_ns() == kSec);
  s.poll_timers(kSec);
  CHECK(take_all(s).size() == 1);
  s.poll_timers(2 * kSec);
  CHECK(take_all(s).size() == 1);
  s.poll_timers(3 * kSec);
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == NetAction::Kind::kDropQueued);
  CHECK(actions[0].frame == 1);
  CHECK(s.counters().tx_arp_requests == 3);
}

TEST_CASE("take_actions drains in bursts", "[stack][arp]") {
  NetStack s(base_config());
  for (uint8_t i = 2; i < 7; ++i) s.resolve(Ipv4Addr::from_octets(198, 18, 0, i), 0, i);
  std::vector<NetAction> out(2);
  CHECK(s.pending_actions() == 5);
  CHECK(s.take_actions(out) == 2);
  CHECK(s.take_actions(out) == 2);
  CHECK(s.take_actions(out) == 1);
  CHECK(s.take_actions(out) == 0);
  CHECK(s.pending_actions() == 0);
}

TEST_CASE("Unsolicited or foreign ARP does not create entries", "[stack][arp]") {
  NetStack s(base_config());
  // A reply we did not ask for.
  CHECK(receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp)).result.verdict ==
        RxVerdict::kConsumed);
  CHECK(s.neighbours().size() == 0);
  // A request for someone else.
  const auto other = arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kGwIp);
  CHECK(drop_of(s, other) == RxDrop::kArpNotForUs);
  CHECK(s.neighbours().size() == 0);
  // A request from off-link: answered, not learned.
  const auto offlink = arp_frame(1, MacAddr::broadcast(), kPeerMac, kRemoteIp, MacAddr{}, kOurIp);
  CHECK(receive(s, offlink).result.verdict == RxVerdict::kReply);
  CHECK(s.neighbours().size() == 0);
}

namespace {
// n ARP requests for our address from n distinct senders on the /16, each answered.
void arp_request_flood(NetStack& s, int n) {
  for (int i = 0; i < n; ++i) {
    const MacAddr m{{0x02, 0xaa, 0, 0, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)}};
    const Ipv4Addr ip = Ipv4Addr::from_octets(198, 18, static_cast<uint8_t>(5 + i / 250),
                                              static_cast<uint8_t>(i % 250 + 1));
    REQUIRE(receive(s, arp_frame(1, MacAddr::broadcast(), m, ip, MacAddr{}, kOurIp), kSec)
                .result.verdict == RxVerdict::kReply);
  }
}
}  // namespace

TEST_CASE("An ARP request flood on a /16 cannot lock out a new next hop", "[stack][arp]") {
  NetStackConfig c = base_config();
  c.prefix_len = 16;
  c.neighbour.capacity = 256;
  NetStack s(c);
  arp_request_flood(s, 300);
  take_all(s);
  CHECK(s.neighbours().size() == 256);
  CHECK(s.resolve(kPeerIp, 2 * kSec, 77).status == NeighbourTable::Resolve::kQueued);
  CHECK(s.neighbours().counters().table_full_drops == 0);
}

TEST_CASE("An ARP request flood cannot evict the gateway, though a request of its made its entry",
          "[stack][arp]") {
  NetStackConfig c = base_config();
  c.prefix_len = 16;
  c.neighbour.capacity = 256;
  NetStack s(c);
  REQUIRE(receive(s, arp_frame(1, MacAddr::broadcast(), kGwMac, kGwIp, MacAddr{}, kOurIp), 0)
              .result.verdict == RxVerdict::kReply);
  arp_request_flood(s, 300);
  take_all(s);
  CHECK(s.neighbours().counters().evicted > 0);
  REQUIRE(s.neighbours().find(kGwIp));
  CHECK_FALSE(s.neighbours().find(kGwIp)->evictable);
  // Off-link traffic goes to the gateway at once, no ARP.
  const auto hop = s.next_hop(kRemoteIp);
  REQUIRE(hop);
  CHECK(*hop == kGwIp);
  const auto r = s.resolve(*hop, 2 * kSec, 7);
  CHECK(r.status == NeighbourTable::Resolve::kResolved);
  CHECK(r.mac == kGwMac);
}

TEST_CASE("Malformed ARP is dropped by reason", "[stack][arp]") {
  NetStack s(base_config());
  auto f = arp_request_for_us();
  f.resize(14 + 27);
  CHECK(drop_of(s, f) == RxDrop::kArpMalformed);
  for (size_t field : {14u, 16u}) {  // hardware type, protocol type
    f = arp_request_for_us();
    f[field + 1] ^= 0x10;
    CHECK(drop_of(s, f) == RxDrop::kArpMalformed);
  }
  for (size_t field : {18u, 19u}) {  // address lengths
    f = arp_request_for_us();
    f[field] = 8;
    CHECK(drop_of(s, f) == RxDrop::kArpMalformed);
  }
  f = arp_request_for_us();
  f[21] = 3;  // RARP request
  CHECK(drop_of(s, f) == RxDrop::kArpBadOp);
  // A bad ARP sender MAC from a unicast Ethernet source (a group or zero
  // Ethernet source is dropped before ARP is looked at).
  for (const MacAddr& bad : {MacAddr::broadcast(), MacAddr{}}) {
    f = arp_frame(1, MacAddr::broadcast(), bad, kPeerIp, MacAddr{}, kOurIp);
    std::copy(kPeerMac.bytes.begin(), kPeerMac.bytes.end(), f.begin() + 6);
    CHECK(drop_of(s, f) == RxDrop::kArpBadSender);
  }
  CHECK(drop_of(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kOurIp, MacAddr{}, kOurIp)) ==
        RxDrop::kArpBadSender);  // someone claims our address
  CHECK(drop_of(s, arp_frame(2, kOurMac, kPeerMac, Ipv4Addr{0xFFFFFFFF}, kOurMac, kOurIp)) ==
        RxDrop::kArpBadSender);
  CHECK(s.counters().drops(RxDrop::kArpMalformed) == 5);
  CHECK(s.counters().tx_arp_replies == 0);
  CHECK(s.neighbours().size() == 0);
}

TEST_CASE("Ping to our address gets an echo reply", "[stack][icmp]") {
  NetStack s(base_config());
  std::vector<uint8_t> data(56);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  const auto req = ipv4_frame(1, icmp_echo(8, 0x4d2, 7, data), kPeerIp, kOurIp, 0x10);
  const Rx rx = receive(s, req);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  const auto& r = rx.reply;
  REQUIRE(r.size() == req.size());
  CHECK(MacAddr{{r[0], r[1], r[2], r[3], r[4], r[5]}} == kPeerMac);
  CHECK(MacAddr{{r[6], r[7], r[8], r[9], r[10], r[11]}} == kOurMac);
  CHECK(get16(r, 12) == 0x0800);
  CHECK(r[14] == 0x45);
  CHECK(r[15] == 0x10);  // TOS echoed
  CHECK(get16(r, 16) == req.size() - 14);
  CHECK(r[22] == 64);
  CHECK(r[23] == 1);
  CHECK(ref_checksum(r.data() + 14, 20) == 0);
  CHECK(get32(r, 26) == kOurIp.value);
  CHECK(get32(r, 30) == kPeerIp.value);
  CHECK(r[34] == 0);  // echo reply
  CHECK(r[35] == 0);
  CHECK(ref_checksum(r.data() + 34, r.size() - 34) == 0);
  CHECK(get16(r, 38) == 0x4d2);
  CHECK(get16(r, 40) == 7);
  CHECK(std::equal(data.begin(), data.end(), r.begin() + 42));
  CHECK(s.counters().rx_icmp_echo_requests == 1);
  CHECK(s.counters().tx_icmp_echo_replies == 1);
}

TEST_CASE("Ping reply of a tiny request is padded; odd lengths checksum right", "[stack][icmp]") {
  NetStack s(base_config());
  const auto req = ipv4_frame(1, icmp_echo(8, 1, 1, {0xAB}));
  const Rx rx = receive(s, req);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  REQUIRE(rx.reply.size() == 60);
  CHECK(ref_checksum(rx.reply.data() + 34, 9) == 0);
  CHECK(rx.reply[42] == 0xAB);
  CHECK(rx.reply[43] == 0);
}

TEST_CASE("Bad or unsupported ICMP is dropped by reason", "[stack][icmp]") {
  NetStack s(base_config());
  auto f = ipv4_frame(1, icmp_echo(8, 1, 1, {1, 2, 3, 4}));
  f[42] ^= 0xFF;
  CHECK(drop_of(s, f) == RxDrop::kIcmpBadChecksum);
  CHECK(drop_of(s, ipv4_frame(1, icmp_echo(0, 1, 1, {}))) == RxDrop::kIcmpNotEchoRequest);
  CHECK(drop_of(s, ipv4_frame(1, icmp_echo(3, 1, 1, {}))) == RxDrop::kIcmpNotEchoRequest);
  auto code1 = icmp_echo(8, 1, 1, {});
  code1[1] = 1;
  code1[3] = static_cast<uint8_t>(code1[3] - 1);  // keep the checksum valid
  CHECK(drop_of(s, ipv4_frame(1, code1)) == RxDrop::kIcmpNotEchoRequest);
  CHECK(drop_of(s, ipv4_frame(1, {8, 0, 0xF7, 0xFF})) == RxDrop::kIcmpTruncated);
  // The reply buffer must hold the reply.
  const auto big = ipv4_frame(1, icmp_echo(8, 1, 1, std::vector<uint8_t>(1400, 7)));
  std::vector<uint8_t> small(100);
  const auto r = s.on_rx_frame(big, 0, small);
  CHECK(r.verdict == RxVerdict::kDrop);
  CHECK(r.drop == RxDrop::kReplyBufferTooSmall);
  CHECK(s.counters().tx_icmp_echo_replies == 0);
}

TEST_CASE("Ping answering can be turned off", "[stack][icmp]") {
  NetStackConfig c = base_config();
  c.answer_ping = false;
  NetStack s(c);
  CHECK(drop_of(s, ipv4_frame(1, icmp_echo(8, 1, 1, {}))) == RxDrop::kIcmpDisabled);
}

TEST_CASE("UDP to a configured port is delivered with offsets", "[stack][udp]") {
  NetStack s(base_config());
  const std::vector<uint8_t> payload = {0x64, 0x00, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8};
  auto f = ipv4_frame(17, udp_segment(50000, 4791, payload, false), kPeerIp, kOurIp, 0x03);
  f.resize(f.size() + 6, 0);  // Ethernet padding after the datagram
  const Rx rx = receive(s, f);
  REQUIRE(rx.result.verdict == RxVerdict::kDeliverUdp);
  const UdpDatagram& d = rx.result.udp;
  CHECK(d.src_mac == kPeerMac);
  CHECK(d.src_ip == kPeerIp);
  CHECK(d.dst_ip == kOurIp);
  CHECK(d.src_port == 50000);
  CHECK(d.dst_port == 4791);
  CHECK((d.tos & 3) == 3);  // CE visible to the caller
  CHECK(d.ip_offset == 14);
  CHECK(d.payload_offset == 42);
  CHECK(d.payload_len == payload.size());
  CHECK(std::equal(payload.begin(), payload.end(), f.begin() + d.payload_offset));
  CHECK(s.counters().rx_udp_delivered == 1);

  // With a correct checksum, on the other port.
  const Rx cm = receive(s, udp_frame(kCmPort, {1, 2, 3}, true));
  REQUIRE(cm.result.verdict == RxVerdict::kDeliverUdp);
  CHECK(cm.result.udp.dst_port == kCmPort);
}

TEST_CASE("Bad UDP is dropped by reason", "[stack][udp]") {
  NetStack s(base_config());
  CHECK(drop_of(s, udp_frame(4792, {1})) == RxDrop::kUdpPortClosed);
  auto f = udp_frame(4791, {1, 2, 3, 4}, true);
  f[45] ^= 0x01;  // payload byte
  CHECK(drop_of(s, f) == RxDrop::kUdpBadChecksum);
  f = udp_frame(4791, {1, 2, 3, 4});
  f[38] = 0;
  f[39] = 7;  // UDP length < 8
  CHECK(drop_of(s, f) == RxDrop::kUdpTruncated);
  f = udp_frame(4791, {1, 2, 3, 4});
  f[39] = 13;  // UDP length beyond the IP payload
  CHECK(drop_of(s, f) == RxDrop::kUdpTruncated);
  CHECK(drop_of(s, ipv4_frame(17, {0x12, 0x34, 0x12, 0xB7})) == RxDrop::kUdpTruncated);

  NetStackConfig c = base_config();
  c.verify_udp_checksum = false;
  NetStack lax(c);
  f = udp_frame(4791, {1, 2, 3, 4}, true);
  f[45] ^= 0x01;
  CHECK(receive(lax, f).result.verdict == RxVerdict::kDeliverUdp);
}

TEST_CASE("Bad IPv4 is dropped by reason", "[stack][ipv4]") {
  NetStack s(base_config());
  const auto good = udp_frame(4791, {1, 2, 3, 4});
  REQUIRE(receive(s, good).result.verdict == RxVerdict::kDeliverUdp);

  auto f = good;
  f.resize(14 + 19);
  CHECK(drop_of(s, f) == RxDrop::kIpTruncated);
  f = good;
  f.resize(f.size() - 1);  // shorter than total length
  CHECK(drop_of(s, f) == RxDrop::kIpTruncated);
  f = good;
  f[14] = 0x65;
  fix_ip_checksum(f);
  CHECK(drop_of(s, f) == RxDrop::kIpBadVersion);
  f = good;
  f[14] = 0x44;
  CHECK(drop_of(s, f) == RxDrop::kIpBadHeaderLen);
  f = good;
  f[14] = 0x46;  // one option word
  f.insert(f.begin() + 34, {1, 1, 1, 0});
  f[17] = static_cast<uint8_t>(f[17] + 4);
  fix_ip_checksum(f);
  CHECK(drop_of(s, f) == RxDrop::kIpOptions);
  f = good;
  f[16] = 0;
  f[17] = 19;
  fix_ip_checksum(f);
  CHECK(drop_of(s, f) == RxDrop::kIpBadTotalLen);
  f = good;
  f[24] ^= 0x40;
  CHECK(drop_of(s, f) == RxDrop::kIpBadChecksum);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), kPeerIp, kOurIp, 0, 0x2000)) ==
        RxDrop::kIpFragment);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), kPeerIp, kOurIp, 0, 0x00B9)) ==
        RxDrop::kIpFragment);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), kPeerIp, kGwIp)) ==
        RxDrop::kIpNotForUs);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), kPeerIp,
                              Ipv4Addr::from_octets(198, 18, 0, 255))) == RxDrop::kIpNotForUs);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), kOurIp, kOurIp)) ==
        RxDrop::kIpBadSource);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false),
                              Ipv4Addr::from_octets(224, 0, 0, 5), kOurIp)) ==
        RxDrop::kIpBadSource);
  CHECK(drop_of(s, ipv4_frame(6, std::vector<uint8_t>(20, 0))) == RxDrop::kIpUnknownProtocol);
  CHECK(drop_of(s, ipv4_frame(2, {})) == RxDrop::kIpUnknownProtocol);
}

TEST_CASE("L2 filtering: MAC, ethertype, VLAN", "[stack][l2]") {
  NetStack s(base_config());
  CHECK(drop_of(s, std::vector<uint8_t>(13, 0)) == RxDrop::kL2Truncated);
  CHECK(drop_of(s, {}) == RxDrop::kL2Truncated);
  auto f = udp_frame(4791, {1});
  f[5] = 0x77;  // unicast to another station
  CHECK(drop_of(s, f) == RxDrop::kNotOurMac);
  f = udp_frame(4791, {1});
  for (int i = 0; i < 6; ++i) f[i] = 0xFF;  // IPv4 to broadcast MAC
  CHECK(drop_of(s, f) == RxDrop::kNotOurMac);
  f = udp_frame(4791, {1});
  f[12] = 0x88;
  f[13] = 0xCC;  // LLDP
  CHECK(drop_of(s, f) == RxDrop::kUnknownEtherType);
  f = udp_frame(4791, {1});
  f[12] = 0x86;
  f[13] = 0xDD;  // IPv6, and this stack has no addr6
  CHECK(drop_of(s, f) == RxDrop::kIpv6Off);
  CHECK(drop_of(s, arp_request_for_us(uint16_t{5})) == RxDrop::kVlanMismatch);
  f = arp_request_for_us();
  f[12] = 0x88;
  f[13] = 0xA8;
  CHECK(drop_of(s, f) == RxDrop::kStackedVlan);
  f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x81, 0x00, 0x00};
  CHECK(drop_of(s, f) == RxDrop::kL2Truncated);
  CHECK(s.counters().rx_frames == 9);
  CHECK(s.counters().total_drops() == 9);
}

TEST_CASE("Frames from a group source MAC are dropped before any reply", "[stack][l2]") {
  // No station sends from a group address: answering one would flood the
  // link (a spoofed ping from ff:ff:.. draws a reply to every host).
  NetStack s(base_config());
  const MacAddr bad_sources[] = {MacAddr::broadcast(), MacAddr{{0x01, 0x00, 0x5e, 0, 0, 1}},
                                 MacAddr{{0x33, 0x33, 0, 0, 0, 1}}};
  uint64_t n = 0;
  for (const MacAddr& src : bad_sources) {
    auto ping = ipv4_frame(1, icmp_echo(8, 1, 1, {1, 2, 3, 4}));
    std::copy(src.bytes.begin(), src.bytes.end(), ping.begin() + 6);
    CHECK(drop_of(s, ping) == RxDrop::kL2BadSource);
    // ARP carries its own sender MAC; the Ethernet source is checked first.
    auto arp = arp_request_for_us();
    std::copy(src.bytes.begin(), src.bytes.end(), arp.begin() + 6);
    CHECK(drop_of(s, arp) == RxDrop::kL2BadSource);
    auto udp = udp_frame(4791, {1});
    std::copy(src.bytes.begin(), src.bytes.end(), udp.begin() + 6);
    CHECK(drop_of(s, udp) == RxDrop::kL2BadSource);
    n += 3;
  }
  CHECK(s.counters().drops(RxDrop::kL2BadSource) == n);
  CHECK(s.counters().tx_icmp_echo_replies == 0);
  CHECK(s.counters().tx_arp_replies == 0);
  CHECK(s.neighbours().size() == 0);
  CHECK(std::string(rx_drop_name(RxDrop::kL2BadSource)) == "l2_bad_source");
  // A unicast source still gets its reply.
  CHECK(receive(s, ipv4_frame(1, icmp_echo(8, 1, 1, {}))).result.verdict == RxVerdict::kReply);
}

TEST_CASE("Priority-tagged frames (VID 0) are untagged frames with a priority", "[stack][l2]") {
  // 802.1Q 9.6: VID 0 carries only the PCP (PFC without VLANs).
  NetStack s(base_config());
  const Rx arp = receive(s, arp_request_for_us(uint16_t{3 << 13}));
  REQUIRE(arp.result.verdict == RxVerdict::kReply);
  CHECK(get16(arp.reply, 12) == 0x0806);  // the reply goes untagged, as on this port
  const Rx ping = receive(
      s, ipv4_frame(1, icmp_echo(8, 9, 9, {}), kPeerIp, kOurIp, 0, 0x4000, uint16_t{0xE000}));
  REQUIRE(ping.result.verdict == RxVerdict::kReply);
  CHECK(get16(ping.reply, 12) == 0x0800);
  CHECK(ref_checksum(ping.reply.data() + 14, 20) == 0);
  const Rx udp = receive(
      s, ipv4_frame(17, udp_segment(1, 4791, {5}, true), kPeerIp, kOurIp, 0, 0x4000, uint16_t{0}));
  REQUIRE(udp.result.verdict == RxVerdict::kDeliverUdp);
  CHECK(udp.result.udp.ip_offset == 18);
  CHECK(udp.result.udp.payload_offset == 46);
  CHECK(s.counters().total_drops() == 0);
  CHECK(s.counters().rx_priority_tagged == 3);  // counted; untagged frames are not
  receive(s, arp_request_for_us());
  CHECK(s.counters().rx_priority_tagged == 3);
  // A VLAN port drops them, as it drops untagged frames: 802.1Q puts a VID 0 frame in the
  // port's PVID, the untagged VLAN, which is not conduitd's VLAN.
  NetStackConfig c = base_config();
  c.vlan_id = 100;
  NetStack v(c);
  CHECK(drop_of(v, arp_request_for_us(uint16_t{3 << 13})) == RxDrop::kVlanMismatch);
  CHECK(v.counters().rx_priority_tagged == 0);
}

TEST_CASE("A VLAN stack accepts only its VID and tags what it sends", "[stack][l2]") {
  NetStackConfig c = base_config();
  c.vlan_id = 100;
  c.vlan_pcp = 3;
  NetStack s(c);
  CHECK(s.l2_header_len() == 18);
  CHECK(drop_of(s, arp_request_for_us()) == RxDrop::kVlanMismatch);
  CHECK(drop_of(s, arp_request_for_us(uint16_t{101})) == RxDrop::kVlanMismatch);
  const Rx rx = receive(s, arp_request_for_us(uint16_t{100}));
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  CHECK(get16(rx.reply, 12) == 0x8100);
  CHECK(get16(rx.reply, 14) == (3 << 13 | 100));
  CHECK(get16(rx.reply, 16) == 0x0806);
  CHECK(get16(rx.reply, 24) == 2);

  // Priority bits on received frames are ignored; the VID must match.
  const auto ping =
      ipv4_frame(1, icmp_echo(8, 9, 9, {}), kPeerIp, kOurIp, 0, 0x4000, uint16_t{0xE000 | 100});
  const Rx pr = receive(s, ping);
  REQUIRE(pr.result.verdict == RxVerdict::kReply);
  CHECK(get16(pr.reply, 14) == (3 << 13 | 100));
  CHECK(ref_checksum(pr.reply.data() + 18, 20) == 0);

  auto dbl = arp_request_for_us(uint16_t{100});
  dbl[16] = 0x81;
  dbl[17] = 0x00;
  CHECK(drop_of(s, dbl) == RxDrop::kStackedVlan);

  const auto u =
      ipv4_frame(17, udp_segment(1, 4791, {5}, true), kPeerIp, kOurIp, 0, 0x4000, uint16_t{100});
  const Rx ur = receive(s, u);
  REQUIRE(ur.result.verdict == RxVerdict::kDeliverUdp);
  CHECK(ur.result.udp.ip_offset == 18);
  CHECK(ur.result.udp.payload_offset == 46);
}

TEST_CASE("Routing: on-link by prefix, else the gateway", "[stack][route]") {
  NetStack s(base_config());
  CHECK(s.next_hop(kPeerIp) == kPeerIp);
  CHECK(s.next_hop(Ipv4Addr::from_octets(198, 18, 0, 200)) ==
        Ipv4Addr::from_octets(198, 18, 0, 200));
  CHECK(s.next_hop(kRemoteIp) == kGwIp);
  CHECK(s.next_hop(Ipv4Addr::from_octets(198, 18, 1, 1)) == kGwIp);
  CHECK_FALSE(s.next_hop(kOurIp));
  CHECK_FALSE(s.next_hop(Ipv4Addr{}));
  CHECK_FALSE(s.next_hop(Ipv4Addr::from_octets(239, 1, 1, 1)));
  CHECK(s.counters().no_route == 3);

  NetStackConfig c = base_config();
  c.gateway.reset();
  c.prefix_len = 15;
  NetStack flat(c);
  CHECK(flat.next_hop(kRemoteIp) == kRemoteIp);  // 198.19/16 is inside 198.18/15
  CHECK_FALSE(flat.next_hop(Ipv4Addr::from_octets(198, 20, 0, 1)));
}

TEST_CASE("Static neighbours from config resolve without ARP", "[stack][arp]") {
  NetStackConfig c = base_config();
  c.static_neighbours = {{kGwIp, kGwMac}};
  NetStack s(c);
  const auto r = s.resolve(*s.next_hop(kRemoteIp), 0, 9);
  CHECK(r.status == NeighbourTable::Resolve::kResolved);
  CHECK(r.mac == kGwMac);
  CHECK(s.pending_actions() == 0);
  CHECK(s.remove_neighbour(kGwIp));
  CHECK(s.resolve(kGwIp, 0, 9).status == NeighbourTable::Resolve::kQueued);
}

TEST_CASE("write_udp_headers builds a frame the classifier accepts", "[stack][tx]") {
  NetStackConfig c = base_config();
  c.vlan_id = 7;
  NetStack tx(c);
  NetStackConfig rc = base_config();
  rc.mac = kPeerMac;
  rc.addr = kPeerIp;
  rc.vlan_id = 7;
  NetStack rx(rc);

  std::vector<uint8_t> f(200, 0);
  const size_t hdr = tx.write_udp_headers(f, kPeerMac, kPeerIp, 50001, 4791, 0x02, 100);
  REQUIRE(hdr == 18 + 28);
  f.resize(hdr + 100);
  CHECK(f[18 + 6] == 0x40);      // DF
  CHECK(get16(f, 18 + 4) == 0);  // ID 0
  CHECK(ref_checksum(f.data() + 18, 20) == 0);
  std::vector<uint8_t> scratch(64);
  const RxResult r = rx.on_rx_frame(f, 0, scratch);
  REQUIRE(r.verdict == RxVerdict::kDeliverUdp);
  CHECK(r.udp.src_ip == kOurIp);
  CHECK(r.udp.src_port == 50001);
  CHECK(r.udp.tos == 0x02);
  CHECK(r.udp.payload_len == 100);

  std::vector<uint8_t> tiny(40);
  CHECK(tx.write_udp_headers(tiny, kPeerMac, kPeerIp, 1, 2, 0, 10) == 0);
  CHECK(tx.write_udp_headers(f, kPeerMac, kPeerIp, 1, 2, 0, 65536) == 0);
  CHECK(tx.write_udp_headers(f, kPeerMac, kPeerIp, 1, 2, 0, 65535 - 28) == hdr);
}

TEST_CASE("Bad stack configuration is rejected with a reason", "[stack]") {
  auto rejects = [](auto mutate, const char* what) {
    NetStackConfig c = base_config();
    mutate(c);
    try {
      NetStack s(c);
      FAIL("accepted: " << what);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  rejects([](NetStackConfig& c) { c.mac = MacAddr::broadcast(); }, "MAC");
  rejects([](NetStackConfig& c) { c.addr = Ipv4Addr{}; }, "0.0.0.0");
  rejects([](NetStackConfig& c) { c.prefix_len = 33; }, "prefix");
  rejects([](NetStackConfig& c) { c.prefix_len = 0; }, "prefix");
  rejects([](NetStackConfig& c) { c.gateway = kRemoteIp; }, "gateway");
  rejects([](NetStackConfig& c) { c.gateway = kOurIp; }, "gateway");
  rejects([](NetStackConfig& c) { c.vlan_id = 4095; }, "VLAN");
  rejects([](NetStackConfig& c) { c.vlan_id = 0; }, "VLAN");
  rejects([](NetStackConfig& c) { c.udp_ports.push_back(0); }, "port 0");
  rejects([](NetStackConfig& c) { c.static_neighbours = {{kPeerIp, MacAddr{}}}; }, "static");
  rejects([](NetStackConfig& c) { c.neighbour.capacity = 0; }, "capacity");
}

TEST_CASE("rx_drop_name gives every reason a distinct name", "[stack]") {
  std::set<std::string> names;
  for (size_t i = 0; i < kRxDropCount; ++i) names.insert(rx_drop_name(static_cast<RxDrop>(i)));
  CHECK(names.size() == kRxDropCount);
  CHECK(names.count("unknown") == 0);
  CHECK(std::string(rx_drop_name(RxDrop::kIpFragment)) == "ip_fragment");
}

// Frames made by scapy (tests/fuzz/net/make_seeds.py): checksums from an
// independent implementation.
TEST_CASE("Known answers: scapy-built ping and UDP frames", "[stack][known]") {
  const std::vector<uint8_t> ping = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00,
      0x45, 0x00, 0x00, 0x54, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0xae, 0x81, 0xc6, 0x12,
      0x00, 0x02, 0xc6, 0x12, 0x00, 0x01, 0x08, 0x00, 0x00, 0xe5, 0x00, 0x07, 0x00, 0x01,
      0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
      0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b,
      0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29,
      0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37};
  const std::vector<uint8_t> udp = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08,
      0x00, 0x45, 0x00, 0x00, 0x26, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xae, 0x9f,
      0xc6, 0x12, 0x00, 0x02, 0xc6, 0x12, 0x00, 0x01, 0x48, 0x53, 0x48, 0x53, 0x00,
      0x12, 0xc4, 0x23, 0x63, 0x6f, 0x6e, 0x64, 0x75, 0x69, 0x74, 0x2d, 0x63, 0x6d};
  NetStack s(base_config());
  const Rx rx = receive(s, ping);
  REQUIRE(rx.result.verdict == RxVerdict::kReply);
  // Same IPv4 header with the addresses swapped: the same checksum. ICMP type
  // 8 -> 0 raises the checksum by 0x0800 (RFC 1624).
  CHECK(get16(rx.reply, 24) == 0xae81);
  CHECK(get16(rx.reply, 36) == 0x08e5);
  const Rx u = receive(s, udp);
  REQUIRE(u.result.verdict == RxVerdict::kDeliverUdp);
  CHECK(u.result.udp.payload_len == 10);
  CHECK(u.result.udp.src_port == kCmPort);
}

TEST_CASE("announce() sends a gratuitous ARP for our address", "[stack][arp]") {
  NetStack s(base_config());
  s.announce();
  const auto actions = take_all(s);
  REQUIRE(actions.size() == 1);
  const std::vector<uint8_t> f(actions[0].bytes.begin(), actions[0].bytes.begin() + actions[0].len);
  CHECK(MacAddr{{f[0], f[1], f[2], f[3], f[4], f[5]}}.is_broadcast());
  CHECK(get16(f, 20) == 1);
  CHECK(get32(f, 28) == kOurIp.value);  // sender
  CHECK(get32(f, 38) == kOurIp.value);  // target
  // Our own announcement looped back is not an ARP for us to answer.
  CHECK(drop_of(s, f) == RxDrop::kArpBadSender);
}

TEST_CASE("Martian and broadcast addresses are never peers", "[stack][route]") {
  NetStack s(base_config());
  const Ipv4Addr bcast = Ipv4Addr::from_octets(198, 18, 0, 255);
  const Ipv4Addr loop = Ipv4Addr::from_octets(127, 0, 0, 1);
  CHECK_FALSE(s.next_hop(bcast));
  CHECK_FALSE(s.next_hop(loop));
  CHECK(drop_of(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, bcast, MacAddr{}, kOurIp)) ==
        RxDrop::kArpBadSender);
  CHECK(drop_of(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, loop, MacAddr{}, kOurIp)) ==
        RxDrop::kArpBadSender);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), bcast, kOurIp)) ==
        RxDrop::kIpBadSource);
  CHECK(drop_of(s, ipv4_frame(17, udp_segment(1, 4791, {1}, false), loop, kOurIp)) ==
        RxDrop::kIpBadSource);
  // resolve() only takes on-link peers.
  CHECK(s.resolve(kRemoteIp, 0, 1).status == NeighbourTable::Resolve::kDropped);
  CHECK(s.resolve(bcast, 0, 1).status == NeighbourTable::Resolve::kDropped);
  CHECK(s.pending_actions() == 0);

  NetStackConfig c = base_config();
  c.prefix_len = 31;  // RFC 3021: both addresses are hosts
  c.gateway.reset();
  c.addr = Ipv4Addr::from_octets(198, 18, 0, 0);
  NetStack p2p(c);
  CHECK(p2p.next_hop(Ipv4Addr::from_octets(198, 18, 0, 1)) == Ipv4Addr::from_octets(198, 18, 0, 1));
}

TEST_CASE("The generation moves on an ARP with a new MAC, not on one with the same",
          "[stack][arp][generation]") {
  NetStack s(base_config());
  CHECK(s.resolve(kPeerIp, 0, 1).status == NeighbourTable::Resolve::kQueued);
  receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp), 10);
  take_all(s);
  const uint64_t g0 = s.generation();
  // The peer's ARP replies and requests, and its broadcasts for others, with the MAC we know.
  receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp), kSec);
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kOurIp), 2 * kSec);
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kGwIp), 3 * kSec);
  CHECK(s.generation() == g0);
  CHECK(s.resolve(kPeerIp, 3 * kSec).mac == kPeerMac);
  // A gratuitous ARP (a request for its own address) from a new MAC.
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  receive(s, arp_frame(1, MacAddr::broadcast(), moved, kPeerIp, MacAddr{}, kPeerIp), 4 * kSec);
  CHECK(s.generation() != g0);
  CHECK(s.resolve(kPeerIp, 4 * kSec).mac == moved);
  // Aging out moves it too.
  const uint64_t g1 = s.generation();
  s.poll_timers(4 * kSec + s.config().neighbour.reachable_ns);
  CHECK_FALSE(s.neighbours().find(kPeerIp));
  CHECK(s.generation() != g1);
}

TEST_CASE("Of two ARP replies back to back the first wins; a gratuitous ARP still moves the MAC",
          "[stack][arp][generation]") {
  NetStack s(base_config());
  const MacAddr proxy{{0x02, 0, 0, 0, 0, 0x44}};
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  CHECK(s.resolve(kPeerIp, 0, 1).status == NeighbourTable::Resolve::kQueued);
  take_all(s);
  // Linux's arp_process: inside the locktime (1 s) of the entry's last change, only a
  // gratuitous ARP or a request to us may change the MAC.
  receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp), 10);
  const uint64_t g0 = s.generation();
  receive(s, arp_frame(2, kOurMac, proxy, kPeerIp, kOurMac, kOurIp), 20);
  CHECK(s.resolve(kPeerIp, 30).mac == kPeerMac);
  receive(s, arp_frame(1, MacAddr::broadcast(), proxy, kPeerIp, MacAddr{}, kGwIp), 40);
  CHECK(s.resolve(kPeerIp, 50).mac == kPeerMac);
  CHECK(s.neighbours().counters().locktime_ignored == 2);
  CHECK(s.generation() == g0);
  receive(s, arp_frame(1, MacAddr::broadcast(), moved, kPeerIp, MacAddr{}, kPeerIp), 60);
  CHECK(s.resolve(kPeerIp, 70).mac == moved);
  CHECK(s.generation() != g0);
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kOurIp), 80);
  CHECK(s.resolve(kPeerIp, 90).mac == kPeerMac);
  // After the locktime a reply with another MAC is taken.
  receive(s, arp_frame(2, kOurMac, proxy, kPeerIp, kOurMac, kOurIp), 80 + kSec);
  CHECK(s.resolve(kPeerIp, 90 + kSec).mac == proxy);
  CHECK(s.neighbours().counters().locktime_ignored == 2);
}

TEST_CASE("A gratuitous ARP reply names its sender's MAC as target MAC too", "[stack][arp]") {
  // RFC 5227 section 3 / Linux's arp_is_garp: an ARP reply is gratuitous (and may move a MAC
  // inside the locktime) only when, besides sender address = target address, its target MAC
  // is the sender MAC. Anything else is an ordinary reply, held to the locktime.
  NetStack s(base_config());
  const MacAddr proxy{{0x02, 0, 0, 0, 0, 0x44}};
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  CHECK(s.resolve(kPeerIp, 0, 1).status == NeighbourTable::Resolve::kQueued);
  receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp), 10);
  take_all(s);
  const uint64_t g0 = s.generation();
  // Sender = target address, but the target MAC is not the sender's: not gratuitous.
  receive(s, arp_frame(2, MacAddr::broadcast(), proxy, kPeerIp, MacAddr{}, kPeerIp), 20);
  receive(s, arp_frame(2, MacAddr::broadcast(), proxy, kPeerIp, kOurMac, kPeerIp), 30);
  CHECK(s.resolve(kPeerIp, 40).mac == kPeerMac);
  CHECK(s.neighbours().counters().locktime_ignored == 2);
  CHECK(s.generation() == g0);
  // A gratuitous reply (target MAC = sender MAC) moves it inside the locktime.
  receive(s, arp_frame(2, MacAddr::broadcast(), moved, kPeerIp, moved, kPeerIp), 50);
  CHECK(s.resolve(kPeerIp, 60).mac == moved);
  CHECK(s.neighbours().counters().locktime_ignored == 2);
  CHECK(s.generation() != g0);
}

TEST_CASE(
    "Only a unicast ARP reply proves a neighbour reachable; requests and broadcasts make a "
    "new MAC stale",
    "[stack][arp][generation]") {
  // Linux's arp_process: "Broadcast replies and request packets do not assert neighbour
  // reachability": they update the entry to STALE, which keeps the state when the MAC is the
  // one known.
  NetStack s(base_config());
  const uint64_t reachable = s.config().neighbour.reachable_ns;
  const uint64_t window = s.config().neighbour.refresh_window_ns;
  const MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  CHECK(s.resolve(kPeerIp, 0, 1).status == NeighbourTable::Resolve::kQueued);
  receive(s, arp_frame(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp), 10);
  take_all(s);
  REQUIRE(s.neighbours().find(kPeerIp)->deadline_ns == 10 + reachable);
  // Its requests (to us, for others) and a gratuitous ARP, with the MAC we know: no change.
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kOurIp), 2 * kSec);
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kGwIp), 3 * kSec);
  receive(s, arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kPeerIp), 4 * kSec);
  CHECK(s.neighbours().find(kPeerIp)->deadline_ns == 10 + reachable);
  // A gratuitous ARP with a new MAC: taken, STALE; the next use probes the new MAC.
  const uint64_t g0 = s.generation();
  receive(s, arp_frame(1, MacAddr::broadcast(), moved, kPeerIp, MacAddr{}, kPeerIp), 5 * kSec);
  CHECK(s.neighbours().find(kPeerIp)->mac == moved);
  CHECK(s.neighbours().find(kPeerIp)->deadline_ns == 5 * kSec + window);
  CHECK(s.generation() != g0);
  CHECK(s.resolve(kPeerIp, 5 * kSec + 1).mac == moved);
  auto probe = take_all(s);
  REQUIRE(probe.size() == 1);
  CHECK(get_mac(std::vector<uint8_t>(probe[0].bytes.begin(), probe[0].bytes.end()), 0) == moved);
  // A broadcast reply does not confirm it; the unicast answer to the probe does.
  receive(s, arp_frame(2, MacAddr::broadcast(), moved, kPeerIp, kOurMac, kOurIp), 6 * kSec);
  CHECK(s.neighbours().find(kPeerIp)->deadline_ns == 5 * kSec + window);
  receive(s, arp_frame(2, kOurMac, moved, kPeerIp, kOurMac, kOurIp), 7 * kSec);
  CHECK(s.neighbours().find(kPeerIp)->deadline_ns == 7 * kSec + reachable);
  // A new peer's request to us makes its entry, STALE.
  receive(s, arp_frame(1, MacAddr::broadcast(), kGwMac, kGwIp, MacAddr{}, kOurIp), 8 * kSec);
  REQUIRE(s.neighbours().find(kGwIp));
  CHECK(s.neighbours().find(kGwIp)->deadline_ns == 8 * kSec + window);
  CHECK(s.neighbours().counters().learned_stale == 2);
}
