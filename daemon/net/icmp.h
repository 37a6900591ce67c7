// ICMP echo request/reply header (RFC 792); the identifier, sequence and data
// that follow the first 4 bytes are echoed back unchanged.
#pragma once

#include <cstdint>

#include "net/be.h"

namespace conduit::net {

inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpEchoRequest = 8;

struct __attribute__((packed)) IcmpEchoHeader {
  uint8_t type;
  uint8_t code;
  Be16 checksum;  // over the whole ICMP message
  Be16 identifier;
  Be16 sequence;
};
static_assert(sizeof(IcmpEchoHeader) == 8);

}  // namespace conduit::net
