#include "net/rx_drop.h"

namespace conduit::net {

const char* rx_drop_name(RxDrop reason) {
  switch (reason) {
    case RxDrop::kNone:
      return "none";
    case RxDrop::kL2Truncated:
      return "l2_truncated";
    case RxDrop::kVlanMismatch:
      return "vlan_mismatch";
    case RxDrop::kStackedVlan:
      return "stacked_vlan";
    case RxDrop::kNotOurMac:
      return "not_our_mac";
    case RxDrop::kUnknownEtherType:
      return "unknown_ether_type";
    case RxDrop::kArpMalformed:
      return "arp_malformed";
    case RxDrop::kArpBadOp:
      return "arp_bad_op";
    case RxDrop::kArpBadSender:
      return "arp_bad_sender";
    case RxDrop::kArpNotForUs:
      return "arp_not_for_us";
    case RxDrop::kIpTruncated:
      return "ip_truncated";
    case RxDrop::kIpBadVersion:
      return "ip_bad_version";
    case RxDrop::kIpBadHeaderLen:
      return "ip_bad_header_len";
    case RxDrop::kIpOptions:
      return "ip_options";
    case RxDrop::kIpBadTotalLen:
      return "ip_bad_total_len";
    case RxDrop::kIpBadChecksum:
      return "ip_bad_checksum";
    case RxDrop::kIpFragment:
      return "ip_fragment";
    case RxDrop::kIpNotForUs:
      return "ip_not_for_us";
    case RxDrop::kIpBadSource:
      return "ip_bad_source";
    case RxDrop::kIpUnknownProtocol:
      return "ip_unknown_protocol";
    case RxDrop::kIcmpTruncated:
      return "icmp_truncated";
    case RxDrop::kIcmpBadChecksum:
      return "icmp_bad_checksum";
    case RxDrop::kIcmpNotEchoRequest:
      return "icmp_not_echo_request";
    case RxDrop::kIcmpDisabled:
      return "icmp_disabled";
    case RxDrop::kReplyBufferTooSmall:
      return "reply_buffer_too_small";
    case RxDrop::kUdpTruncated:
      return "udp_truncated";
    case RxDrop::kUdpBadChecksum:
      return "udp_bad_checksum";
    case RxDrop::kUdpPortClosed:
      return "udp_port_closed";
    case RxDrop::kIpv6Off:
      return "ipv6_off";
    case RxDrop::kIpv6Truncated:
      return "ipv6_truncated";
    case RxDrop::kIpv6BadVersion:
      return "ipv6_bad_version";
    case RxDrop::kIpv6ExtHeader:
      return "ipv6_ext_header";
    case RxDrop::kIpv6BadSource:
      return "ipv6_bad_source";
    case RxDrop::kIpv6NotForUs:
      return "ipv6_not_for_us";
    case RxDrop::kIcmp6Truncated:
      return "icmp6_truncated";
    case RxDrop::kIcmp6BadChecksum:
      return "icmp6_bad_checksum";
    case RxDrop::kIcmp6Unhandled:
      return "icmp6_unhandled";
    case RxDrop::kNdpBadHopLimit:
      return "ndp_bad_hop_limit";
    case RxDrop::kNdpMalformed:
      return "ndp_malformed";
    case RxDrop::kNdpNotForUs:
      return "ndp_not_for_us";
    case RxDrop::kL2BadSource:
      return "l2_bad_source";
    case RxDrop::kCount:
      break;
  }
  return "unknown";
}

}  // namespace conduit::net
