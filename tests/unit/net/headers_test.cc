// Header layouts against hand-written wire bytes.
#include <catch2/catch.hpp>
#include <cstddef>

#include "net/arp.h"
#include "net/checksum.h"
#include "net/ethernet.h"
#include "net/header_io.h"
#include "net/icmp.h"
#include "net/ipv4.h"
#include "net/udp.h"
#include "test_frames.h"

using namespace conduit::net;
using namespace conduit::net::test;

TEST_CASE("Header field offsets match the RFCs", "[headers]") {
  STATIC_REQUIRE(offsetof(EthernetHeader, ether_type) == 12);
  STATIC_REQUIRE(offsetof(ArpPacket, op) == 6);
  STATIC_REQUIRE(offsetof(ArpPacket, sender_ip) == 14);
  STATIC_REQUIRE(offsetof(ArpPacket, target_ip) == 24);
  STATIC_REQUIRE(offsetof(Ipv4Header, total_len) == 2);
  STATIC_REQUIRE(offsetof(Ipv4Header, flags_frag) == 6);
  STATIC_REQUIRE(offsetof(Ipv4Header, checksum) == 10);
  STATIC_REQUIRE(offsetof(Ipv4Header, dst) == 16);
  STATIC_REQUIRE(offsetof(UdpHeader, length) == 4);
  STATIC_REQUIRE(offsetof(IcmpEchoHeader, sequence) == 6);
}

TEST_CASE("Headers decode hand-built frames", "[headers]") {
  const auto f = ipv4_frame(17, udp_segment(1234, 4791, {1, 2, 3}, true), kPeerIp, kOurIp, 0x02,
                            0x4000, uint16_t{0x0123});
  const auto eth = load_header<EthernetHeader>(f, 0);
  REQUIRE(eth);
  CHECK(eth->dst == kOurMac);
  CHECK(eth->ether_type.host() == kEtherTypeVlan);
  const auto tag = load_header<VlanTag>(f, 14);
  REQUIRE(tag);
  CHECK(tag->vid() == 0x123);
  CHECK(tag->ether_type.host() == kEtherTypeIpv4);
  const auto ip = load_header<Ipv4Header>(f, 18);
  REQUIRE(ip);
  CHECK(ip->version() == 4);
  CHECK(ip->header_len_bytes() == 20);
  CHECK(ip->ecn() == 2);
  CHECK(ip->total_len.host() == 20 + 8 + 3);
  CHECK_FALSE(ip->is_fragment());
  CHECK(Ipv4Addr::from_be(ip->src) == kPeerIp);
  const auto udp = load_header<UdpHeader>(f, 38);
  REQUIRE(udp);
  CHECK(udp->dst_port.host() == 4791);
  CHECK(udp->length.host() == 11);
}

TEST_CASE("load_header refuses short frames and odd offsets", "[headers]") {
  const std::vector<uint8_t> f(20, 0);
  CHECK(load_header<Ipv4Header>(f, 0));
  CHECK_FALSE(load_header<Ipv4Header>(f, 1));
  CHECK_FALSE(load_header<Ipv4Header>(f, 21));
  CHECK_FALSE(load_header<Ipv4Header>(f, SIZE_MAX));
  std::vector<uint8_t> out(10, 0);
  CHECK_FALSE(store_header(std::span<uint8_t>(out), 4, UdpHeader{}));
  CHECK(store_header(std::span<uint8_t>(out), 2, UdpHeader{}));
}

TEST_CASE("Fragment detection", "[headers]") {
  Ipv4Header h{};
  h.flags_frag = Be16::from_host(kIpv4FlagDf);
  CHECK_FALSE(h.is_fragment());
  h.flags_frag = Be16::from_host(kIpv4FlagMf);
  CHECK(h.is_fragment());
  h.flags_frag = Be16::from_host(185);  // last fragment at offset 1480
  CHECK(h.is_fragment());
}

TEST_CASE("Internet checksum: RFC 1071 example and known IPv4 header", "[checksum]") {
  // RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to ddf2 (checksum 220d).
  const uint8_t rfc[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  CHECK(checksum_finish(checksum_partial(rfc)) == 0x220d);
  // A commonly cited header: 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7.
  uint8_t hdr[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  CHECK(ipv4_header_checksum(hdr) == 0xb861);
  hdr[10] = 0xb8;
  hdr[11] = 0x61;
  CHECK(ipv4_header_checksum(hdr) == 0);
  hdr[15] ^= 1;
  CHECK(ipv4_header_checksum(hdr) != 0);
}

TEST_CASE("Checksum pieces chain and odd tails pad with zero", "[checksum]") {
  std::vector<uint8_t> data(1001);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint16_t whole = checksum_finish(checksum_partial(data));
  CHECK(whole == ref_checksum(data.data(), data.size()));
  const std::span<const uint8_t> s(data);
  const uint32_t part = checksum_partial(s.subspan(500), checksum_partial(s.first(500)));
  CHECK(checksum_finish(part) == whole);
  // Large input: carries beyond 32 bits are folded, not lost.
  std::vector<uint8_t> ones(200000, 0xFF);
  CHECK(checksum_finish(checksum_partial(ones)) == ref_checksum(ones.data(), ones.size()));
}

TEST_CASE("UDP pseudo-header sum matches a hand-computed one", "[checksum]") {
  const auto u = udp_segment(1000, 4791, {9, 8, 7, 6, 5}, true);
  const uint32_t pseudo = udp_pseudo_header_sum(kPeerIp, kOurIp, static_cast<uint16_t>(u.size()));
  CHECK(checksum_finish(checksum_partial(u, pseudo)) == 0);
}
