// Builders for well-formed test frames, written byte by byte from the RFC
// layouts (not through the structs under test), so a layout bug in the
// headers cannot cancel out in the tests. Tests then corrupt single fields.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "net/ipv4_addr.h"
#include "net/ipv6_addr.h"
#include "net/mac_addr.h"

namespace conduit::net::test {

inline const MacAddr kOurMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
inline const MacAddr kPeerMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
inline const MacAddr kGwMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe}};
inline constexpr Ipv4Addr kOurIp = Ipv4Addr::from_octets(198, 18, 0, 1);
inline constexpr Ipv4Addr kPeerIp = Ipv4Addr::from_octets(198, 18, 0, 2);
inline constexpr Ipv4Addr kGwIp = Ipv4Addr::from_octets(198, 18, 0, 254);
inline constexpr Ipv4Addr kRemoteIp = Ipv4Addr::from_octets(198, 19, 7, 9);  // off-link

inline void put16(std::vector<uint8_t>& f, uint16_t v) {
  f.push_back(static_cast<uint8_t>(v >> 8));
  f.push_back(static_cast<uint8_t>(v));
}
inline void put32(std::vector<uint8_t>& f, uint32_t v) {
  put16(f, static_cast<uint16_t>(v >> 16));
  put16(f, static_cast<uint16_t>(v));
}
inline void put_mac(std::vector<uint8_t>& f, MacAddr m) {
  f.insert(f.end(), m.bytes.begin(), m.bytes.end());
}
inline uint16_t get16(const std::vector<uint8_t>& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
inline uint32_t get32(const std::vector<uint8_t>& f, size_t at) {
  return uint32_t{get16(f, at)} << 16 | get16(f, at + 2);
}

// Reference RFC 1071 checksum, written independently of net/checksum.cc.
inline uint16_t ref_checksum(const uint8_t* p, size_t n, uint64_t sum = 0) {
  for (size_t i = 0; i < n; ++i) sum += (i % 2 == 0) ? uint32_t{p[i]} << 8 : p[i];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

inline void put_eth(std::vector<uint8_t>& f, MacAddr dst, MacAddr src, uint16_t type,
                    std::optional<uint16_t> vid = std::nullopt) {
  put_mac(f, dst);
  put_mac(f, src);
  if (vid) {
    put16(f, 0x8100);
    put16(f, *vid);
  }
  put16(f, type);
}

inline std::vector<uint8_t> arp_frame(uint16_t op, MacAddr eth_dst, MacAddr sender_mac,
                                      Ipv4Addr sender_ip, MacAddr target_mac, Ipv4Addr target_ip,
                                      std::optional<uint16_t> vid = std::nullopt) {
  std::vector<uint8_t> f;
  put_eth(f, eth_dst, sender_mac, 0x0806, vid);
  put16(f, 1);
  put16(f, 0x0800);
  f.push_back(6);
  f.push_back(4);
  put16(f, op);
  put_mac(f, sender_mac);
  put32(f, sender_ip.value);
  put_mac(f, target_mac);
  put32(f, target_ip.value);
  while (f.size() < 60) f.push_back(0);
  return f;
}

inline std::vector<uint8_t> arp_request_for_us(std::optional<uint16_t> vid = std::nullopt) {
  return arp_frame(1, MacAddr::broadcast(), kPeerMac, kPeerIp, MacAddr{}, kOurIp, vid);
}

// An IPv4 packet (no options) with the given L4 bytes; the header checksum
// is correct. Offsets: IPv4 header at 14 (18 with a VLAN tag).
inline std::vector<uint8_t> ipv4_frame(uint8_t proto, const std::vector<uint8_t>& l4,
                                       Ipv4Addr src = kPeerIp, Ipv4Addr dst = kOurIp,
                                       uint8_t tos = 0, uint16_t flags_frag = 0x4000,
                                       std::optional<uint16_t> vid = std::nullopt) {
  std::vector<uint8_t> f;
  put_eth(f, kOurMac, kPeerMac, 0x0800, vid);
  const size_t ip = f.size();
  f.push_back(0x45);
  f.push_back(tos);
  put16(f, static_cast<uint16_t>(20 + l4.size()));
  put16(f, 0x1234);
  put16(f, flags_frag);
  f.push_back(64);
  f.push_back(proto);
  put16(f, 0);
  put32(f, src.value);
  put32(f, dst.value);
  const uint16_t c = ref_checksum(f.data() + ip, 20);
  f[ip + 10] = static_cast<uint8_t>(c >> 8);
  f[ip + 11] = static_cast<uint8_t>(c);
  f.insert(f.end(), l4.begin(), l4.end());
  return f;
}

// Recomputes the IPv4 header checksum after a test changed a header field.
inline void fix_ip_checksum(std::vector<uint8_t>& f, size_t ip = 14) {
  f[ip + 10] = 0;
  f[ip + 11] = 0;
  const uint16_t c = ref_checksum(f.data() + ip, (f[ip] & 0xF) * 4u);
  f[ip + 10] = static_cast<uint8_t>(c >> 8);
  f[ip + 11] = static_cast<uint8_t>(c);
}

inline std::vector<uint8_t> icmp_echo(uint8_t type, uint16_t id, uint16_t seq,
                                      const std::vector<uint8_t>& data) {
  std::vector<uint8_t> m;
  m.push_back(type);
  m.push_back(0);
  put16(m, 0);
  put16(m, id);
  put16(m, seq);
  m.insert(m.end(), data.begin(), data.end());
  const uint16_t c = ref_checksum(m.data(), m.size());
  m[2] = static_cast<uint8_t>(c >> 8);
  m[3] = static_cast<uint8_t>(c);
  return m;
}

// UDP with a correct checksum when with_checksum, else checksum 0.
inline std::vector<uint8_t> udp_segment(uint16_t src_port, uint16_t dst_port,
                                        const std::vector<uint8_t>& payload, bool with_checksum,
                                        Ipv4Addr src = kPeerIp, Ipv4Addr dst = kOurIp) {
  std::vector<uint8_t> u;
  put16(u, src_port);
  put16(u, dst_port);
  put16(u, static_cast<uint16_t>(8 + payload.size()));
  put16(u, 0);
  u.insert(u.end(), payload.begin(), payload.end());
  if (with_checksum) {
    uint32_t pseudo = (src.value >> 16) + (src.value & 0xFFFF) + (dst.value >> 16) +
                      (dst.value & 0xFFFF) + 17 + static_cast<uint32_t>(u.size());
    uint16_t c = ref_checksum(u.data(), u.size(), pseudo);
    if (c == 0) c = 0xFFFF;
    u[6] = static_cast<uint8_t>(c >> 8);
    u[7] = static_cast<uint8_t>(c);
  }
  return u;
}

// ---- IPv6 ----

// 2001:db8:0:1::/64 on the link; fe80::fe is the router.
inline constexpr Ipv6Addr kOurIp6 = Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 1, 0, 0, 0, 1});
inline constexpr Ipv6Addr kPeerIp6 = Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 1, 0, 0, 0, 2});
inline constexpr Ipv6Addr kPeerLl6 =
    Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0x0000, 0x00ff, 0xfe00, 0x0002});
inline constexpr Ipv6Addr kGwIp6 = Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0, 0, 0, 0xfe});
inline constexpr Ipv6Addr kRemoteIp6 = Ipv6Addr::from_groups({0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 9});
inline const MacAddr kAllNodesMac{{0x33, 0x33, 0, 0, 0, 1}};
inline const MacAddr kOurSolicitedMac{{0x33, 0x33, 0xff, 0, 0, 0x01}};  // ff02::1:ff00:1

inline void put_ip6(std::vector<uint8_t>& f, const Ipv6Addr& a) {
  f.insert(f.end(), a.bytes.begin(), a.bytes.end());
}
inline Ipv6Addr get_ip6(const std::vector<uint8_t>& f, size_t at) {
  Ipv6Addr a;
  for (size_t i = 0; i < 16; ++i) a.bytes[i] = f[at + i];
  return a;
}
inline MacAddr get_mac(const std::vector<uint8_t>& f, size_t at) {
  return MacAddr{{f[at], f[at + 1], f[at + 2], f[at + 3], f[at + 4], f[at + 5]}};
}

// Sum of the IPv6 pseudo-header (RFC 8200 8.1) for ref_checksum.
inline uint64_t ref_pseudo6(const Ipv6Addr& src, const Ipv6Addr& dst, uint32_t len, uint8_t nh) {
  uint64_t sum = 0;
  for (size_t i = 0; i < 16; i += 2) {
    sum += uint32_t{src.bytes[i]} << 8 | src.bytes[i + 1];
    sum += uint32_t{dst.bytes[i]} << 8 | dst.bytes[i + 1];
  }
  return sum + (len >> 16) + (len & 0xFFFF) + nh;
}

struct Ip6Opts {
  Ipv6Addr src = kPeerIp6;
  Ipv6Addr dst = kOurIp6;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  MacAddr eth_dst = kOurMac;
  MacAddr eth_src = kPeerMac;
  std::optional<uint16_t> vid;
};

// An IPv6 packet with the given payload (no extension headers unless the
// payload holds them). Offsets: IPv6 header at 14 (18 with a VLAN tag).
inline std::vector<uint8_t> ipv6_frame(uint8_t next_header, const std::vector<uint8_t>& payload,
                                       const Ip6Opts& o = {}) {
  std::vector<uint8_t> f;
  put_eth(f, o.eth_dst, o.eth_src, 0x86DD, o.vid);
  put32(f, 6u << 28 | uint32_t{o.traffic_class} << 20 | 0x12345);  // flow label 0x12345
  put16(f, static_cast<uint16_t>(payload.size()));
  f.push_back(next_header);
  f.push_back(o.hop_limit);
  put_ip6(f, o.src);
  put_ip6(f, o.dst);
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

// An ICMPv6 message (type, code, body after the checksum) with its checksum.
inline std::vector<uint8_t> icmp6(uint8_t type, uint8_t code, const std::vector<uint8_t>& body,
                                  const Ipv6Addr& src, const Ipv6Addr& dst) {
  std::vector<uint8_t> m = {type, code, 0, 0};
  m.insert(m.end(), body.begin(), body.end());
  const uint16_t c =
      ref_checksum(m.data(), m.size(), ref_pseudo6(src, dst, static_cast<uint32_t>(m.size()), 58));
  m[2] = static_cast<uint8_t>(c >> 8);
  m[3] = static_cast<uint8_t>(c);
  return m;
}

// NS/NA body: 4 bytes flags/reserved, target, options.
inline std::vector<uint8_t> ndp_body(uint32_t flags, const Ipv6Addr& target,
                                     const std::vector<uint8_t>& options = {}) {
  std::vector<uint8_t> b;
  put32(b, flags);
  put_ip6(b, target);
  b.insert(b.end(), options.begin(), options.end());
  return b;
}
inline std::vector<uint8_t> lla_option(uint8_t type, MacAddr mac) {
  std::vector<uint8_t> o = {type, 1};
  put_mac(o, mac);
  return o;
}

// A Neighbor Solicitation frame for `target` (hop limit 255).
inline std::vector<uint8_t> ns_frame(const Ipv6Addr& target, const std::vector<uint8_t>& options,
                                     Ip6Opts o) {
  o.hop_limit = 255;
  return ipv6_frame(58, icmp6(135, 0, ndp_body(0, target, options), o.src, o.dst), o);
}
// The usual one: from the peer to our solicited-node group, with its SLLA.
inline std::vector<uint8_t> ns_for_us(std::optional<uint16_t> vid = std::nullopt) {
  Ip6Opts o;
  o.dst = Ipv6Addr::solicited_node(kOurIp6);
  o.eth_dst = kOurSolicitedMac;
  o.vid = vid;
  return ns_frame(kOurIp6, lla_option(1, kPeerMac), o);
}
// A Neighbor Advertisement frame (hop limit 255) from src to us.
inline std::vector<uint8_t> na_frame(uint32_t flags, const Ipv6Addr& target,
                                     const std::vector<uint8_t>& options, Ip6Opts o) {
  o.hop_limit = 255;
  return ipv6_frame(58, icmp6(136, 0, ndp_body(flags, target, options), o.src, o.dst), o);
}

// UDP over IPv6: with a correct checksum when with_checksum, else 0.
inline std::vector<uint8_t> udp6_segment(uint16_t src_port, uint16_t dst_port,
                                         const std::vector<uint8_t>& payload, bool with_checksum,
                                         const Ipv6Addr& src = kPeerIp6,
                                         const Ipv6Addr& dst = kOurIp6) {
  std::vector<uint8_t> u;
  put16(u, src_port);
  put16(u, dst_port);
  put16(u, static_cast<uint16_t>(8 + payload.size()));
  put16(u, 0);
  u.insert(u.end(), payload.begin(), payload.end());
  if (with_checksum) {
    uint16_t c = ref_checksum(u.data(), u.size(),
                              ref_pseudo6(src, dst, static_cast<uint32_t>(u.size()), 17));
    if (c == 0) c = 0xFFFF;
    u[6] = static_cast<uint8_t>(c >> 8);
    u[7] = static_cast<uint8_t>(c);
  }
  return u;
}

}  // namespace conduit::net::test
