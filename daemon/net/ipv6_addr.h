// IPv6 address as its 16 wire bytes (the API type; headers hold the same
// bytes, so no byte order question arises).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/mac_addr.h"

namespace conduit::net {

struct Ipv6Addr {
  std::array<uint8_t, 16> bytes{};  // network order: ff02::1 is {0xff, 0x02, 0, .., 0, 1}

  // ff02::1, the link-local all-nodes group.
  static constexpr Ipv6Addr all_nodes() {
    Ipv6Addr a;
    a.bytes[0] = 0xff;
    a.bytes[1] = 0x02;
    a.bytes[15] = 0x01;
    return a;
  }
  // ff02::2, the link-local all-routers group.
  static constexpr Ipv6Addr all_routers() {
    Ipv6Addr a = all_nodes();
    a.bytes[15] = 0x02;
    return a;
  }
  // Eight 16-bit groups, host order: from_groups({0xfe80, 0, 0, 0, 0, 0, 0, 1}) is fe80::1.
  static constexpr Ipv6Addr from_groups(const std::array<uint16_t, 8>& groups) {
    Ipv6Addr a;
    for (size_t i = 0; i < 8; ++i) {
      a.bytes[2 * i] = static_cast<uint8_t>(groups[i] >> 8);
      a.bytes[2 * i + 1] = static_cast<uint8_t>(groups[i]);
    }
    return a;
  }
  // ::ffff:a.b.c.d (RFC 4291 section 2.5.5.2); for text round trips only,
  // the stack never accepts these on the wire.
  static constexpr Ipv6Addr v4_mapped(uint32_t v4_host_order) {
    Ipv6Addr a;
    a.bytes[10] = 0xff;
    a.bytes[11] = 0xff;
    for (size_t i = 0; i < 4; ++i)
      a.bytes[12 + i] = static_cast<uint8_t>(v4_host_order >> (24 - 8 * i));
    return a;
  }

  constexpr bool is_unspecified() const { return *this == Ipv6Addr{}; }
  constexpr bool is_loopback() const {  // ::1
    Ipv6Addr one;
    one.bytes[15] = 1;
    return *this == one;
  }
  constexpr bool is_multicast() const { return bytes[0] == 0xff; }  // ff00::/8
  constexpr bool is_link_local() const {                            // fe80::/10
    return bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;
  }
  constexpr bool is_v4_mapped() const {  // ::ffff:0:0/96
    for (size_t i = 0; i < 10; ++i) {
      if (bytes[i] != 0) return false;
    }
    return bytes[10] == 0xff && bytes[11] == 0xff;
  }
  // A solicited-node group ff02::1:ff00:0/104 (RFC 4291 section 2.7.1).
  constexpr bool is_solicited_node() const {
    constexpr std::array<uint8_t, 13> kPrefix = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
    for (size_t i = 0; i < kPrefix.size(); ++i) {
      if (bytes[i] != kPrefix[i]) return false;
    }
    return true;
  }
  // An address a neighbour may use as its own: not ::, ::1, multicast or
  // v4-mapped.
  constexpr bool is_unicast() const {
    return !is_unspecified() && !is_loopback() && !is_multicast() && !is_v4_mapped();
  }

  // ff02::1:ffXX:XXXX with the low 24 bits of `a` (RFC 4291 section 2.7.1).
  static constexpr Ipv6Addr solicited_node(const Ipv6Addr& a) {
    Ipv6Addr s;
    s.bytes[0] = 0xff;
    s.bytes[1] = 0x02;
    s.bytes[11] = 0x01;
    s.bytes[12] = 0xff;
    s.bytes[13] = a.bytes[13];
    s.bytes[14] = a.bytes[14];
    s.bytes[15] = a.bytes[15];
    return s;
  }
  // The Ethernet group for a multicast address: 33:33 + its last 4 bytes
  // (RFC 2464 section 7). Meaningful for multicast addresses only.
  constexpr MacAddr multicast_mac() const {
    return MacAddr{{0x33, 0x33, bytes[12], bytes[13], bytes[14], bytes[15]}};
  }

  // RFC 4291 section 2.2 text: eight groups of 1..4 hex digits, at most one
  // "::" for one or more zero groups, optionally a dotted-quad tail for the
  // last 32 bits ("::ffff:1.2.3.4"). No zone ids ("%eth0"), prefixes ("/64")
  // or surrounding spaces or brackets.
  static std::optional<Ipv6Addr> parse(std::string_view text);
  // RFC 5952 canonical text: lower case, no leading zeros, the longest run of
  // two or more zero groups as "::" (the leftmost on a tie). v4-mapped
  // addresses print with a dotted tail ("::ffff:1.2.3.4", RFC 5952 section 5).
  std::string to_string() const;

  friend constexpr bool operator==(const Ipv6Addr&, const Ipv6Addr&) = default;
};
static_assert(sizeof(Ipv6Addr) == 16);

// True when the first prefix_len (0..128) bits of a and b agree.
constexpr bool ipv6_prefix_match(const Ipv6Addr& a, const Ipv6Addr& b, uint8_t prefix_len) {
  size_t bits = prefix_len > 128 ? 128 : prefix_len;
  for (size_t i = 0; bits > 0; ++i) {
    const size_t take = bits >= 8 ? 8 : bits;
    const auto mask = static_cast<uint8_t>(0xFF00u >> take);
    if (((a.bytes[i] ^ b.bytes[i]) & mask) != 0) return false;
    bits -= take;
  }
  return true;
}

}  // namespace conduit::net
