// 48-bit Ethernet MAC address, stored in wire order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conduit::net {

struct MacAddr {
  std::array<uint8_t, 6> bytes;  // no initializer: a POD for packed headers; MacAddr{} is zero

  static constexpr MacAddr broadcast() { return MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
  constexpr bool is_broadcast() const { return *this == broadcast(); }
  // Group bit: broadcast and multicast.
  constexpr bool is_multicast() const { return (bytes[0] & 0x01) != 0; }
  constexpr bool is_zero() const { return *this == MacAddr{}; }

  // "aa:bb:cc:dd:ee:ff" (case-insensitive); nullopt when malformed.
  static std::optional<MacAddr> parse(std::string_view text);
  std::string to_string() const;

  friend constexpr bool operator==(const MacAddr&, const MacAddr&) = default;
};
static_assert(sizeof(MacAddr) == 6);

}  // namespace conduit::net
