// ICMPv6 (RFC 4443) echo and the Neighbor Discovery messages conduit speaks
// (RFC 4861 sections 4.1-4.4, 4.6.1): Router Solicitation out, Router
// Advertisement in, Neighbor Solicitation and Advertisement both ways. The checksum covers the IPv6
// pseudo-header (ipv6_pseudo_header_sum) and the whole ICMPv6 message.
#pragma once

#include <array>
#include <cstdint>

#include "net/be.h"
#include "net/mac_addr.h"

namespace conduit::net {

inline constexpr uint8_t kIcmp6EchoRequest = 128;
inline constexpr uint8_t kIcmp6EchoReply = 129;
inline constexpr uint8_t kIcmp6RouterSolicitation = 133;  // first NDP type
inline constexpr uint8_t kIcmp6RouterAdvertisement = 134;
inline constexpr uint8_t kIcmp6NeighborSolicitation = 135;
inline constexpr uint8_t kIcmp6NeighborAdvertisement = 136;
inline constexpr uint8_t kIcmp6Redirect = 137;  // last NDP type

inline constexpr uint8_t kNdpOptSourceLinkAddr = 1;
inline constexpr uint8_t kNdpOptTargetLinkAddr = 2;
inline constexpr uint8_t kNdpOptPrefixInfo = 3;     // RFC 4861 section 4.6.2 (32 bytes)
inline constexpr uint8_t kNdpOptMtu = 5;            // RFC 4861 section 4.6.4 (8 bytes)
inline constexpr uint8_t kPrefixFlagOnLink = 0x80;  // the Prefix Information option's L flag
inline constexpr uint32_t kIpv6MinMtu = 1280;       // RFC 8200 section 5

// Neighbor Advertisement flags, in the top byte of flags_reserved.
inline constexpr uint32_t kNaFlagRouter = 0x80000000u;
inline constexpr uint32_t kNaFlagSolicited = 0x40000000u;
inline constexpr uint32_t kNaFlagOverride = 0x20000000u;

struct __attribute__((packed)) Icmp6Header {
  uint8_t type;
  uint8_t code;
  Be16 checksum;
};
static_assert(sizeof(Icmp6Header) == 4);

// Neighbor Solicitation and Advertisement share one layout; options follow.
struct __attribute__((packed)) NdpNeighborMessage {
  uint8_t type;
  uint8_t code;
  Be16 checksum;
  Be32 flags_reserved;  // NS: reserved (0); NA: R | S | O | reserved
  std::array<uint8_t, 16> target;
};
static_assert(sizeof(NdpNeighborMessage) == 24);

// Router Solicitation (RFC 4861 section 4.1); options follow.
struct __attribute__((packed)) NdpRouterSolicitation {
  uint8_t type;
  uint8_t code;
  Be16 checksum;
  Be32 reserved;
};
static_assert(sizeof(NdpRouterSolicitation) == 8);

// Router Advertisement (RFC 4861 section 4.2); options follow.
struct __attribute__((packed)) NdpRouterAdvertisement {
  uint8_t type;
  uint8_t code;
  Be16 checksum;
  uint8_t cur_hop_limit;
  uint8_t flags;           // M | O | reserved
  Be16 router_lifetime_s;  // 0: not a default router
  Be32 reachable_time_ms;  // 0: unspecified
  Be32 retrans_timer_ms;   // 0: unspecified
};
static_assert(sizeof(NdpRouterAdvertisement) == 16);

// Source/Target Link-Layer Address option for Ethernet (RFC 2464 section 8).
struct __attribute__((packed)) NdpLinkAddrOption {
  uint8_t type;
  uint8_t len_units;  // in 8-byte units: 1
  MacAddr mac;
};
static_assert(sizeof(NdpLinkAddrOption) == 8);

}  // namespace conduit::net
