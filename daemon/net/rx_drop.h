// Why the receive classifier dropped a frame. One counter per reason.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conduit::net {

enum class RxDrop : uint8_t {
  kNone = 0,
  kL2Truncated,       // shorter than the Ethernet (+ VLAN) header
  kVlanMismatch,      // a VID when we are untagged; untagged, VID 0 or another VID when tagged
  kStackedVlan,       // QinQ / double tag
  kNotOurMac,         // unicast to another station (promiscuous vdevs see these)
  kUnknownEtherType,  // neither IPv4, IPv6 nor ARP
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
  kIpUnknownProtocol,  // neither ICMP nor UDP (IPv6: next header not an extension, UDP or ICMPv6)
  kIcmpTruncated,
  kIcmpBadChecksum,
  kIcmpNotEchoRequest,   // other ICMP types/codes are not handled
  kIcmpDisabled,         // echo replies are turned off
  kReplyBufferTooSmall,  // the caller's reply buffer cannot hold the reply
  kUdpTruncated,         // UDP length < 8 or beyond the IP payload
  kUdpBadChecksum,
  kUdpPortClosed,  // destination port not in the configured set
  // IPv6 (appended: the values above keep their numbers).
  kIpv6Off,         // an IPv6 frame and no addr6 configured
  kIpv6Truncated,   // shorter than 40 bytes or than 40 + payload length
  kIpv6BadVersion,  // EtherType 0x86DD but version != 6
  kIpv6ExtHeader,   // an extension header (hop-by-hop, routing, fragment, ...): not walked
  kIpv6BadSource,   // multicast, ours, ::1, v4-mapped, or :: on anything but a DAD NS
  kIpv6NotForUs,    // not addr6; ff02::1 and our solicited-node group carry only NDP
  kIcmp6Truncated,  // shorter than its ICMPv6 header (or an echo header)
  kIcmp6BadChecksum,
  kIcmp6Unhandled,  // other ICMPv6 types/codes (RA, RS, redirects, errors, echo replies)
  kNdpBadHopLimit,  // NS/NA with hop limit != 255: not from this link (RFC 4861 7.1)
  kNdpMalformed,    // NS/NA failing RFC 4861 7.1.1/7.1.2 validation (code, length, options, ..)
  kNdpNotForUs,     // NS whose target is not addr6
  // Appended: an L2 reason, checked right after the VLAN tag.
  kL2BadSource,  // Ethernet source MAC is a group (multicast or broadcast) address
  kCount,
};

inline constexpr size_t kRxDropCount = static_cast<size_t>(RxDrop::kCount);

// Stable snake_case name for counters and logs ("ip_fragment").
const char* rx_drop_name(RxDrop reason);

}  // namespace conduit::net
