// Ethernet II and IEEE 802.1Q headers.
#pragma once

#include <cstdint>

#include "net/be.h"
#include "net/mac_addr.h"

namespace conduit::net {

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;  // 802.1Q C-tag
inline constexpr uint16_t kEtherTypeQinQ = 0x88A8;  // 802.1ad S-tag (not supported: dropped)

// Shortest frame on the wire without FCS; shorter frames are padded on TX.
inline constexpr size_t kEthMinFrameBytes = 60;

struct __attribute__((packed)) EthernetHeader {
  MacAddr dst;
  MacAddr src;
  Be16 ether_type;  // or kEtherTypeVlan when a VlanTag follows
};
static_assert(sizeof(EthernetHeader) == 14);

// The 4 bytes after the source MAC's TPID 0x8100.
struct __attribute__((packed)) VlanTag {
  Be16 tci;  // PCP(3) DEI(1) VID(12)
  Be16 ether_type;

  constexpr uint16_t vid() const { return tci.host() & 0x0FFF; }
  constexpr uint8_t pcp() const { return static_cast<uint8_t>(tci.host() >> 13); }
};
static_assert(sizeof(VlanTag) == 4);

inline constexpr uint16_t kVlanVidMax = 4094;  // 0 = priority tag, 4095 reserved

}  // namespace conduit::net
