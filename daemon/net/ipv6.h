// IPv6 fixed header (RFC 8200). conduit does not walk extension headers:
// packets whose next header is not UDP or ICMPv6 are dropped.
#pragma once

#include <array>
#include <cstdint>

#include "net/be.h"

namespace conduit::net {

inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint8_t kIpProtoIcmp6 = 58;
inline constexpr uint8_t kNdpHopLimit = 255;  // NDP frames, sent and required (RFC 4861)

// The IANA "IPv6 Extension Header Types": hop-by-hop, routing, fragment,
// ESP, AH, destination options, mobility, HIP, shim6, experimental.
constexpr bool is_ipv6_extension_header(uint8_t next_header) {
  switch (next_header) {
    case 0:
    case 43:
    case 44:
    case 50:
    case 51:
    case 60:
    case 135:
    case 139:
    case 140:
    case 253:
    case 254:
      return true;
    default:
      return false;
  }
}

struct __attribute__((packed)) Ipv6Header {
  Be32 vtc_flow;     // version(4) | traffic class(8) | flow label(20)
  Be16 payload_len;  // bytes after this header
  uint8_t next_header;
  uint8_t hop_limit;
  std::array<uint8_t, 16> src;  // raw bytes: Ipv6Addr{src} (Ipv6Addr is not a POD)
  std::array<uint8_t, 16> dst;

  constexpr uint8_t version() const { return static_cast<uint8_t>(vtc_flow.host() >> 28); }
  // DSCP << 2 | ECN, as the IPv4 TOS byte.
  constexpr uint8_t traffic_class() const { return static_cast<uint8_t>(vtc_flow.host() >> 20); }
  constexpr uint32_t flow_label() const { return vtc_flow.host() & 0xFFFFF; }
  static constexpr Be32 make_vtc_flow(uint8_t traffic_class, uint32_t flow_label) {
    return Be32::from_host(6u << 28 | uint32_t{traffic_class} << 20 | (flow_label & 0xFFFFF));
  }
};
static_assert(sizeof(Ipv6Header) == 40);

}  // namespace conduit::net
