// Why the receive classifier dropped a frame. One counter per reason.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conduit::net {

enum class RxDrop : uint8_t {
  kNone = 0,
  kL2Truncated,       // shorter than the Ethernet (+ VLAN) header
  kVlanMismatch,      // tagged when we are untagged, untagged or other VID when we are tagged
  kStackedVlan,       // QinQ / double tag
  kNotOurMac,         // unicast to another station (promiscuous vdevs see these)
  kUnknownEtherType,  // neither IPv4 nor ARP
  kArpMalformed,      // truncated, or not Ethernet/IPv4 ARP
  kArpBadOp,          // neither request nor reply
  kArpBadSender,      // multicast/zero sender MAC, or a broadcast/multicast/our sender IP
  kArpNotForUs,       // target IP is not ours
  kIpTruncated,       // shorter than an IPv4 header or its total length
  kIpBadVersion,
  kIpBadHeaderLen,  // IHL < 5
  kIpOptions,       // IHL > 5: options are not supported
  kIpBadTotalLen,   // total length smaller than the header
  kIpBadChecksum,
  kIpFragment,         // MF set or non-zero offset: conduit never reassembles
  kIpNotForUs,         // destination is not our address (incl. broadcast/multicast)
  kIpBadSource,        // source is ours, zero, broadcast or multicast
  kIpUnknownProtocol,  // neither ICMP nor UDP
  kIcmpTruncated,
  kIcmpBadChecksum,
  kIcmpNotEchoRequest,   // other ICMP types/codes are not handled
  kIcmpDisabled,         // echo replies are turned off
  kReplyBufferTooSmall,  // the caller's reply buffer cannot hold the reply
  kUdpTruncated,         // UDP length < 8 or beyond the IP payload
  kUdpBadChecksum,
  kUdpPortClosed,  // destination port not in the configured set
  kCount,
};

inline constexpr size_t kRxDropCount = static_cast<size_t>(RxDrop::kCount);

// Stable snake_case name for counters and logs ("ip_fragment").
const char* rx_drop_name(RxDrop reason);

}  // namespace conduit::net
