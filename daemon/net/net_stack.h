// The daemon's own small IPv4/IPv6 stack for one port: receive classifier,
// ARP and IPv6 Neighbor Discovery, routing to a next hop, ICMP and ICMPv6
// echo replies, and L2/L3/L4 header writing for the frames the engine sends.
//
// IPv6 (on when NetStackConfig::addr6 is set): RFC 4861 neighbour resolution,
// off-link destinations through gateway6 or else the default router and the
// on-link prefixes Router Advertisements announce; no SLAAC/DAD of our own,
// no extension headers.
//
// Pure: no I/O, no clock. The engine passes each received frame with the
// current time and acts on the returned RxResult; timer-driven and deferred
// work (ARP requests, Neighbor Solicitations and their retries, frames
// released or dropped after resolution) comes out as NetActions through
// take_actions(). The engine calls poll_timers() when next_deadline_ns() is
// reached.
//
// Thread role: owned by one engine thread; nothing here is thread-safe.
// Allocation: only in the constructor (and the action queue if the caller
// lets it grow without draining); the receive path never allocates.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "net/ethernet.h"
#include "net/ipv4.h"
#include "net/ipv4_addr.h"
#include "net/ipv6.h"
#include "net/ipv6_addr.h"
#include "net/mac_addr.h"
#include "net/neighbour_table.h"
#include "net/rx_drop.h"
#include "wire/frame.h"

namespace conduit::net {

struct StaticNeighbour {
  Ipv4Addr ip{};
  MacAddr mac{};
};

struct StaticNeighbour6 {
  Ipv6Addr ip{};
  MacAddr mac{};
};

struct NetStackConfig {
  MacAddr mac{};                    // the port's MAC
  Ipv4Addr addr{};                  // our address
  uint8_t prefix_len = 24;          // on-link prefix of addr
  std::optional<Ipv4Addr> gateway;  // off-link destinations go here; none = unreachable
  std::optional<uint16_t> vlan_id;  // 802.1Q VID (1..4094) on every frame, or untagged
  uint8_t vlan_pcp = 0;             // priority for frames we originate (0..7)
  std::vector<uint16_t> udp_ports;  // delivered to the caller (RoCE 4791, CM port)
  bool verify_udp_checksum = true;  // a non-zero UDP checksum is checked (0 = none)
  bool answer_ping = true;
  // IPv4 TTL and IPv6 hop limit of frames we originate (NDP: always 255); for IPv6, until a
  // Router Advertisement's Cur Hop Limit sets another (NetStack::hop_limit6()).
  uint8_t ttl = 64;
  std::vector<StaticNeighbour> static_neighbours;
  NeighbourConfig neighbour;  // both tables (IPv4 and IPv6) get this sizing

  // IPv6 (on-link only). Without addr6 every IPv6 frame is dropped as
  // RxDrop::kIpv6Off and the fields below must stay at their defaults.
  std::optional<Ipv6Addr> addr6;  // our address: unicast, not loopback or v4-mapped
  uint8_t prefix_len6 = 64;       // on-link prefix of addr6 (1..128); fe80::/10 is always on-link
  std::optional<Ipv6Addr> gateway6;  // off-link destinations go here (on-link, often fe80::..)
  std::vector<StaticNeighbour6> static_neighbours6;
  // The port's MTU (IP bytes), the most a Router Advertisement's MTU option may set
  // (link_mtu6()); 0: unknown, any advertised MTU from 1280 up is taken.
  uint32_t link_mtu = 0;
};

// A UDP datagram for one of our ports, as offsets into the received frame
// (the frame stays the caller's; nothing is copied).
struct UdpDatagram {
  MacAddr src_mac{};
  Ipv4Addr src_ip{};  // IPv4 only (zero for IPv6)
  Ipv4Addr dst_ip{};  // IPv4 only (zero for IPv6)
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t tos = 0;              // DSCP << 2 | ECN (IPv6: the traffic class); ECN 3 = CE
  uint16_t ip_offset = 0;       // IPv4 or IPv6 header (the RoCE ICRC covers it)
  uint16_t payload_offset = 0;  // first byte after the UDP header
  uint16_t payload_len = 0;     // UDP length - 8 (Ethernet padding excluded)
  bool ipv6 = false;            // true: the addresses are src_ip6/dst_ip6
  Ipv6Addr src_ip6{};           // IPv6 only
  Ipv6Addr dst_ip6{};           // IPv6 only (always our addr6)
};

enum class RxVerdict : uint8_t {
  kDeliverUdp,  // .udp describes a datagram for the caller
  kReply,       // send the first .reply_len bytes of the reply buffer (ARP/NA/ICMP reply)
  kConsumed,    // handled (an ARP reply or Neighbor Advertisement); check take_actions()
  kDrop,        // .drop says why; already counted
};

struct RxResult {
  RxVerdict verdict = RxVerdict::kDrop;
  RxDrop drop = RxDrop::kNone;
  size_t reply_len = 0;
  UdpDatagram udp;
};

// Deferred work for the engine, in the order it arose (both families in one
// queue).
struct NetAction {
  enum class Kind : uint8_t {
    // Send bytes[0, len): a complete frame (an ARP request, a Neighbor
    // Solicitation, or an unsolicited Neighbor Advertisement from announce()).
    kTransmit,
    kTransmitQueued,  // `frame` (given to resolve/resolve6) may go now: its L2 destination is
                      // dst_mac
    kDropQueued,      // `frame`'s next hop did not answer: free it
  };
  Kind kind = Kind::kTransmit;
  FrameHandle frame = kNoFrame;
  MacAddr dst_mac{};
  bool ipv6 = false;     // which table: next_hop (false) or next_hop6 (true) is meaningful
  Ipv4Addr next_hop{};   // IPv4: the next hop this action is about
  Ipv6Addr next_hop6{};  // IPv6: the next hop (announce(): our addr6)
  uint16_t len = 0;
  // Largest: a Neighbor Solicitation with a VLAN tag, 18 + 40 + 32 = 90 bytes.
  std::array<uint8_t, 128> bytes{};
};

struct NetCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_udp_delivered = 0;
  uint64_t rx_arp_requests = 0;  // addressed to us
  uint64_t rx_arp_replies = 0;
  uint64_t rx_icmp_echo_requests = 0;
  uint64_t tx_arp_replies = 0;
  uint64_t tx_icmp_echo_replies = 0;
  uint64_t tx_arp_requests = 0;  // handed out through take_actions()
  uint64_t no_route = 0;         // next_hop()/next_hop6() found nothing, or resolve()/resolve6()
                                 // got an off-link hop (or IPv6 is off)
  // IPv6. NDP counters count messages that passed RFC 4861 validation.
  uint64_t rx_ns = 0;                   // Neighbor Solicitations for our addr6 (incl. DAD probes)
  uint64_t rx_na = 0;                   // Neighbor Advertisements (any target)
  uint64_t tx_na = 0;                   // NAs sent: replies to NS (kReply) + announce()
  uint64_t tx_ns = 0;                   // NSs handed out through take_actions() (incl. refreshes)
  uint64_t rx_icmp6_echo_requests = 0;  // ICMPv6 echo requests to addr6
  uint64_t tx_icmp6_echo_replies = 0;
  uint64_t rx_udp6_delivered = 0;  // IPv6 share of rx_udp_delivered
  uint64_t rx_ra = 0;  // Router Advertisements (valid; their router used only without gateway6)
  uint64_t ra_prefixes = 0;         // on-link prefixes learned from RAs (created, not refreshed)
  uint64_t ra_options_ignored = 0;  // Prefix Information / MTU options not taken (RFC 4861 6.3.4)
  uint64_t tx_rs = 0;               // Router Solicitations sent (announce(), without gateway6)
  uint64_t ra_timers_set = 0;       // RA Reachable Time / Retrans Timer values that changed ours
  uint64_t ra_timers_clamped = 0;   // ... outside their bounds (NetStack::kRa*), taken at the bound
  uint64_t ra_hop_limit_set = 0;    // RA Cur Hop Limit values that changed hop_limit6()
  // Priority-tagged frames (802.1Q, VID 0) taken as untagged on a port without vlan_id
  // (802.1Q: they belong to the port's untagged VLAN); a VLAN port drops them (kVlanMismatch).
  uint64_t rx_priority_tagged = 0;
  std::array<uint64_t, kRxDropCount> rx_drops{};

  uint64_t drops(RxDrop reason) const { return rx_drops[static_cast<size_t>(reason)]; }
  uint64_t total_drops() const;
};

class NetStack {
 public:
  // Throws std::invalid_argument naming the bad field (setup time only).
  explicit NetStack(const NetStackConfig& config);

  // Classifies one received frame. `reply` is scratch space for an ARP, NA
  // or ICMP(v6) reply: give a buffer of at least max(frame size,
  // kMinReplyBytes) (an echo reply is as long as its request; an NA may be
  // longer than a short NS). Never throws, never allocates.
  RxResult on_rx_frame(std::span<const uint8_t> frame, uint64_t now_ns, std::span<uint8_t> reply);
  static constexpr size_t kMinReplyBytes = 128;

  // Next hop for a destination: itself when on-link, else the gateway;
  // nullopt (counted in no_route) when off-link without a gateway, or dst is
  // ours/zero/broadcast/multicast.
  std::optional<Ipv4Addr> next_hop(Ipv4Addr dst);

  // The MAC of next_hop, or queue `frame` until it is known (see
  // NeighbourTable::resolve for the exact contract: kResolved = send now to
  // .mac; kQueued = held, returned later as an action; kDropped = free it).
  // next_hop must be an on-link peer (what next_hop() returns); anything
  // else is kDropped and counted in no_route.
  NeighbourTable::ResolveResult resolve(Ipv4Addr next_hop, uint64_t now_ns,
                                        FrameHandle frame = kNoFrame);

  // IPv6 next hop: dst itself when on-link (inside addr6/prefix_len6, or
  // any fe80::/10 address), else gateway6, else the default router learned
  // from Router Advertisements; nullopt (counted in no_route) when off-link
  // without either, when IPv6 is off, or dst is ours, ::, ::1, multicast or
  // v4-mapped.
  std::optional<Ipv6Addr> next_hop6(const Ipv6Addr& dst);

  // resolve() for IPv6: same contract. Requests go out as Neighbor
  // Solicitations (kTransmit actions): to the solicited-node group of
  // next_hop, or unicast to the cached MAC when refreshing an entry.
  // next_hop must be what next_hop6() returns; anything else (or IPv6 off)
  // is kDropped and counted in no_route.
  NeighbourTable6::ResolveResult resolve6(const Ipv6Addr& next_hop, uint64_t now_ns,
                                          FrameHandle frame = kNoFrame);

  // Queues a gratuitous ARP for our address and, when IPv6 is on, an
  // unsolicited Neighbor Advertisement (Override set) for addr6 to ff02::1
  // and, without gateway6, a Router Solicitation to ff02::2 (call once the
  // port is up).
  void announce();

  void poll_timers(uint64_t now_ns);
  // Earliest time poll_timers() has work (may be early, never late); UINT64_MAX if none.
  uint64_t next_deadline_ns() const {
    return std::min(neighbours_.next_deadline_ns(), neighbours6_.next_deadline_ns());
  }

  // Moves up to out.size() pending actions into out; returns how many.
  size_t take_actions(std::span<NetAction> out);
  size_t pending_actions() const { return events_.size() - events_head_; }

  // Header writing for frames the engine originates. l2_header_len() is 14,
  // or 18 with a VLAN tag. write_udp_headers() writes Ethernet(+VLAN) +
  // IPv4 (ID 0, DF, our TTL, checksum) + UDP (checksum 0) for a payload of
  // payload_len bytes and returns the header length, or 0 when `out` is too
  // small or the datagram would exceed 65535 bytes.
  size_t l2_header_len() const { return config_.vlan_id ? 18 : 14; }
  size_t write_l2_header(std::span<uint8_t> out, MacAddr dst, uint16_t ether_type) const;
  size_t write_udp_headers(std::span<uint8_t> out, MacAddr dst_mac, Ipv4Addr dst_ip,
                           uint16_t src_port, uint16_t dst_port, uint8_t tos,
                           size_t payload_len) const;
  static constexpr size_t kIpv4UdpHeaderBytes = 20 + 8;
  // write_udp_headers() for IPv6: Ethernet(+VLAN) + IPv6 (our traffic
  // class, flow label 0, hop_limit6(), source addr6) + UDP (checksum 0:
  // RFC 6935/6936, for RoCE datagrams, whose ICRC covers them; others get
  // theirs from set_udp6_checksum once the payload is in). Returns the header
  // length, or 0 when IPv6 is off, `out` is too small or the payload exceeds
  // 65535 - 8 bytes.
  size_t write_udp6_headers(std::span<uint8_t> out, MacAddr dst_mac, const Ipv6Addr& dst_ip,
                            uint16_t src_port, uint16_t dst_port, uint8_t traffic_class,
                            size_t payload_len) const;
  // Fills in the UDP checksum of a datagram write_udp6_headers() began in
  // `frame` (from the Ethernet header on), its payload written.
  void set_udp6_checksum(std::span<uint8_t> frame) const;
  // The IPv6 and UDP headers of a RoCEv2 datagram (no extension headers).
  static constexpr size_t kIpv6UdpHeaderBytes = 40 + 8;

  // ---- RoCE receive fast path (the engine, per connected QP) ----
  //
  // The expectation (wire::RxExpect) for more frames like `frame`: a RoCE
  // frame that on_rx_frame() delivered as `udp` and the caller then accepted
  // (wire::parse_roce with `opt`, from its QP's peer). Besides what RxExpect
  // compares (addresses, IPv4 ID/flags/TTL, UDP port, P_Key, dest QP as in
  // `frame`), it requires what on_rx_frame() checks and parse_frame() does
  // not: our VLAN ID (without one: untagged, or VID 0 when `frame` is a peer's
  // priority-tagged frame) and a zero UDP checksum (on_rx_expected() adds our
  // MAC). The source MAC is not compared: on_rx_frame() ignores it too.
  // Not usable (every frame then takes on_rx_frame) when `frame` is not
  // one on_rx_frame() delivers to an open port opt.udp_dst_port from a peer
  // address, or, for IPv4, its flags are not exactly DF or opt does not
  // verify the header checksum. Depends only on `frame`, `opt` and this
  // stack's fixed config (MAC, addresses, VLAN, ports): remake it when opt
  // changes. IPv6 datagrams get one as IPv4 ones do: RoCEv2 senders leave
  // the UDP checksum 0 over IPv6 too (conduit and rxe do; RFC 6935), and a
  // peer that fills it in keeps the full path, which verifies it.
  wire::RxExpect make_roce_expect(std::span<const uint8_t> frame, const UdpDatagram& udp,
                                  const wire::ParseOptions& opt) const;

  // on_rx_frame() and wire::parse_roce(.., exp.opt, ..) in one step, for
  // frames that match `exp` (from make_roce_expect): true when it matched.
  // The frame is then one on_rx_frame() delivers, and it is counted as
  // on_rx_frame() counts it (rx_frames, rx_udp_delivered and for IPv6
  // rx_udp6_delivered); `udp` is what
  // on_rx_frame() returns for it, `why` parse_roce's verdict and `view`
  // (meaningful when kNone) its view. False: nothing counted, the outputs
  // untouched; the caller passes the frame to on_rx_frame(). Never
  // allocates.
  bool on_rx_expected(std::span<const uint8_t> frame, const wire::RxExpect& exp, UdpDatagram& udp,
                      wire::RoceView& view, wire::DropReason& why);

  // Moves whenever something changed that may move a peer's next hop or that hop's MAC: a
  // neighbour entry's MAC changed, was put in doubt (an NA without Override naming another
  // MAC) or a resolved entry went (see NeighbourTable's generation), the RA's default router was
  // set, replaced or forgotten, or an RA's on-link prefix appeared or went; and when an RA
  // changed hop_limit6(). A refresh that confirms
  // what was known (the same MAC, the same router or prefix with a new lifetime) does not move it.
  // A caller that caches next_hop()/resolve() results (the engine, per QP) compares it per transmit
  // burst and looks up again only when it moved. Only grows.
  uint64_t generation() const {
    // Each part only grows, so the sum moves whenever one of them does.
    return route_generation_ + neighbours_.generation() + neighbours6_.generation();
  }

  // Static neighbours at run time (policy reload); see NeighbourTable.
  bool add_static_neighbour(Ipv4Addr ip, MacAddr mac);
  bool remove_neighbour(Ipv4Addr ip);
  // The same for IPv6 (false when IPv6 is off).
  bool add_static_neighbour6(const Ipv6Addr& ip, MacAddr mac);
  bool remove_neighbour6(const Ipv6Addr& ip);

  const NetStackConfig& config() const { return config_; }
  const NetCounters& counters() const { return counters_; }
  const NeighbourTable& neighbours() const { return neighbours_; }
  const NeighbourTable6& neighbours6() const { return neighbours6_; }
  // The default router a Router Advertisement named (its link-local
  // address), until its lifetime runs out (poll_timers) or it withdraws;
  // nullopt without one. gateway6, when set, is used instead.
  const std::optional<Ipv6Addr>& learned_router6() const { return router6_; }
  // On-link prefixes from Router Advertisements (Prefix Information options with the L flag,
  // RFC 4861 section 6.3.4), each until its valid lifetime runs out (poll_timers) or an RA
  // gives it lifetime 0. Destinations inside one are on-link, as inside addr6/prefix_len6.
  struct LearnedPrefix6 {
    Ipv6Addr prefix{};
    uint8_t len = 0;
    uint64_t expiry_ns = 0;  // UINT64_MAX: an infinite lifetime
  };
  static constexpr size_t kMaxLearnedPrefixes6 = 8;  // more are ignored (counted)
  std::span<const LearnedPrefix6> learned_prefixes6() const {
    return {prefixes6_.data(), prefixes6_count_};
  }
  // The hop limit of the IPv6 frames we originate (RoCE, the CM's datagrams, echo replies;
  // NDP's is always 255): config.ttl until a Router Advertisement's nonzero Cur Hop Limit sets
  // the host's default (RFC 4861 section 6.3.4; Linux's ndisc_router_discovery sets the
  // interface's hop_limit). A change moves generation(), so callers that stamp it into their
  // own headers (the engine's per-QP templates) look again.
  uint8_t hop_limit6() const { return ra_hop_limit6_ != 0 ? ra_hop_limit6_ : config_.ttl; }
  // The link MTU an RA's MTU option set (1280..config.link_mtu); 0 until one does. IPv6
  // frames and path MTUs must fit it.
  uint32_t link_mtu6() const { return ra_mtu6_; }

  // An RA's nonzero Reachable Time and Retrans Timer become the IPv6 table's reachable_ns
  // (the base its reachable time is drawn from: neighbours6().reachable_time_ns()) and
  // retry_interval_ns (neighbours6().config()),
  // bounded: the reachable time to [ra_reachable_min_ns(), kRaReachableMaxNs] and the retrans
  // timer to [kRaRetransMinNs, kRaRetransMaxNs] (counted in ra_timers_clamped).
  static constexpr uint64_t kRaReachableMaxNs = 3'600'000'000'000;  // RFC 4861 MAX_REACHABLE_TIME
  static constexpr uint64_t kRaRetransMinNs = 100'000'000;  // Linux's floor for both (HZ/10)
  // A next hop that does not answer holds its queued frames max_requests retrans timers.
  static constexpr uint64_t kRaRetransMaxNs = 10'000'000'000;
  // At least 100 ms (Linux's floor) and twice the refresh window: the shortest lifetime drawn
  // (half the base) is then at least the window, or every use of a fresh entry would probe it.
  uint64_t ra_reachable_min_ns() const {
    return std::max<uint64_t>(kRaRetransMinNs, 2 * config_.neighbour.refresh_window_ns);
  }

 private:
  // One queue for both tables' events (and announce()), so take_actions()
  // hands them out in the order they arose.
  struct PendingEvent {
    enum class Kind : uint8_t {
      kSendRequest,
      kTransmitQueued,
      kDropQueued,
      kAnnounce6,
      kSolicitRouter6
    };
    Kind kind = Kind::kSendRequest;
    bool ipv6 = false;
    Ipv4Addr ip{};
    Ipv6Addr ip6{};
    MacAddr mac{};
    FrameHandle frame = kNoFrame;
  };

  RxResult drop(RxDrop reason);
  // Each step gets the headers already copied and checked by the one before.
  RxResult on_arp(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                  uint64_t now_ns, std::span<uint8_t> reply);
  RxResult on_ipv4(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                   std::span<uint8_t> reply);
  RxResult on_icmp(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv4Header& ip,
                   size_t l3, std::span<uint8_t> reply);
  RxResult on_udp(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv4Header& ip,
                  size_t l3);
  size_t build_arp(std::span<uint8_t> out, uint16_t op, MacAddr eth_dst, MacAddr target_mac,
                   Ipv4Addr target_ip) const;
  bool on_link(Ipv4Addr ip) const;
  // Unicast, not ours, not our subnet's broadcast address.
  bool is_peer_address(Ipv4Addr ip) const;
  bool port_open(uint16_t port) const;

  // IPv6 (addr6 set). l3 is the IPv6 header's offset.
  RxResult on_ipv6(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                   uint64_t now_ns, std::span<uint8_t> reply);
  // The UDP checks and fields both families share (pseudo_sum(udp_len): the
  // family's pseudo-header sum, for a non-zero checksum).
  template <class PseudoSum>
  RxResult deliver_udp(std::span<const uint8_t> frame, const EthernetHeader& eth, size_t l3,
                       size_t l4, uint8_t tos, PseudoSum pseudo_sum);
  RxResult on_udp6(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv6Header& ip,
                   size_t l3);
  RxResult on_icmp6(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv6Header& ip,
                    size_t l3, uint64_t now_ns, std::span<uint8_t> reply);
  RxResult on_echo6(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv6Header& ip,
                    size_t l3, std::span<uint8_t> reply);
  RxResult on_ns(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv6Header& ip,
                 size_t l3, uint64_t now_ns, std::span<uint8_t> reply);
  RxResult on_ra(std::span<const uint8_t> frame, const EthernetHeader& eth, const Ipv6Header& ip,
                 size_t l3, uint64_t now_ns);
  size_t build_rs(std::span<uint8_t> out) const;
  // An NDP frame (RS, NS, NA) to ip_dst: IPv6 header (hop limit 255), `message` (its
  // checksum field 0), our MAC in a link-layer address option of lla_type, the ICMPv6
  // checksum. The frame's length, or 0 when `out` is too small.
  size_t build_ndp_frame(std::span<uint8_t> out, MacAddr eth_dst, const Ipv6Addr& ip_dst,
                         std::span<const std::byte> message, uint8_t lla_type) const;
  RxResult on_na(std::span<const uint8_t> frame, const Ipv6Header& ip, size_t l3, uint64_t now_ns);
  // Writes Ethernet(+VLAN) + IPv6 + an NS or NA with one link-layer address
  // option (ours); returns the frame length or 0 when `out` is too small.
  size_t build_ndp(std::span<uint8_t> out, uint8_t type, uint32_t flags, MacAddr eth_dst,
                   const Ipv6Addr& ip_dst, const Ipv6Addr& target) const;
  bool on_link6(const Ipv6Addr& ip) const;
  // Unicast (Ipv6Addr::is_unicast) and not ours.
  bool is_peer_address6(const Ipv6Addr& ip) const;
  bool ipv6_on() const { return config_.addr6.has_value(); }

  void flush_events4();
  void flush_events6();

  NetStackConfig config_;
  uint32_t prefix_mask_;
  std::array<uint64_t, 1024> udp_port_bitmap_{};  // 65536 bits
  NeighbourTable neighbours_;
  NeighbourTable6 neighbours6_;
  // Filled by one table call, then moved to events_ (capacity kept).
  std::vector<NeighbourEvent> scratch4_;
  std::vector<NeighbourEvent6> scratch6_;
  std::vector<PendingEvent> events_;
  size_t events_head_ = 0;
  Ipv6Addr solicited_ip_{};          // ff02::1:ff + low 24 bits of addr6 (IPv6 on only)
  std::optional<Ipv6Addr> router6_;  // learned from Router Advertisements
  uint64_t router6_expiry_ns_ = 0;
  std::array<LearnedPrefix6, kMaxLearnedPrefixes6> prefixes6_{};
  size_t prefixes6_count_ = 0;
  uint32_t ra_mtu6_ = 0;
  uint8_t ra_hop_limit6_ = 0;      // an RA's Cur Hop Limit (0: none yet; hop_limit6())
  uint64_t route_generation_ = 0;  // router6_ and prefixes6_ changes (generation())
  // The Prefix Information and MTU options of a valid RA (whose options walk_ndp_options
  // checked).
  void learn_ra_options(std::span<const uint8_t> opts, uint64_t now_ns);
  // The RA's Reachable Time and Retrans Timer fields (0: unspecified).
  void learn_ra_timers(uint32_t reachable_ms, uint32_t retrans_ms, uint64_t now_ns);
  void forget_prefix6(size_t i);
  // Clears router6_ (withdrawn, replaced or timed out), moving the generation, and, when it was
  // kept as our next hop (no gateway6), release()s its neighbour entry.
  void forget_router6();
  // ip is a router whose neighbour entry must outlast NS floods: gateway6, or without it the
  // router an RA named (next_hop6's off-link next hop).
  bool keeps_router6(const Ipv6Addr& ip) const {
    return config_.gateway6 ? ip == *config_.gateway6 : router6_ == ip;
  }
  MacAddr solicited_mac_{};  // its 33:33:ff.. group MAC
  NetCounters counters_;
};

}  // namespace conduit::net
