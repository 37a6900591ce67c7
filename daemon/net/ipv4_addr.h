// IPv4 address as a host-order value (the API type; headers hold Be32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/be.h"

namespace conduit::net {

struct Ipv4Addr {
  uint32_t value = 0;  // host order: 198.18.0.1 is 0xC6120001

  static constexpr Ipv4Addr from_octets(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return Ipv4Addr{(uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d};
  }
  static constexpr Ipv4Addr from_be(Be32 be) { return Ipv4Addr{be.host()}; }
  constexpr Be32 to_be() const { return Be32::from_host(value); }

  constexpr bool is_zero() const { return value == 0; }
  constexpr bool is_limited_broadcast() const { return value == 0xFFFFFFFFu; }
  constexpr bool is_multicast() const { return (value >> 28) == 0xE; }
  constexpr bool is_loopback() const { return (value >> 24) == 127; }
  // An address a peer may use as its own: not 0.0.0.0, 127/8, multicast or
  // the limited broadcast. (Subnet broadcasts depend on the prefix.)
  constexpr bool is_unicast() const {
    return !is_zero() && !is_loopback() && !is_multicast() && !is_limited_broadcast();
  }

  // Dotted quad "a.b.c.d" with each part 0..255 and no leading '+' or spaces.
  static std::optional<Ipv4Addr> parse(std::string_view text);
  std::string to_string() const;

  friend constexpr bool operator==(const Ipv4Addr&, const Ipv4Addr&) = default;
};

// Network mask for a prefix length 0..32.
constexpr uint32_t ipv4_prefix_mask(uint8_t prefix_len) {
  return prefix_len == 0 ? 0 : prefix_len >= 32 ? 0xFFFFFFFFu : ~((1u << (32 - prefix_len)) - 1);
}

}  // namespace conduit::net
