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
#include "net/icmp6.h"
#include "net/ipv4.h"
#include "net/ipv6.h"
#include "net/udp.h"

namespace conduit::net {
namespace {

bool is_unicast_ip(Ipv4Addr ip) { return ip.is_unicast(); }

// Room for the events one call can produce before the caller drains them:
// a resolution failing or succeeding releases a whole per-hop queue.
size_t event_reserve(const NeighbourConfig& n) { return 64 + 2 * n.max_pending_per_hop; }

// Each table's random seed: the configured one with the port MAC and the family mixed in, so
// hosts given the same seed (the default) still draw different reachable times.
uint64_t table_seed(const NetStackConfig& c, uint64_t family) {
  uint64_t mac = 0;
  for (uint8_t b : c.mac.bytes) mac = mac << 8 | b;
  return c.neighbour.random_seed ^ (mac * 0x9E3779B97F4A7C15ull) ^ (family << 56);
}

NeighbourConfig table4_config(const NetStackConfig& c) {
  NeighbourConfig n = c.neighbour;
  n.random_seed = table_seed(c, 4);
  return n;
}

// With IPv6 off the v6 table is never used: keep it at one entry.
NeighbourConfig table6_config(const NetStackConfig& c) {
  NeighbourConfig n = c.neighbour;
  n.random_seed = table_seed(c, 6);
  if (!c.addr6) n.capacity = 1;
  return n;
}

constexpr MacAddr kAllNodesMac{{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}};  // ff02::1

// Walks NDP options (RFC 4861 section 4.6): false when one has length 0 or
// runs past the end. `found`: an option of type `want` is present; `mac`:
// the first such option's address when it has the Ethernet form (8 bytes,
// RFC 2464 section 8; others are ignored, as Linux does).
bool walk_ndp_options(std::span<const uint8_t> opts, uint8_t want, bool& found,
                      std::optional<MacAddr>& mac) {
  found = false;
  size_t at = 0;
  while (at < opts.size()) {
    if (opts.size() - at < 2) return false;
    const size_t len = size_t{opts[at + 1]} * 8;
    if (len == 0 || len > opts.size() - at) return false;
    if (opts[at] == want) {
      if (!found && len == sizeof(NdpLinkAddrOption)) {
        MacAddr m;
        std::memcpy(m.bytes.data(), opts.data() + at + 2, sizeof m);
        mac = m;
      }
      found = true;
    }
    at += len;
  }
  return true;
}

bool is_unicast_mac(MacAddr mac) { return !mac.is_zero() && !mac.is_multicast(); }

uint32_t be32_at(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

}  // namespace

uint64_t NetCounters::total_drops() const {
  return std::accumulate(rx_drops.begin(), rx_drops.end(), uint64_t{0});
}

NetStack::NetStack(const NetStackConfig& config)
    : config_(config),
      prefix_mask_(ipv4_prefix_mask(config.prefix_len)),
      neighbours_(table4_config(config)),
      neighbours6_(table6_config(config)) {
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
  if (config_.addr6) {
    const Ipv6Addr& a = *config_.addr6;
    if (!a.is_unicast()) {
      throw std::invalid_argument("addr6 " + a.to_string() +
                                  " is not a unicast IPv6 address (not ::, ::1, multicast or "
                                  "v4-mapped)");
    }
    if (config_.prefix_len6 < 1 || config_.prefix_len6 > 128) {
      throw std::invalid_argument("prefix_len6 " + std::to_string(config_.prefix_len6) +
                                  " is outside 1..128");
    }
    if (config_.gateway6 &&
        (!is_peer_address6(*config_.gateway6) || !on_link6(*config_.gateway6))) {
      throw std::invalid_argument("gateway6 " + config_.gateway6->to_string() +
                                  " must be another unicast address on-link: inside " +
                                  a.to_string() + "/" + std::to_string(config_.prefix_len6) +
                                  " or in fe80::/10");
    }
    solicited_ip_ = Ipv6Addr::solicited_node(a);
    solicited_mac_ = solicited_ip_.multicast_mac();
  } else if (config_.gateway6 || !config_.static_neighbours6.empty()) {
    throw std::invalid_argument("gateway6 and static_neighbours6 need addr6 (IPv6 is off)");
  }
  const size_t reserve = event_reserve(config_.neighbour);
  events_.reserve(config_.addr6 ? 2 * reserve : reserve);
  scratch4_.reserve(reserve);
  if (config_.addr6) scratch6_.reserve(reserve);
  for (const StaticNeighbour& s : config_.static_neighbours) {
    if (!add_static_neighbour(s.ip, s.mac)) {
      throw std::invalid_argument("static neighbour " + s.ip.to_string() + " at " +
                                  s.mac.to_string() +
                                  " rejected: needs a unicast IP and MAC and room in the "
                                  "neighbour table");
    }
  }
  for (const StaticNeighbour6& s : config_.static_neighbours6) {
    if (!add_static_neighbour6(s.ip, s.mac)) {
      throw std::invalid_argument("static_neighbours6 entry " + s.ip.to_string() + " at " +
                                  s.mac.to_string() +
                                  " rejected: needs a unicast IPv6 address other than addr6, a "
                                  "unicast MAC and room in the neighbour table");
    }
  }
}

bool NetStack::on_link6(const Ipv6Addr& ip) const {
  // Link-local addresses are on the link by definition (RFC 4291 2.5.6).
  if (ip.is_link_local() || ipv6_prefix_match(ip, *config_.addr6, config_.prefix_len6)) {
    return true;
  }
  for (size_t i = 0; i < prefixes6_count_; ++i) {
    if (ipv6_prefix_match(ip, prefixes6_[i].prefix, prefixes6_[i].len)) return true;
  }
  return false;
}

bool NetStack::is_peer_address6(const Ipv6Addr& ip) const {
  return ip.is_unicast() && ip != *config_.addr6;
}

void NetStack::flush_events4() {
  static_assert(static_cast<int>(PendingEvent::Kind::kSendRequest) ==
                    static_cast<int>(NeighbourEventKind::kSendRequest) &&
                static_cast<int>(PendingEvent::Kind::kTransmitQueued) ==
                    static_cast<int>(NeighbourEventKind::kTransmitQueued) &&
                static_cast<int>(PendingEvent::Kind::kDropQueued) ==
                    static_cast<int>(NeighbourEventKind::kDropQueued));
  for (const NeighbourEvent& ev : scratch4_) {
    PendingEvent p;
    p.kind = static_cast<PendingEvent::Kind>(ev.kind);
    p.ip = ev.ip;
    p.mac = ev.mac;
    p.frame = ev.frame;
    events_.push_back(p);
  }
  scratch4_.clear();
}

void NetStack::flush_events6() {
  for (const NeighbourEvent6& ev : scratch6_) {
    PendingEvent p;
    p.kind = static_cast<PendingEvent::Kind>(ev.kind);
    p.ipv6 = true;
    p.ip6 = ev.ip;
    p.mac = ev.mac;
    p.frame = ev.frame;
    events_.push_back(p);
  }
  scratch6_.clear();
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
    // VID 0 is a priority tag (802.1Q 9.6: PFC without VLANs): the frame is
    // untagged, so it is ours only on an untagged port.
    const bool ours = tag->vid() == 0 ? !config_.vlan_id : tag->vid() == config_.vlan_id;
    if (!ours) return drop(RxDrop::kVlanMismatch);
    if (tag->vid() == 0) ++counters_.rx_priority_tagged;
    ether_type = tag->ether_type.host();
    l3 += sizeof(VlanTag);
    if (ether_type == kEtherTypeVlan || ether_type == kEtherTypeQinQ) {
      return drop(RxDrop::kStackedVlan);
    }
  } else if (config_.vlan_id) {
    return drop(RxDrop::kVlanMismatch);
  }
  // No station sends from a group MAC (IEEE 802). Replies go to the source MAC,
  // so answering one would flood the link; learning it is no better. (A zero
  // source is odd but unicast: test tools send it, and Linux takes it.)
  if (eth->src.is_multicast()) return drop(RxDrop::kL2BadSource);
  if (ether_type == kEtherTypeIpv6) {
    if (!ipv6_on()) return drop(RxDrop::kIpv6Off);
    // Unicast to us, or one of the two groups we belong to: all-nodes and
    // our solicited-node group (never broadcast).
    if (eth->dst != config_.mac && eth->dst != kAllNodesMac && eth->dst != solicited_mac_) {
      return drop(RxDrop::kNotOurMac);
    }
    return on_ipv6(frame, *eth, l3, now_ns, reply);
  }
  if (eth->dst != config_.mac && !eth->dst.is_broadcast()) return drop(RxDrop::kNotOurMac);

  if (ether_type == kEtherTypeArp) return on_arp(frame, *eth, l3, now_ns, reply);
  // Broadcast MAC carries only ARP for us; IPv4 to ff:ff.. is not ours.
  if (ether_type == kEtherTypeIpv4) {
    if (eth->dst != config_.mac) return drop(RxDrop::kNotOurMac);
    return on_ipv4(frame, *eth, l3, reply);
  }
  return drop(RxDrop::kUnknownEtherType);
}

RxResult NetStack::on_arp(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                          uint64_t now_ns, std::span<uint8_t> reply) {
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
  // Of several different answers back to back (proxy agents) the first wins, as in Linux's
  // arp_process: a new MAC inside the table's locktime is taken only from a gratuitous ARP
  // (sender address = target address; a reply also names the sender's MAC as target MAC,
  // RFC 5227 section 3 and Linux's arp_is_garp) or a request addressed to us.
  const bool gratuitous =
      sender_ip == target_ip && (op == kArpOpRequest || arp->target_mac == arp->sender_mac);
  // Only a reply sent to us proves the sender reachable; requests and broadcast replies
  // (gratuitous ARPs) only name its MAC, which is then STALE until confirmed (arp_process).
  const NeighbourProof proof = op == kArpOpReply && eth.dst == config_.mac
                                   ? NeighbourProof::kReachable
                                   : NeighbourProof::kStale;
  if (target_ip != config_.addr) {
    // Not for us, but an existing entry may still be refreshed (RFC 826
    // merge); no entry is created, so a flood cannot fill the table.
    if (!probe && on_link(sender_ip)) {
      neighbours_.learn(sender_ip, arp->sender_mac, now_ns, /*create=*/false, scratch4_,
                        /*override=*/gratuitous, proof);
      flush_events4();
    }
    return drop(RxDrop::kArpNotForUs);
  }
  if (!probe && on_link(sender_ip)) {
    neighbours_.learn(sender_ip, arp->sender_mac, now_ns, /*create=*/op == kArpOpRequest, scratch4_,
                      /*override=*/op == kArpOpRequest, proof);
    // The gateway's request made its entry: ours all the same, a flood may not evict it.
    if (config_.gateway == sender_ip) neighbours_.keep(sender_ip);
    flush_events4();
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
  RxResult r = deliver_udp(frame, eth, l3, l3 + sizeof(Ipv4Header), ip.tos, [&](size_t udp_len) {
    return udp_pseudo_header_sum(Ipv4Addr::from_be(ip.src), Ipv4Addr::from_be(ip.dst),
                                 static_cast<uint16_t>(udp_len));
  });
  if (r.verdict == RxVerdict::kDeliverUdp) {
    r.udp.src_ip = Ipv4Addr::from_be(ip.src);
    r.udp.dst_ip = Ipv4Addr::from_be(ip.dst);
  }
  return r;
}

template <class PseudoSum>
RxResult NetStack::deliver_udp(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                               size_t l4, uint8_t tos, PseudoSum pseudo_sum) {
  const auto udp = load_header<UdpHeader>(frame, l4);
  if (!udp) return drop(RxDrop::kUdpTruncated);
  const size_t udp_len = udp->length.host();
  if (udp_len < sizeof(UdpHeader) || udp_len > frame.size() - l4) {
    return drop(RxDrop::kUdpTruncated);
  }
  const uint16_t dst_port = udp->dst_port.host();
  if (!port_open(dst_port)) return drop(RxDrop::kUdpPortClosed);
  // Zero means "no checksum" (IPv4; IPv6 tunnels per RFC 6935/6936: RoCEv2 relies on the ICRC).
  if (config_.verify_udp_checksum && udp->checksum.host() != 0) {
    if (checksum_finish(checksum_partial(frame.subspan(l4, udp_len), pseudo_sum(udp_len))) != 0) {
      return drop(RxDrop::kUdpBadChecksum);
    }
  }
  ++counters_.rx_udp_delivered;
  RxResult r;
  r.verdict = RxVerdict::kDeliverUdp;
  r.udp.src_mac = eth.src;
  r.udp.src_port = udp->src_port.host();
  r.udp.dst_port = dst_port;
  r.udp.tos = tos;
  r.udp.ip_offset = static_cast<uint16_t>(l3);
  r.udp.payload_offset = static_cast<uint16_t>(l4 + sizeof(UdpHeader));
  r.udp.payload_len = static_cast<uint16_t>(udp_len - sizeof(UdpHeader));
  return r;
}

wire::RxExpect NetStack::make_roce_expect(std::span<const uint8_t> frame, const UdpDatagram& udp,
                                          const wire::ParseOptions& opt) const {
  // A peer that priority-tags its RoCE frames (802.1Q VID 0: PCP without a VLAN) on a port
  // without one: its frames match with their tag, the VID required to stay 0.
  const bool priority_tagged =
      !config_.vlan_id && udp.ip_offset == sizeof(EthernetHeader) + sizeof(VlanTag) &&
      frame.size() > udp.ip_offset && wire::get_be16(frame.data() + 12) == kEtherTypeVlan &&
      (wire::get_be16(frame.data() + 14) & 0x0FFF) == 0;
  const size_t l3 = priority_tagged ? udp.ip_offset : l2_header_len();
  const size_t ip_udp = udp.ipv6 ? kIpv6UdpHeaderBytes : kIpv4UdpHeaderBytes;
  const size_t udp_end = size_t{udp.payload_offset} + udp.payload_len;
  // What on_rx_frame() found, checked again: the caller's udp may be stale.
  if (udp.ip_offset != l3 || udp.payload_offset != l3 + ip_udp ||
      udp.payload_len < wire::kBthBytes || frame.size() < udp_end ||
      udp.dst_port != opt.udp_dst_port || !port_open(udp.dst_port)) {
    return wire::RxExpect{};
  }
  const uint8_t* ip = frame.data() + l3;
  wire::FrameAddr sender;
  sender.has_vlan = config_.vlan_id.has_value() || priority_tagged;
  sender.vlan_tci = config_.vlan_id.value_or(0);
  sender.src_port = udp.src_port;
  sender.dst_port = udp.dst_port;
  if (udp.ipv6) {
    if (!ipv6_on() || udp.dst_ip6 != *config_.addr6 || !is_peer_address6(udp.src_ip6) ||
        (ip[0] >> 4) != 6 || ip[6] != kIpProtoUdp) {
      return wire::RxExpect{};
    }
    sender.ipv6 = true;
    sender.src_ip6 = udp.src_ip6.bytes;
    sender.dst_ip6 = udp.dst_ip6.bytes;
  } else {
    if (!opt.verify_ip_checksum || udp.dst_ip != config_.addr || !is_peer_address(udp.src_ip)) {
      return wire::RxExpect{};
    }
    // The expected image has DF set (every RoCEv2 sender sets it); a sender
    // without it would never match.
    if (wire::get_be16(ip + 6) != kIpv4FlagDf) return wire::RxExpect{};
    sender.src_ip = udp.src_ip.value;
    sender.dst_ip = udp.dst_ip.value;
    sender.ip_id = wire::get_be16(ip + 4);
    sender.ttl = ip[8];
  }
  const uint8_t* bth = frame.data() + udp.payload_offset;
  wire::RxExpect e = wire::make_rx_expect(sender, wire::get_be32(bth + 4) & 0xFFFFFF, opt,
                                          wire::get_be16(bth + 2));
  // A non-zero UDP checksum is verified by on_rx_frame(): such frames miss.
  const size_t udp_csum = l3 + ip_udp - 2;
  bool ok = wire::rx_expect_require_byte(e, udp_csum, 0xFF, 0) &&
            wire::rx_expect_require_byte(e, udp_csum + 1, 0xFF, 0);
  if (sender.has_vlan) {  // the VID, not the priority bits (on_rx_frame ignores those)
    const uint16_t vid = config_.vlan_id.value_or(0);
    ok = ok && wire::rx_expect_require_byte(e, 14, 0x0F, static_cast<uint8_t>(vid >> 8)) &&
         wire::rx_expect_require_byte(e, 15, 0xFF, static_cast<uint8_t>(vid));
  }
  return ok ? e : wire::RxExpect{};
}

bool NetStack::on_rx_expected(std::span<const uint8_t> frame, const wire::RxExpect& exp,
                              UdpDatagram& udp, wire::RoceView& view, wire::DropReason& why) {
  // Our MAC first: cheaper than the match, which includes the ICRC. The
  // source MAC is not in the expectation: on_rx_frame's group check is repeated.
  if (frame.size() < sizeof(EthernetHeader) ||
      std::memcmp(frame.data(), config_.mac.bytes.data(), sizeof(MacAddr)) != 0) {
    return false;
  }
  MacAddr src_mac;
  std::memcpy(src_mac.bytes.data(), frame.data() + 6, sizeof(MacAddr));
  if (src_mac.is_multicast() || !wire::parse_frame_matched(frame, exp, view, why)) return false;
  ++counters_.rx_frames;
  ++counters_.rx_udp_delivered;
  const size_t l3 = exp.l2_bytes;
  if (!config_.vlan_id && l3 != sizeof(EthernetHeader)) ++counters_.rx_priority_tagged;
  const uint8_t* ip = frame.data() + l3;
  udp.src_mac = src_mac;
  udp.ip_offset = static_cast<uint16_t>(l3);
  if (exp.ipv6) {
    ++counters_.rx_udp6_delivered;
    const uint8_t* l4 = ip + sizeof(Ipv6Header);
    udp.ipv6 = true;
    udp.src_ip = Ipv4Addr{};
    udp.dst_ip = Ipv4Addr{};
    std::memcpy(udp.src_ip6.bytes.data(), ip + 8, 16);
    std::memcpy(udp.dst_ip6.bytes.data(), ip + 24, 16);
    udp.src_port = wire::get_be16(l4);
    udp.dst_port = wire::get_be16(l4 + 2);
    udp.tos = static_cast<uint8_t>(wire::get_be16(ip) >> 4);  // the traffic class
    udp.payload_offset = static_cast<uint16_t>(l3 + kIpv6UdpHeaderBytes);
    udp.payload_len = static_cast<uint16_t>(wire::get_be16(l4 + 4) - sizeof(UdpHeader));
    return true;
  }
  udp.src_ip = Ipv4Addr{wire::get_be32(ip + 12)};
  udp.dst_ip = Ipv4Addr{wire::get_be32(ip + 16)};
  udp.src_port = wire::get_be16(ip + 20);
  udp.dst_port = wire::get_be16(ip + 22);
  udp.tos = ip[1];
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
  const auto r = neighbours_.resolve(next_hop, now_ns, frame, scratch4_);
  flush_events4();
  return r;
}

std::optional<Ipv6Addr> NetStack::next_hop6(const Ipv6Addr& dst) {
  if (!ipv6_on() || !is_peer_address6(dst)) {
    ++counters_.no_route;
    return std::nullopt;
  }
  if (on_link6(dst)) return dst;
  if (config_.gateway6) return *config_.gateway6;
  if (router6_) return *router6_;
  ++counters_.no_route;
  return std::nullopt;
}

NeighbourTable6::ResolveResult NetStack::resolve6(const Ipv6Addr& next_hop, uint64_t now_ns,
                                                  FrameHandle frame) {
  // Only on-link peers can answer a Neighbor Solicitation.
  if (!ipv6_on() || !is_peer_address6(next_hop) || !on_link6(next_hop)) {
    ++counters_.no_route;
    return {NeighbourTable6::Resolve::kDropped, MacAddr{}};
  }
  const auto r = neighbours6_.resolve(next_hop, now_ns, frame, scratch6_);
  flush_events6();
  return r;
}

void NetStack::announce() {
  // Gratuitous ARP (RFC 5227 announcement): a request for our own address,
  // so peers replace a stale MAC for it (e.g. after a NIC or host change).
  PendingEvent arp;
  arp.kind = PendingEvent::Kind::kSendRequest;
  arp.ip = config_.addr;
  arp.mac = MacAddr::broadcast();
  events_.push_back(arp);
  if (ipv6_on()) {
    // The IPv6 equivalent (RFC 4861 section 7.2.6).
    PendingEvent na;
    na.kind = PendingEvent::Kind::kAnnounce6;
    na.ipv6 = true;
    na.ip6 = *config_.addr6;
    na.mac = kAllNodesMac;
    events_.push_back(na);
    if (!config_.gateway6) {
      // Ask for a Router Advertisement rather than wait up to the router's interval.
      PendingEvent rs;
      rs.kind = PendingEvent::Kind::kSolicitRouter6;
      rs.ipv6 = true;
      events_.push_back(rs);
    }
  }
}

void NetStack::poll_timers(uint64_t now_ns) {
  if (router6_ && now_ns >= router6_expiry_ns_) forget_router6();  // its lifetime ran out
  for (size_t i = prefixes6_count_; i-- > 0;) {
    if (now_ns >= prefixes6_[i].expiry_ns) forget_prefix6(i);
  }
  neighbours_.poll(now_ns, scratch4_);
  flush_events4();
  neighbours6_.poll(now_ns, scratch6_);
  flush_events6();
}

bool NetStack::add_static_neighbour(Ipv4Addr ip, MacAddr mac) {
  const bool ok = neighbours_.add_static(ip, mac, scratch4_);
  flush_events4();
  return ok;
}

bool NetStack::remove_neighbour(Ipv4Addr ip) {
  const bool ok = neighbours_.remove(ip, scratch4_);
  flush_events4();
  return ok;
}

bool NetStack::add_static_neighbour6(const Ipv6Addr& ip, MacAddr mac) {
  if (!ipv6_on() || !is_peer_address6(ip)) return false;
  const bool ok = neighbours6_.add_static(ip, mac, scratch6_);
  flush_events6();
  return ok;
}

bool NetStack::remove_neighbour6(const Ipv6Addr& ip) {
  if (!ipv6_on()) return false;
  const bool ok = neighbours6_.remove(ip, scratch6_);
  flush_events6();
  return ok;
}

size_t NetStack::take_actions(std::span<NetAction> out) {
  size_t n = 0;
  while (n < out.size() && events_head_ < events_.size()) {
    const PendingEvent& ev = events_[events_head_++];
    NetAction& a = out[n++];
    a = NetAction{};
    a.ipv6 = ev.ipv6;
    a.next_hop = ev.ip;
    a.next_hop6 = ev.ip6;
    switch (ev.kind) {
      case PendingEvent::Kind::kSendRequest:
        a.kind = NetAction::Kind::kTransmit;
        if (ev.ipv6) {
          // A new resolution asks the solicited-node group; a refresh goes
          // unicast to the known MAC (RFC 4861 section 7.2.2).
          const bool multicast = ev.mac.is_broadcast();
          const Ipv6Addr dst = multicast ? Ipv6Addr::solicited_node(ev.ip6) : ev.ip6;
          const MacAddr dst_mac = multicast ? dst.multicast_mac() : ev.mac;
          a.len = static_cast<uint16_t>(
              build_ndp(a.bytes, kIcmp6NeighborSolicitation, 0, dst_mac, dst, ev.ip6));
          ++counters_.tx_ns;
        } else {
          // A refresh goes unicast to the known MAC; target MAC stays zero.
          a.len =
              static_cast<uint16_t>(build_arp(a.bytes, kArpOpRequest, ev.mac, MacAddr{}, ev.ip));
          ++counters_.tx_arp_requests;
        }
        break;
      case PendingEvent::Kind::kAnnounce6:
        a.kind = NetAction::Kind::kTransmit;
        a.len =
            static_cast<uint16_t>(build_ndp(a.bytes, kIcmp6NeighborAdvertisement, kNaFlagOverride,
                                            ev.mac, Ipv6Addr::all_nodes(), ev.ip6));
        ++counters_.tx_na;
        break;
      case PendingEvent::Kind::kSolicitRouter6:
        a.kind = NetAction::Kind::kTransmit;
        a.len = static_cast<uint16_t>(build_rs(a.bytes));
        ++counters_.tx_rs;
        break;
      case PendingEvent::Kind::kTransmitQueued:
        a.kind = NetAction::Kind::kTransmitQueued;
        a.frame = ev.frame;
        a.dst_mac = ev.mac;
        break;
      case PendingEvent::Kind::kDropQueued:
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

// ---- IPv6 ----

RxResult NetStack::on_ipv6(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                           uint64_t now_ns, std::span<uint8_t> reply) {
  const auto ip = load_header<Ipv6Header>(frame, l3);
  if (!ip) return drop(RxDrop::kIpv6Truncated);
  if (ip->version() != 6) return drop(RxDrop::kIpv6BadVersion);
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const size_t payload_len = ip->payload_len.host();
  // Bytes past the payload are Ethernet padding and are ignored.
  if (frame.size() - l4 < payload_len) return drop(RxDrop::kIpv6Truncated);
  const uint8_t next = ip->next_header;
  const uint8_t icmp_type = next == kIpProtoIcmp6 && payload_len > 0 ? frame[l4] : 0;
  const bool ndp = icmp_type >= kIcmp6RouterSolicitation && icmp_type <= kIcmp6Redirect;
  const Ipv6Addr dst{ip->dst};
  if (dst != *config_.addr6 && !(ndp && (dst == Ipv6Addr::all_nodes() || dst == solicited_ip_))) {
    return drop(RxDrop::kIpv6NotForUs);
  }
  const Ipv6Addr src{ip->src};
  // :: is the source of a Duplicate Address Detection probe, and of nothing
  // else we accept (RFC 4862 section 5.4.2).
  if (src.is_unspecified() ? icmp_type != kIcmp6NeighborSolicitation : !is_peer_address6(src)) {
    return drop(RxDrop::kIpv6BadSource);
  }
  if (is_ipv6_extension_header(next)) return drop(RxDrop::kIpv6ExtHeader);
  // From here on the frame ends where the IPv6 payload ends (no padding).
  const auto datagram = frame.first(l4 + payload_len);
  switch (next) {
    case kIpProtoUdp:
      return on_udp6(datagram, eth, *ip, l3);
    case kIpProtoIcmp6:
      return on_icmp6(datagram, eth, *ip, l3, now_ns, reply);
    default:
      return drop(RxDrop::kIpUnknownProtocol);
  }
}

RxResult NetStack::on_udp6(std::span<const uint8_t> frame, const EthernetHeader& eth,
                           const Ipv6Header& ip, size_t l3) {
  const Ipv6Addr src{ip.src};
  const Ipv6Addr dst{ip.dst};
  RxResult r =
      deliver_udp(frame, eth, l3, l3 + sizeof(Ipv6Header), ip.traffic_class(), [&](size_t udp_len) {
        return ipv6_pseudo_header_sum(src, dst, static_cast<uint32_t>(udp_len), kIpProtoUdp);
      });
  if (r.verdict == RxVerdict::kDeliverUdp) {
    ++counters_.rx_udp6_delivered;
    r.udp.ipv6 = true;
    r.udp.src_ip6 = src;
    r.udp.dst_ip6 = dst;
  }
  return r;
}

RxResult NetStack::on_icmp6(std::span<const uint8_t> frame, const EthernetHeader& eth,
                            const Ipv6Header& ip, size_t l3, uint64_t now_ns,
                            std::span<uint8_t> reply) {
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const size_t icmp_len = frame.size() - l4;
  const auto icmp = load_header<Icmp6Header>(frame, l4);
  if (!icmp) return drop(RxDrop::kIcmp6Truncated);
  const uint32_t pseudo = ipv6_pseudo_header_sum(Ipv6Addr{ip.src}, Ipv6Addr{ip.dst},
                                                 static_cast<uint32_t>(icmp_len), kIpProtoIcmp6);
  if (checksum_finish(checksum_partial(frame.subspan(l4, icmp_len), pseudo)) != 0) {
    return drop(RxDrop::kIcmp6BadChecksum);
  }
  switch (icmp->type) {
    case kIcmp6EchoRequest:
      if (icmp->code != 0) break;
      return on_echo6(frame, eth, ip, l3, reply);
    case kIcmp6NeighborSolicitation:
      return on_ns(frame, eth, ip, l3, now_ns, reply);
    case kIcmp6NeighborAdvertisement:
      return on_na(frame, ip, l3, now_ns);
    case kIcmp6RouterAdvertisement:
      return on_ra(frame, eth, ip, l3, now_ns);
    default:
      break;
  }
  return drop(RxDrop::kIcmp6Unhandled);
}

RxResult NetStack::on_echo6(std::span<const uint8_t> frame, const EthernetHeader& eth,
                            const Ipv6Header& ip, size_t l3, std::span<uint8_t> reply) {
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const size_t icmp_len = frame.size() - l4;
  const auto icmp = load_header<IcmpEchoHeader>(frame, l4);  // same layout as ICMPv4 echo
  if (!icmp) return drop(RxDrop::kIcmp6Truncated);
  ++counters_.rx_icmp6_echo_requests;
  if (!config_.answer_ping) return drop(RxDrop::kIcmpDisabled);

  const size_t out_l3 = l2_header_len();
  const size_t out_l4 = out_l3 + sizeof(Ipv6Header);
  const size_t out_len = std::max(out_l4 + icmp_len, kEthMinFrameBytes);
  if (reply.size() < out_len) return drop(RxDrop::kReplyBufferTooSmall);
  std::fill(reply.begin(), reply.begin() + static_cast<std::ptrdiff_t>(out_len), uint8_t{0});
  write_l2_header(reply, eth.src, kEtherTypeIpv6);

  Ipv6Header out_ip{};
  // The traffic class is echoed, as the IPv4 TOS is; no flow label.
  out_ip.vtc_flow = Ipv6Header::make_vtc_flow(ip.traffic_class(), 0);
  out_ip.payload_len = ip.payload_len;
  out_ip.next_header = kIpProtoIcmp6;
  out_ip.hop_limit = hop_limit6();
  out_ip.src = config_.addr6->bytes;
  out_ip.dst = ip.src;
  store_header(reply, out_l3, out_ip);

  // Identifier, sequence and data are echoed unchanged.
  std::memcpy(reply.data() + out_l4, frame.data() + l4, icmp_len);
  IcmpEchoHeader out_icmp = *icmp;
  out_icmp.type = kIcmp6EchoReply;
  out_icmp.checksum = Be16{};
  store_header(reply, out_l4, out_icmp);
  const uint32_t pseudo = ipv6_pseudo_header_sum(*config_.addr6, Ipv6Addr{ip.src},
                                                 static_cast<uint32_t>(icmp_len), kIpProtoIcmp6);
  out_icmp.checksum =
      Be16::from_host(checksum_finish(checksum_partial(reply.subspan(out_l4, icmp_len), pseudo)));
  store_header(reply, out_l4, out_icmp);

  ++counters_.tx_icmp6_echo_replies;
  RxResult r;
  r.verdict = RxVerdict::kReply;
  r.reply_len = out_len;
  return r;
}

RxResult NetStack::on_ns(std::span<const uint8_t> frame, const EthernetHeader& eth,
                         const Ipv6Header& ip, size_t l3, uint64_t now_ns,
                         std::span<uint8_t> reply) {
  // RFC 4861 section 7.1.1 (the checksum was checked by on_icmp6).
  if (ip.hop_limit != kNdpHopLimit) return drop(RxDrop::kNdpBadHopLimit);
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const auto ns = load_header<NdpNeighborMessage>(frame, l4);
  if (!ns || ns->code != 0) return drop(RxDrop::kNdpMalformed);
  const Ipv6Addr target{ns->target};
  if (target.is_multicast()) return drop(RxDrop::kNdpMalformed);
  bool has_slla = false;
  std::optional<MacAddr> slla;
  if (!walk_ndp_options(frame.subspan(l4 + sizeof(NdpNeighborMessage)), kNdpOptSourceLinkAddr,
                        has_slla, slla)) {
    return drop(RxDrop::kNdpMalformed);
  }
  const Ipv6Addr src{ip.src};
  const Ipv6Addr dst{ip.dst};
  const bool dad = src.is_unspecified();
  if (dad && (!dst.is_solicited_node() || has_slla)) return drop(RxDrop::kNdpMalformed);
  // The reply goes to the sender's MAC: it must be one.
  if (!dad && !is_unicast_mac(eth.src)) return drop(RxDrop::kNdpMalformed);
  if (target != *config_.addr6) return drop(RxDrop::kNdpNotForUs);
  ++counters_.rx_ns;
  // Learn the sender (RFC 4861 section 7.2.3): STALE when its MAC is new (probed on its next
  // use), and evictable, so an NS flood cannot fill the table. Only on-link senders: others
  // are never next hops.
  if (!dad && slla && on_link6(src)) {
    neighbours6_.learn(src, *slla, now_ns, /*create=*/true, scratch6_, /*override=*/true,
                       NeighbourProof::kStale);
    if (keeps_router6(src)) neighbours6_.keep(src);  // (as in on_arp)
    flush_events6();
  }
  // A DAD probe for our address is answered to all nodes, unsolicited
  // (RFC 4861 section 7.2.4): the prober then sees the address is taken.
  const uint32_t flags = dad ? kNaFlagOverride : kNaFlagSolicited | kNaFlagOverride;
  const size_t len =
      dad ? build_ndp(reply, kIcmp6NeighborAdvertisement, flags, kAllNodesMac,
                      Ipv6Addr::all_nodes(), target)
          : build_ndp(reply, kIcmp6NeighborAdvertisement, flags, eth.src, src, target);
  if (len == 0) return drop(RxDrop::kReplyBufferTooSmall);
  ++counters_.tx_na;
  RxResult r;
  r.verdict = RxVerdict::kReply;
  r.reply_len = len;
  return r;
}

RxResult NetStack::on_na(std::span<const uint8_t> frame, const Ipv6Header& ip, size_t l3,
                         uint64_t now_ns) {
  // RFC 4861 section 7.1.2.
  if (ip.hop_limit != kNdpHopLimit) return drop(RxDrop::kNdpBadHopLimit);
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const auto na = load_header<NdpNeighborMessage>(frame, l4);
  if (!na || na->code != 0) return drop(RxDrop::kNdpMalformed);
  const Ipv6Addr target{na->target};
  if (target.is_multicast()) return drop(RxDrop::kNdpMalformed);
  const uint32_t flags = na->flags_reserved.host();
  if (Ipv6Addr{ip.dst}.is_multicast() && (flags & kNaFlagSolicited) != 0) {
    return drop(RxDrop::kNdpMalformed);
  }
  bool has_tlla = false;
  std::optional<MacAddr> tlla;
  if (!walk_ndp_options(frame.subspan(l4 + sizeof(NdpNeighborMessage)), kNdpOptTargetLinkAddr,
                        has_tlla, tlla)) {
    return drop(RxDrop::kNdpMalformed);
  }
  ++counters_.rx_na;
  // RFC 4861 section 7.2.5: never create an entry; fill an incomplete one (which needs the
  // TLLA); change a known MAC only when Override is set; only a solicited NA proves the
  // neighbour reachable (an unsolicited one's new MAC is STALE, its known MAC changes
  // nothing, as in Linux's ndisc_recv_na). Another MAC without Override puts a
  // reachable entry in doubt (STALE: the cached MAC kept, probed on its next use). Without a
  // TLLA a solicited NA confirms the cached MAC: Linux answers a unicast NS (our refresh) with
  // S set and neither Override nor a TLLA (ndisc_recv_ns: both only for multicast NSs).
  const auto known = neighbours6_.find(target);
  if (known) {
    const bool reachable = known->state == NeighbourState::kReachable;
    const bool dynamic = known->state != NeighbourState::kStatic;
    bool updated = false;  // the RFC's "MUST update the Neighbor Cache entry" case
    if (tlla && (!reachable || (flags & kNaFlagOverride) != 0 || known->mac == *tlla)) {
      neighbours6_.learn(target, *tlla, now_ns, /*create=*/false, scratch6_, /*override=*/true,
                         (flags & kNaFlagSolicited) != 0
                             ? NeighbourProof::kReachable
                             : NeighbourProof::kStale);  // (static: kept)
      flush_events6();
      updated = dynamic;
    } else if (tlla) {
      neighbours6_.mark_stale(target, now_ns);
    } else if (reachable) {
      if ((flags & kNaFlagSolicited) != 0) {
        neighbours6_.learn(target, known->mac, now_ns, /*create=*/false, scratch6_);
        flush_events6();
      }
      updated = true;
    }
    // An update whose Router flag is clear: the neighbour is a host now, and the default
    // router it was MUST be removed (section 7.2.5; Linux's rt6_clean_tohost). gateway6 is
    // configured, not learned: it stays.
    if (updated && (flags & kNaFlagRouter) == 0 && router6_ == target) forget_router6();
  }
  RxResult r;
  r.verdict = RxVerdict::kConsumed;
  return r;
}

RxResult NetStack::on_ra(std::span<const uint8_t> frame, const EthernetHeader& eth,
                         const Ipv6Header& ip, size_t l3, uint64_t now_ns) {
  // RFC 4861 section 6.1.2 (the checksum was checked by on_icmp6): from a
  // router's link-local address, hop limit 255, code 0, options well formed.
  if (ip.hop_limit != kNdpHopLimit) return drop(RxDrop::kNdpBadHopLimit);
  const Ipv6Addr src{ip.src};
  if (!src.is_link_local() || !is_unicast_mac(eth.src)) return drop(RxDrop::kNdpMalformed);
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const auto ra = load_header<NdpRouterAdvertisement>(frame, l4);
  if (!ra || ra->code != 0) return drop(RxDrop::kNdpMalformed);
  bool has_slla = false;
  std::optional<MacAddr> slla;
  if (!walk_ndp_options(frame.subspan(l4 + sizeof(NdpRouterAdvertisement)), kNdpOptSourceLinkAddr,
                        has_slla, slla)) {
    return drop(RxDrop::kNdpMalformed);
  }
  ++counters_.rx_ra;
  const uint16_t lifetime_s = ra->router_lifetime_s.host();
  // Section 6.3.4: the router's link-layer address goes into the neighbour
  // table (an entry is made for a default router; a new MAC is STALE, as
  // the RA does not prove it reachable), and a lifetime of 0 withdraws it
  // as a default router. Its on-link prefixes add to the policy's, and its
  // MTU option may lower the link MTU.
  learn_ra_options(frame.subspan(l4 + sizeof(NdpRouterAdvertisement)), now_ns);
  learn_ra_timers(ra->reachable_time_ms.host(), ra->retrans_timer_ms.host(), now_ns);
  // A nonzero Cur Hop Limit is the host's default hop limit from now on (section 6.3.4; 0:
  // unspecified). Linux takes any from accept_ra_min_hop_limit (1) up.
  if (ra->cur_hop_limit != 0 && ra->cur_hop_limit != hop_limit6()) {
    ra_hop_limit6_ = ra->cur_hop_limit;
    ++counters_.ra_hop_limit_set;
    ++route_generation_;  // callers stamp it into their headers: they look again
  }
  if (slla) {
    neighbours6_.learn(src, *slla, now_ns, /*create=*/lifetime_s > 0, scratch6_,
                       /*override=*/true, NeighbourProof::kStale);
    flush_events6();
  }
  if (lifetime_s > 0) {
    if (router6_ != src) {
      forget_router6();  // replaced: the old one is no longer our next hop
      ++route_generation_;
    }
    router6_ = src;
    router6_expiry_ns_ = now_ns + uint64_t{lifetime_s} * 1'000'000'000ull;
    // A default router is our next hop (unless gateway6 is), not an entry a peer made: no NS
    // flood may evict it before off-link traffic first uses it.
    if (keeps_router6(src)) neighbours6_.keep(src);
  } else if (router6_ == src) {
    forget_router6();
  }
  RxResult r;
  r.verdict = RxVerdict::kConsumed;
  return r;
}

void NetStack::forget_router6() {
  // Its entry was kept as our next hop; now it is a peer's like any other. With gateway6 it
  // was never kept as the router (gateway6 is, whatever RAs say about it).
  if (!router6_) return;
  if (!config_.gateway6) neighbours6_.release(*router6_);
  router6_.reset();
  ++route_generation_;
}

void NetStack::learn_ra_options(std::span<const uint8_t> opts, uint64_t now_ns) {
  for (size_t at = 0; at + 2 <= opts.size() && opts[at + 1] != 0;) {
    const size_t len = size_t{opts[at + 1]} * 8;
    if (len > opts.size() - at) break;  // (walk_ndp_options has refused such RAs)
    const uint8_t* o = opts.data() + at;
    at += len;
    if (o[0] == kNdpOptMtu) {
      // Section 6.3.4: taken when it is at least the IPv6 minimum and at most the link's.
      const uint32_t mtu = len == 8 ? be32_at(o + 4) : 0;
      if (mtu < kIpv6MinMtu || (config_.link_mtu != 0 && mtu > config_.link_mtu)) {
        ++counters_.ra_options_ignored;
      } else {
        ra_mtu6_ = mtu;
      }
      continue;
    }
    if (o[0] != kNdpOptPrefixInfo) continue;
    // Section 6.3.4: with the on-link flag, the prefix is on-link for its valid lifetime;
    // link-local prefixes, wrong lengths and prefix lengths over 128 are ignored.
    if (len != 32 || o[2] > 128) {
      ++counters_.ra_options_ignored;
      continue;
    }
    if ((o[3] & kPrefixFlagOnLink) == 0) continue;  // says nothing about on-link
    const uint8_t plen = o[2];
    Ipv6Addr prefix;
    std::memcpy(prefix.bytes.data(), o + 16, 16);
    if (prefix.is_link_local() || prefix.is_multicast()) {  // (as Linux does)
      ++counters_.ra_options_ignored;
      continue;
    }
    const uint32_t valid_s = be32_at(o + 4);
    const uint64_t expiry =
        valid_s == 0xFFFFFFFFu ? UINT64_MAX : now_ns + uint64_t{valid_s} * 1'000'000'000ull;
    size_t i = 0;
    while (i < prefixes6_count_ &&
           !(prefixes6_[i].len == plen && ipv6_prefix_match(prefixes6_[i].prefix, prefix, plen))) {
      ++i;
    }
    if (i < prefixes6_count_) {
      if (valid_s == 0) {
        forget_prefix6(i);  // timed out at once
      } else {
        prefixes6_[i].expiry_ns = expiry;
      }
    } else if (valid_s != 0) {
      if (prefixes6_count_ == prefixes6_.size()) {
        ++counters_.ra_options_ignored;
        continue;
      }
      prefixes6_[prefixes6_count_++] = {prefix, plen, expiry};
      ++counters_.ra_prefixes;
      ++route_generation_;  // its addresses are on-link now, not behind the router
    }
  }
}

void NetStack::learn_ra_timers(uint32_t reachable_ms, uint32_t retrans_ms, uint64_t now_ns) {
  // Section 6.3.4: a nonzero Reachable Time is the new BaseReachableTime (the table draws its
  // ReachableTime from it at once and every 300 s) and a nonzero Retrans Timer the new
  // RetransTimer, as Linux's ndisc_router_discovery sets the interface's neighbour parameters.
  // Bounded: see kRaReachableMaxNs and friends.
  const auto take = [this](uint32_t ms, uint64_t lo, uint64_t hi, uint64_t now, auto set) {
    if (ms == 0) return;  // unspecified
    const uint64_t asked = uint64_t{ms} * 1'000'000;
    const uint64_t ns = std::clamp(asked, lo, hi);
    if (ns != asked) ++counters_.ra_timers_clamped;
    if (ns == now) return;
    set(ns);
    ++counters_.ra_timers_set;
  };
  const NeighbourConfig& n = neighbours6_.config();
  take(reachable_ms, ra_reachable_min_ns(), kRaReachableMaxNs, n.reachable_ns,
       [this, now_ns](uint64_t ns) { neighbours6_.set_reachable_ns(ns, now_ns); });
  take(retrans_ms, kRaRetransMinNs, kRaRetransMaxNs, n.retry_interval_ns,
       [this](uint64_t ns) { neighbours6_.set_retry_interval_ns(ns); });
}

void NetStack::forget_prefix6(size_t i) {
  prefixes6_[i] = prefixes6_[--prefixes6_count_];
  ++route_generation_;  // its addresses are off-link again
}

size_t NetStack::build_rs(std::span<uint8_t> out) const {
  if (!ipv6_on()) return 0;
  NdpRouterSolicitation m{};
  m.type = kIcmp6RouterSolicitation;
  const Ipv6Addr dst = Ipv6Addr::all_routers();
  return build_ndp_frame(out, dst.multicast_mac(), dst, std::as_bytes(std::span(&m, 1)),
                         kNdpOptSourceLinkAddr);
}

size_t NetStack::build_ndp(std::span<uint8_t> out, uint8_t type, uint32_t flags, MacAddr eth_dst,
                           const Ipv6Addr& ip_dst, const Ipv6Addr& target) const {
  NdpNeighborMessage m{};
  m.type = type;
  m.flags_reserved = Be32::from_host(flags);
  m.target = target.bytes;
  return build_ndp_frame(
      out, eth_dst, ip_dst, std::as_bytes(std::span(&m, 1)),
      type == kIcmp6NeighborSolicitation ? kNdpOptSourceLinkAddr : kNdpOptTargetLinkAddr);
}

size_t NetStack::build_ndp_frame(std::span<uint8_t> out, MacAddr eth_dst, const Ipv6Addr& ip_dst,
                                 std::span<const std::byte> message, uint8_t lla_type) const {
  const size_t icmp_len = message.size() + sizeof(NdpLinkAddrOption);
  const size_t l3 = l2_header_len();
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const size_t len = std::max(l4 + icmp_len, kEthMinFrameBytes);
  if (out.size() < len) return 0;
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len), uint8_t{0});
  write_l2_header(out, eth_dst, kEtherTypeIpv6);
  Ipv6Header ip{};
  ip.vtc_flow = Ipv6Header::make_vtc_flow(0, 0);
  ip.payload_len = Be16::from_host(static_cast<uint16_t>(icmp_len));
  ip.next_header = kIpProtoIcmp6;
  ip.hop_limit = kNdpHopLimit;
  ip.src = config_.addr6->bytes;
  ip.dst = ip_dst.bytes;
  store_header(out, l3, ip);
  std::memcpy(out.data() + l4, message.data(), message.size());  // its checksum field is 0
  NdpLinkAddrOption opt{};
  opt.type = lla_type;
  opt.len_units = 1;
  opt.mac = config_.mac;
  store_header(out, l4 + message.size(), opt);
  const uint32_t pseudo = ipv6_pseudo_header_sum(*config_.addr6, ip_dst,
                                                 static_cast<uint32_t>(icmp_len), kIpProtoIcmp6);
  const Be16 sum =
      Be16::from_host(checksum_finish(checksum_partial(out.subspan(l4, icmp_len), pseudo)));
  store_header(out, l4 + 2, sum);  // every ICMPv6 message has it at byte 2
  return len;
}

size_t NetStack::write_udp6_headers(std::span<uint8_t> out, MacAddr dst_mac, const Ipv6Addr& dst_ip,
                                    uint16_t src_port, uint16_t dst_port, uint8_t traffic_class,
                                    size_t payload_len) const {
  const size_t l3 = l2_header_len();
  const size_t header_len = l3 + kIpv6UdpHeaderBytes;
  if (!ipv6_on() || out.size() < header_len || payload_len > 0xFFFF - sizeof(UdpHeader)) return 0;
  write_l2_header(out, dst_mac, kEtherTypeIpv6);
  const auto udp_len = static_cast<uint16_t>(sizeof(UdpHeader) + payload_len);
  Ipv6Header ip{};
  ip.vtc_flow = Ipv6Header::make_vtc_flow(traffic_class, 0);
  ip.payload_len = Be16::from_host(udp_len);
  ip.next_header = kIpProtoUdp;
  ip.hop_limit = hop_limit6();
  ip.src = config_.addr6->bytes;
  ip.dst = dst_ip.bytes;
  store_header(out, l3, ip);
  UdpHeader udp;
  udp.src_port = Be16::from_host(src_port);
  udp.dst_port = Be16::from_host(dst_port);
  udp.length = Be16::from_host(udp_len);
  udp.checksum = Be16{};
  store_header(out, l3 + sizeof ip, udp);
  return header_len;
}

void NetStack::set_udp6_checksum(std::span<uint8_t> frame) const {
  const size_t l3 = l2_header_len();
  const size_t l4 = l3 + sizeof(Ipv6Header);
  const auto ip = load_header<Ipv6Header>(frame, l3);
  auto udp = load_header<UdpHeader>(frame, l4);
  if (!ip || !udp) return;
  const size_t udp_len = ip->payload_len.host();
  if (udp_len < sizeof(UdpHeader) || frame.size() < l4 + udp_len) return;
  udp->checksum = Be16{};
  store_header(frame, l4, *udp);
  const uint32_t pseudo = ipv6_pseudo_header_sum(Ipv6Addr{ip->src}, Ipv6Addr{ip->dst},
                                                 static_cast<uint32_t>(udp_len), kIpProtoUdp);
  uint16_t sum = checksum_finish(checksum_partial(frame.subspan(l4, udp_len), pseudo));
  if (sum == 0) sum = 0xFFFF;  // RFC 768: a computed zero is sent as all ones
  udp->checksum = Be16::from_host(sum);
  store_header(frame, l4, *udp);
}

}  // namespace conduit::net
