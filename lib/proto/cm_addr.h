// A connection-manager peer's address in the form of a RoCE v2 GID: an IPv4
// address as ::ffff:a.b.c.d, or an IPv6 address. One definition for both ends
// of the control protocol (libconduit, conduitd's control service) and for the
// daemon's connection managers (daemon/cm), which put it on the wire.
// Pure: standard library only.
#pragma once

#include <array>
#include <cstdint>

namespace conduit::proto {

using CmAddr = std::array<uint8_t, 16>;

// ip in host byte order.
constexpr CmAddr cm_addr_v4(uint32_t ip) {
  CmAddr a{};
  a[10] = 0xFF;
  a[11] = 0xFF;
  a[12] = static_cast<uint8_t>(ip >> 24);
  a[13] = static_cast<uint8_t>(ip >> 16);
  a[14] = static_cast<uint8_t>(ip >> 8);
  a[15] = static_cast<uint8_t>(ip);
  return a;
}

// The IPv4 address (host byte order) of an IPv4-mapped address; false for IPv6.
constexpr bool cm_addr_ipv4(const CmAddr& a, uint32_t& ip) {
  for (int i = 0; i < 10; ++i) {
    if (a[i] != 0) return false;
  }
  if (a[10] != 0xFF || a[11] != 0xFF) return false;
  ip = uint32_t{a[12]} << 24 | uint32_t{a[13]} << 16 | uint32_t{a[14]} << 8 | a[15];
  return true;
}

}  // namespace conduit::proto
