// UDP header (RFC 768).
#pragma once

#include <cstdint>

#include "net/be.h"

namespace conduit::net {

inline constexpr uint16_t kUdpPortRoceV2 = 4791;

struct __attribute__((packed)) UdpHeader {
  Be16 src_port;
  Be16 dst_port;
  Be16 length;    // header + payload, bytes
  Be16 checksum;  // 0 = not computed (IPv4 only)
};
static_assert(sizeof(UdpHeader) == 8);

}  // namespace conduit::net
