#include "net/net_stack.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "net/arp.h"
#include "net/checksum.h"
#include "net/ethernet.h"
#include "net/header_io.h"
#include "net/icmp.h"
#include "net/ipv4.h"
#include "net/udp.h"

namespace conduit::net {
namespace {

bool is_unicast_ip(Ipv4Addr ip) { return ip.is_unicast(); }

// Room for the events one call can produce before the caller drains them:
// a resolution failing or succeeding releases a whole per-hop queue.
size_t event_reserve(const NeighbourConfig& n) { return 64 + 2 * n.max_pending_per_hop; }

}  // namespace

uint64_t NetCounters::total_drops() const {
  return std::accumulate(rx_drops.begin(), rx_drops.end(), uint64_t{0});
}

NetStack::NetStack(const NetStackConfig& config)
    : config_(config),
      prefix_mask_(ipv4_prefix_mask(config.prefix_len)),
      neighbours_(config.neighbour) {
  if (config_.mac.is_zero() || config_.mac.is_multicast()) {
    throw std::invalid_argument("port MAC " + config_.mac.to_string() + " is not a unicast MAC");
  }
  if (!is_unicast_ip(config_.addr)) {
    throw std::invalid_argument("address " + config_.addr.to_string() +
                                " is not a unicast IPv4 address");
  }
  if (config_.prefix_len < 1 || config_.prefix_len > 32) {
    throw std::invalid_argument("prefix length " + std::to_string(config_.prefix_len) +
                                " is outside 1..32");
  }
  if (config_.gateway) {
    if (!is_unicast_ip(*config_.gateway) || !on_link(*config_.gateway) ||
        *config_.gateway == config_.addr) {
      throw std::invalid_argument(
          "gateway " + config_.gateway->to_string() + " must be another unicast address inside " +
          config_.addr.to_string() + "/" + std::to_string(config_.prefix_len));
    }
  }
  if (config_.vlan_id && (*config_.vlan_id < 1 || *config_.vlan_id > kVlanVidMax)) {
    throw std::invalid_argument("VLAN id " + std::to_string(*config_.vlan_id) +
                                " is outside 1..4094");
  }
  if (config_.vlan_pcp > 7) throw std::invalid_argument("VLAN priority must be 0..7");
  if (config_.ttl == 0) throw std::invalid_argument("TTL must be >= 1");
  for (uint16_t port : config_.udp_ports) {
    if (port == 0) throw std::invalid_argument("UDP port 0 cannot be delivered");
    udp_port_bitmap_[port / 64] |= uint64_t{1} << (port % 64);
  }
  events_.reserve(event_reserve(config_.neighbour));
  for (const StaticNeighbour& s : config_.static_neighbours) {
    if (!add_static_neighbour(s.ip, s.mac)) {
      throw std::invalid_argument("static neighbour " + s.ip.to_string() + " at " +
                                  s.mac.to_string() +
                                  " rejected: needs a unicast IP and MAC and room in the "
                                  "neighbour table");
    }
  }
}

bool NetStack::on_link(Ipv4Addr ip) const {
  return (ip.value & prefix_mask_) == (config_.addr.value & prefix_mask_);
}

bool NetStack::is_peer_address(Ipv4Addr ip) const {
  // /31 and /32 have no subnet broadcast address (RFC 3021).
  const bool subnet_broadcast =
      config_.prefix_len < 31 && on_link(ip) && (ip.value & ~prefix_mask_) == ~prefix_mask_;
  return is_unicast_ip(ip) && ip != config_.addr && !subnet_broadcast;
}

bool NetStack::port_open(uint16_t port) const {
  return (udp_port_bitmap_[port / 64] >> (port % 64)) & 1;
}

RxResult NetStack::drop(RxDrop reason) {
  ++counters_.rx_drops[static_cast<size_t>(reason)];
  RxResult r;
  r.verdict = RxVerdict::kDrop;
  r.drop = reason;
  return r;
}

RxResult NetStack::on_rx_frame(std::span<const uint8_t> frame, uint64_t now_ns,
                               std::span<uint8_t> reply) {
  ++counters_.rx_frames;
  const auto eth = load_header<EthernetHeader>(frame, 0);
  if (!eth) return drop(RxDrop::kL2Truncated);
  size_t l3 = sizeof(EthernetHeader);
  uint16_t ether_type = eth->ether_type.host();
  if (ether_type == kEtherTypeQinQ) return drop(RxDrop::kStackedVlan);
  if (ether_type == kEtherTypeVlan) {
    const auto tag = load_header<VlanTag>(frame, l3);
    if (!tag) return drop(RxDrop::kL2Truncated);
    if (!config_.vlan_id || tag->vid() != *config_.vlan_id) return drop(RxDrop::kVlanMismatch);
    ether_type = tag->ether_type.host();
    l3 += sizeof(VlanTag);
    if (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) {
      return drop(RxDrop::kStackedVlan);
    }
  } else if (config_.vlan_id) {
    return drop(RxDrop::kVlanMismatch);
  }
  if (eth->dst != config_.mac && !eth->dst.is_broadcast()) return drop(RxDrop::kNotOurMac);

  if (ether_type == kEtherTypeArp) return on_arp(frame, l3, now_ns, reply);
  // Broadcast MAC carries only ARP for us; IPv4 to ff:ff.. is not ours.
  if (ether_type == kEtherTypeIpv4) {
    if (eth->dst != config_.mac) return drop(RxDrop::kNotOurMac);
    return on_ipv4(frame, *eth, l3, reply);
  }
  return drop(RxDrop::kUnknownEtherType);
}

RxResult NetStack::on_arp(std::span<const uint8_t> frame, size_t l3, uint64_t now_ns,
                          std::span<uint8_t> reply) {
  const auto arp = load_header<ArpPacket>(frame, l3);
  if (!arp || arp->hw_type.host() != kArpHwEthernet || arp->proto_type.host() != kEtherTypeIpv4 ||
      arp->hw_len != 6 || arp->proto_len != 4) {
    return drop(RxDrop::kArpMalformed);
  }
  const uint16_t op = arp->op.host();
  if (op != kArpOpRequest && op != kArpOpReply) return drop(RxDrop::kArpBadOp);
  const Ipv4Addr sender_ip = Ipv4Addr::from_be(arp->sender_ip);
  const Ipv4Addr target_ip = Ipv4Addr::from_be(arp->target_ip);
  // A zero sender IP is an RFC 5227 probe: answer it, learn nothing.
  const bool probe = op == kArpOpRequest && sender_ip.is_zero();
  if (arp->sender_mac.is_zero() || arp->sender_mac.is_multicast() ||
      (!probe && !is_peer_address(sender_ip))) {
    return drop(RxDrop::kArpBadSender);
  }
  if (target_ip != config_.addr) {
    // Not for us, but an existing entry may still be refreshed (RFC 826
    // merge); no entry is created, so a flood cannot fill the table.
    if (!probe && on_link(sender_ip)) {
      neighbours_.learn(sender_ip, arp->sender_mac, now_ns, /*create=*/false, events_);
    }
    return drop(RxDrop::kArpNotForUs);
  }
  if (!probe && on_link(sender_ip)) {
    neighbours_.learn(sender_ip, arp->sender_mac, now_ns, /*create=*/op == kArpOpRequest, events_);
  }
  if (op == kArpOpReply) {
    ++counters_.rx_arp_replies;
    RxResult r;
    r.verdict = RxVerdict::kConsumed;
    return r;
  }
  ++counters_.rx_arp_requests;
  const size_t len = build_arp(reply, kArpOpReply, arp->sender_mac, arp->sender_mac, sender_ip);
  if (len == 0) return drop(RxDrop::kReplyBufferTooSmall);
  ++counters_.tx_arp_replies;
  RxResult r;
  r.verdict = RxVerdict::kReply;
  r.reply_len = len;
  return r;
}

RxResult NetStack::on_ipv4(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                           std::span<uint8_t> reply) {
  const auto ip = load_header<Ipv4Header>(frame, l3);
  if (!ip) return drop(RxDrop::kIpTruncated);
  if (ip->version() != 4) return drop(RxDrop::kIpBadVersion);
  if (ip->header_len_bytes() < sizeof(Ipv4Header)) return drop(RxDrop::kIpBadHeaderLen);
  if (ip->header_len_bytes() > sizeof(Ipv4Header)) return drop(RxDrop::kIpOptions);
  const size_t total_len = ip->total_len.host();
  if (total_len < sizeof(Ipv4Header)) return drop(RxDrop::kIpBadTotalLen);
  // Bytes past total_len are Ethernet padding and are ignored.
  if (frame.size() - l3 < total_len) return drop(RxDrop::kIpTruncated);
  if (ipv4_header_checksum(*ip) != 0) {
    return drop(RxDrop::kIpBadChecksum);
  }
  if (Ipv4Addr::from_be(ip->dst) != config_.addr) return drop(RxDrop::kIpNotForUs);
  const Ipv4Addr src = Ipv4Addr::from_be(ip->src);
  if (!is_peer_address(src)) return drop(RxDrop::kIpBadSource);
  if (ip->is_fragment()) return drop(RxDrop::kIpFragment);
  // From here on the frame ends where the IP datagram ends (no padding).
  const auto datagram = frame.first(l3 + total_len);
  switch (ip->protocol) {
    case kIpProtoUdp:
      return on_udp(datagram, eth, *ip, l3);
    case kIpProtoIcmp:
      return on_icmp(datagram, eth, *ip, l3, reply);
    default:
      return drop(RxDrop::kIpUnknownProtocol);
  }
}

RxResult NetStack::on_icmp(std::span<const uint8_t> frame, const EthernetHeader& eth,
                           const Ipv4Header& ip, size_t l3, std::span<uint8_t> reply) {
  const size_t l4 = l3 + sizeof(Ipv4Header);
  const size_t ip_total_len = frame.size() - l3;
  const size_t icmp_len = ip_total_len - sizeof(Ipv4Header);
  const auto icmp = load_header<IcmpEchoHeader>(frame, l4);
  if (!icmp) return drop(RxDrop::kIcmpTruncated);
  if (checksum_finish(checksum_partial(frame.subspan(l4, icmp_len))) != 0) {
    return drop(RxDrop::kIcmpBadChecksum);
  }
  if (icmp->type != kIcmpEchoRequest || icmp->code != 0) {
    return drop(RxDrop::kIcmpNotEchoRequest);
  }
  ++counters_.rx_icmp_echo_requests;
  if (!config_.answer_ping) return drop(RxDrop::kIcmpDisabled);

  const size_t out_l3 = l2_header_len();
  const size_t out_len = std::max(out_l3 + ip_total_len, kEthMinFrameBytes);
  if (reply.size() < out_len) return drop(RxDrop::kReplyBufferTooSmall);
  std::fill(reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(out_len), uint8_t{0});
  write_l2_header(reply, eth.src, kEtherTypeIpv4);

  Ipv4Header out_ip{};
  out_ip.version_ihl = kIpv4VersionIhlNoOptions;
  out_ip.tos = ip.tos;
  out_ip.total_len = ip.total_len;
  out_ip.flags_frag = Be16::from_host(kIpv4FlagDf);
  out_ip.ttl = config_.ttl;
  out_ip.protocol = kIpProtoIcmp;
  out_ip.src = config_.addr.to_be();
  out_ip.dst = ip.src;
  store_header(reply, out_l3, out_ip);
  const uint16_t ip_csum = ipv4_header_checksum(reply.subspan(out_l3, sizeof(Ipv4Header)));
  out_ip.checksum = Be16::from_host(ip_csum);
  store_header(reply, out_l3, out_ip);

  // Identifier, sequence and data are echoed unchanged.
  const size_t out_l4 = out_l3 + sizeof(Ipv4Header);
  std::memcpy(reply.data() + out_l4, frame.data() + l4, icmp_len);
  IcmpEchoHeader out_icmp = *icmp;
  out_icmp.type = kIcmpEchoReply;
  out_icmp.checksum = Be16{};
  store_header(reply, out_l4, out_icmp);
  out_icmp.checksum =
      Be16::from_host(checksum_finish(checksum_partial(reply.subspan(out_l4, icmp_len))));
  store_header(reply, out_l4, out_icmp);

  ++counters_.tx_icmp_echo_replies;
  RxResult r;
  r.verdict = RxVerdict::kReply;
  r.reply_len = out_len;
  return r;
}

RxResult NetStack::on_udp(std::span<const uint8_t> frame, const EthernetHeader& eth,
                          const Ipv4Header& ip, size_t l3) {
  const size_t l4 = l3 + sizeof(Ipv4Header);
  const auto udp = load_header<UdpHeader>(frame, l4);
  if (!udp) return drop(RxDrop::kUdpTruncated);
  const size_t udp_len = udp->length.host();
  if (udp_len < sizeof(UdpHeader) || udp_len > frame.size() - l4) {
    return drop(RxDrop::kUdpTruncated);
  }
  const uint16_t dst_port = udp->dst_port.host();
  if (!port_open(dst_port)) return drop(RxDrop::kUdpPortClosed);
  if (config_.verify_udp_checksum && udp->checksum.host() != 0) {
    const uint32_t pseudo = udp_pseudo_header_sum(
        Ipv4Addr::from_be(ip.src), Ipv4Addr::from_be(ip.dst), static_cast<uint16_t>(udp_len));
    if (checksum_finish(checksum_partial(frame.subspan(l4, udp_len), pseudo)) != 0) {
      return drop(RxDrop::kUdpBadChecksum);
    }
  }
  ++counters_.rx_udp_delivered;
  RxResult r;
  r.verdict = RxVerdict::kDeliverUdp;
  r.udp.src_mac = eth.src;
  r.udp.src_ip = Ipv4Addr::from_be(ip.src);
  r.udp.dst_ip = Ipv4Addr::from_be(ip.dst);
  r.udp.src_port = udp->src_port.host();
  r.udp.dst_port = dst_port;
  r.udp.tos = ip.tos;
  r.udp.ip_offset = static_cast<uint16_t>(l3);
  r.udp.payload_offset = static_cast<uint16_t>(l4 + sizeof(UdpHeader));
  r.udp.payload_len = static_cast<uint16_t>(udp_len - sizeof(UdpHeader));
  return r;
}

wire::RxExpect NetStack::make_roce_expect(std::span<const uint8_t> frame, const UdpDatagram& udp,
                                          const wire::ParseOptions& opt) const {
  const size_t l3 = l2_header_len();
  const size_t udp_end = size_t{udp.payload_offset} + udp.payload_len;
  // What on_rx_frame() found, checked again: the caller's udp may be stale.
  if (udp.ip_offset != l3 || udp.payload_offset != l3 + kIpv4UdpHeaderBytes ||
      udp.payload_len < wire::kBthBytes || frame.size() < udp_end || !opt.verify_ip_checksum ||
      udp.dst_port != opt.udp_dst_port || !port_open(udp.dst_port) || udp.dst_ip != config_.addr ||
      !is_peer_address(udp.src_ip)) {
    return wire::RxExpect{};
  }
  const uint8_t* ip = frame.data() + l3;
  // The expected image has DF set (every RoCEv2 sender sets it); a sender
  // without it would never match.
  if (wire::get_be16(ip + 6) != kIpv4FlagDf) return wire::RxExpect{};
  wire::FrameAddr sender;
  sender.has_vlan = config_.vlan_id.has_value();
  sender.vlan_tci = config_.vlan_id.value_or(0);
  sender.src_ip = udp.src_ip.value;
  sender.dst_ip = udp.dst_ip.value;
  sender.src_port = udp.src_port;
  sender.dst_port = udp.dst_port;
  sender.ip_id = wire::get_be16(ip + 4);
  sender.ttl = ip[8];
  const uint8_t* bth = frame.data() + udp.payload_offset;
  wire::RxExpect e = wire::make_rx_expect(sender, wire::get_be32(bth + 4) & 0xFFFFFF, opt,
                                          wire::get_be16(bth + 2));
  // A non-zero UDP checksum is verified by on_rx_frame(): such frames miss.
  const size_t udp_csum = l3 + wire::kIpv4HeaderBytes + 6;
  bool ok = wire::rx_expect_require_byte(e, udp_csum, 0xFF, 0) &&
            wire::rx_expect_require_byte(e, udp_csum + 1, 0xFF, 0);
  if (config_.vlan_id) {  // the VID, not the priority bits (on_rx_frame ignores those)
    const uint16_t vid = *config_.vlan_id;
    ok = ok && wire::rx_expect_require_byte(e, 14, 0x0F, static_cast<uint8_t>(vid >> 8)) &&
         wire::rx_expect_require_byte(e, 15, 0xFF, static_cast<uint8_t>(vid));
  }
  return ok ? e : wire::RxExpect{};
}

bool NetStack::on_rx_expected(std::span<const uint8_t> frame, const wire::RxExpect& exp,
                              UdpDatagram& udp, wire::RoceView& view, wire::DropReason& why) {
  // Our MAC first: cheaper than the match, which includes the ICRC.
  if (frame.size() < sizeof(EthernetHeader) ||
      std::memcmp(frame.data(), config_.mac.bytes.data(), sizeof(MacAddr)) != 0 ||
      !wire::parse_frame_matched(frame, exp, view, why)) {
    return false;
  }
  ++counters_.rx_frames;
  ++counters_.rx_udp_delivered;
  const size_t l3 = exp.l2_bytes;
  const uint8_t* ip = frame.data() + l3;
  std::memcpy(udp.src_mac.bytes.data(), frame.data() + 6, sizeof(MacAddr));
  udp.src_ip = Ipv4Addr{wire::get_be32(ip + 12)};
  udp.dst_ip = Ipv4Addr{wire::get_be32(ip + 16)};
  udp.src_port = wire::get_be16(ip + 20);
  udp.dst_port = wire::get_be16(ip + 22);
  udp.tos = ip[1];
  udp.ip_offset = static_cast<uint16_t>(l3);
  udp.payload_offset = static_cast<uint16_t>(l3 + kIpv4UdpHeaderBytes);
  udp.payload_len = static_cast<uint16_t>(wire::get_be16(ip + 24) - sizeof(UdpHeader));
  return true;
}

std::optional<Ipv4Addr> NetStack::next_hop(Ipv4Addr dst) {
  if (!is_peer_address(dst)) {
    ++counters_.no_route;
    return std::nullopt;
  }
  if (on_link(dst)) return dst;
  if (config_.gateway) return *config_.gateway;
  ++counters_.no_route;
  return std::nullopt;
}

NeighbourTable::ResolveResult NetStack::resolve(Ipv4Addr next_hop, uint64_t now_ns,
                                                FrameHandle frame) {
  // Only on-link peers can answer ARP; anything else is a routing bug upstream.
  if (!on_link(next_hop) || !is_peer_address(next_hop)) {
    ++counters_.no_route;
    return {NeighbourTable::Resolve::kDropped, MacAddr{}};
  }
  return neighbours_.resolve(next_hop, now_ns, frame, events_);
}

void NetStack::announce() {
  // Gratuitous ARP (RFC 5227 announcement): a request for our own address,
  // so peers replace a stale MAC for it (e.g. after a NIC or host change).
  events_.push_back(
      {NeighbourEvent::Kind::kSendRequest, config_.addr, MacAddr::broadcast(), kNoFrame});
}

void NetStack::poll_timers(uint64_t now_ns) { neighbours_.poll(now_ns, events_); }

bool NetStack::add_static_neighbour(Ipv4Addr ip, MacAddr mac) {
  return neighbours_.add_static(ip, mac, events_);
}

bool NetStack::remove_neighbour(Ipv4Addr ip) { return neighbours_.remove(ip, events_); }

size_t NetStack::take_actions(std::span<NetAction> out) {
  size_t n = 0;
  while (n < out.size() && events_head_ < events_.size()) {
    const NeighbourEvent& ev = events_[events_head_++];
    NetAction& a = out[n++];
    a = NetAction{};
    a.next_hop = ev.ip;
    switch (ev.kind) {
      case NeighbourEvent::Kind::kSendRequest:
        a.kind = NetAction::Kind::kTransmit;
        // A refresh goes unicast to the known MAC; target MAC stays zero.
        a.len = static_cast<uint8_t>(build_arp(a.bytes, kArpOpRequest, ev.mac, MacAddr{}, ev.ip));
        ++counters_.tx_arp_requests;
        break;
      case NeighbourEvent::Kind::kTransmitQueued:
        a.kind = NetAction::Kind::kTransmitQueued;
        a.frame = ev.frame;
        a.dst_mac = ev.mac;
        break;
      case NeighbourEvent::Kind::kDropQueued:
        a.kind = NetAction::Kind::kDropQueued;
        a.frame = ev.frame;
        break;
    }
  }
  if (events_head_ == events_.size()) {
    events_.clear();  // keeps capacity
    events_head_ = 0;
  }
  return n;
}

size_t NetStack::write_l2_header(std::span<uint8_t> out, MacAddr dst, uint16_t ether_type) const {
  EthernetHeader eth;
  eth.dst = dst;
  eth.src = config_.mac;
  if (!config_.vlan_id) {
    eth.ether_type = Be16::from_host(ether_type);
    return store_header(out, 0, eth) ? sizeof eth : 0;
  }
  eth.ether_type = Be16::from_host(kEtherTypeVlan);
  VlanTag tag;
  tag.tci = Be16::from_host(static_cast<uint16_t>((config_.vlan_pcp << 13) | *config_.vlan_id));
  tag.ether_type = Be16::from_host(ether_type);
  if (out.size() < sizeof eth + sizeof tag) return 0;
  store_header(out, 0, eth);
  store_header(out, sizeof eth, tag);
  return sizeof eth + sizeof tag;
}

size_t NetStack::build_arp(std::span<uint8_t> out, uint16_t op, MacAddr eth_dst, MacAddr target_mac,
                           Ipv4Addr target_ip) const {
  const size_t l3 = l2_header_len();
  const size_t len = std::max(l3 + sizeof(ArpPacket), kEthMinFrameBytes);
  if (out.size() < len) return 0;
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len), uint8_t{0});
  write_l2_header(out, eth_dst, kEtherTypeArp);
  ArpPacket arp;
  arp.hw_type = Be16::from_host(kArpHwEthernet);
  arp.proto_type = Be16::from_host(kEtherTypeIpv4);
  arp.hw_len = 6;
  arp.proto_len = 4;
  arp.op = Be16::from_host(op);
  arp.sender_mac = config_.mac;
  arp.sender_ip = config_.addr.to_be();
  arp.target_mac = target_mac;
  arp.target_ip = target_ip.to_be();
  store_header(out, l3, arp);
  return len;
}

size_t NetStack::write_udp_headers(std::span<uint8_t> out, MacAddr dst_mac, Ipv4Addr dst_ip,
                                   uint16_t src_port, uint16_t dst_port, uint8_t tos,
                                   size_t payload_len) const {
  const size_t l3 = l2_header_len();
  const size_t header_len = l3 + kIpv4UdpHeaderBytes;
  if (out.size() < header_len || payload_len > 0xFFFF - kIpv4UdpHeaderBytes) return 0;
  write_l2_header(out, dst_mac, kEtherTypeIpv4);
  Ipv4Header ip{};
  ip.version_ihl = kIpv4VersionIhlNoOptions;
  ip.tos = tos;
  ip.total_len = Be16::from_host(static_cast<uint16_t>(kIpv4UdpHeaderBytes + payload_len));
  ip.flags_frag = Be16::from_host(kIpv4FlagDf);  // ID 0 + DF: the RoCE ICRC covers the ID
  ip.ttl = config_.ttl;
  ip.protocol = kIpProtoUdp;
  ip.src = config_.addr.to_be();
  ip.dst = dst_ip.to_be();
  store_header(out, l3, ip);
  ip.checksum = Be16::from_host(ipv4_header_checksum(out.subspan(l3, sizeof ip)));
  store_header(out, l3, ip);
  UdpHeader udp;
  udp.src_port = Be16::from_host(src_port);
  udp.dst_port = Be16::from_host(dst_port);
  udp.length = Be16::from_host(static_cast<uint16_t>(sizeof(UdpHeader) + payload_len));
  udp.checksum = Be16{};
  store_header(out, l3 + sizeof ip, udp);
  return header_len;
}

}  // namespace conduit::net
