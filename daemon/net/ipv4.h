// IPv4 header without options (RFC 791). conduit never sends options and
// drops received packets that carry them.
#pragma once

#include <cstdint>

#include "net/be.h"

namespace conduit::net {

inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoUdp = 17;

inline constexpr uint8_t kIpv4VersionIhlNoOptions = 0x45;  // version 4, 5 x 32-bit words
inline constexpr uint16_t kIpv4FlagDf = 0x4000;
inline constexpr uint16_t kIpv4FlagMf = 0x2000;
inline constexpr uint16_t kIpv4FragOffsetMask = 0x1FFF;  // in 8-byte units

struct __attribute__((packed)) Ipv4Header {
  uint8_t version_ihl;  // version(4) | header length in 32-bit words(4)
  uint8_t tos;          // DSCP(6) | ECN(2)
  Be16 total_len;       // header + payload, bytes
  Be16 id;
  Be16 flags_frag;  // reserved(1) DF(1) MF(1) offset(13)
  uint8_t ttl;
  uint8_t protocol;
  Be16 checksum;
  Be32 src;
  Be32 dst;

  constexpr uint8_t version() const { return version_ihl >> 4; }
  constexpr uint8_t header_len_bytes() const {
    return static_cast<uint8_t>((version_ihl & 0xF) * 4);
  }
  constexpr uint8_t ecn() const { return tos & 0x3; }
  constexpr uint8_t dscp() const { return tos >> 2; }
  // A fragment is any packet with MF set or a non-zero offset.
  constexpr bool is_fragment() const {
    return (flags_frag.host() & (kIpv4FlagMf | kIpv4FragOffsetMask)) != 0;
  }
};
static_assert(sizeof(Ipv4Header) == 20);

}  // namespace conduit::net
