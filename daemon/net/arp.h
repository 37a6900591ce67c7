// ARP for IPv4 over Ethernet (RFC 826), the only ARP form conduit speaks.
#pragma once

#include <cstdint>

#include "net/be.h"
#include "net/mac_addr.h"

namespace conduit::net {

inline constexpr uint16_t kArpHwEthernet = 1;
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

struct __attribute__((packed)) ArpPacket {
  Be16 hw_type;       // kArpHwEthernet
  Be16 proto_type;    // kEtherTypeIpv4
  uint8_t hw_len;     // 6
  uint8_t proto_len;  // 4
  Be16 op;            // kArpOpRequest / kArpOpReply
  MacAddr sender_mac;
  Be32 sender_ip;
  MacAddr target_mac;
  Be32 target_ip;
};
static_assert(sizeof(ArpPacket) == 28);

}  // namespace conduit::net
