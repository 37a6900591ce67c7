// The daemon's own small IPv4 stack for one port: receive classifier, ARP,
// routing to a next hop, ICMP echo replies, and L2/L3/L4 header writing for
// the frames the engine sends.
//
// Pure: no I/O, no clock. The engine passes each received frame with the
// current time and acts on the returned RxResult; timer-driven and deferred
// work (ARP requests and retries, frames released or dropped after
// resolution) comes out as NetActions through take_actions(). The engine
// calls poll_timers() when next_deadline_ns() is reached.
//
// Thread role: owned by one engine thread; nothing here is thread-safe.
// Allocation: only in the constructor (and the action queue if the caller
// lets it grow without draining); the receive path never allocates.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "net/ethernet.h"
#include "net/ipv4.h"
#include "net/ipv4_addr.h"
#include "net/mac_addr.h"
#include "net/neighbour_table.h"
#include "net/rx_drop.h"
#include "wire/frame.h"

namespace conduit::net {

struct StaticNeighbour {
  Ipv4Addr ip{};
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
  uint8_t ttl = 64;
  std::vector<StaticNeighbour> static_neighbours;
  NeighbourConfig neighbour;
};

// A UDP datagram for one of our ports, as offsets into the received frame
// (the frame stays the caller's; nothing is copied).
struct UdpDatagram {
  MacAddr src_mac{};
  Ipv4Addr src_ip{};
  Ipv4Addr dst_ip{};
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t tos = 0;              // DSCP << 2 | ECN; ECN 3 = CE
  uint16_t ip_offset = 0;       // IPv4 header (the RoCE ICRC covers it)
  uint16_t payload_offset = 0;  // first byte after the UDP header
  uint16_t payload_len = 0;     // UDP length - 8 (Ethernet padding excluded)
};

enum class RxVerdict : uint8_t {
  kDeliverUdp,  // .udp describes a datagram for the caller
  kReply,       // send the first .reply_len bytes of the reply buffer (ARP or ICMP reply)
  kConsumed,    // handled (an ARP reply); check take_actions()
  kDrop,        // .drop says why; already counted
};

struct RxResult {
  RxVerdict verdict = RxVerdict::kDrop;
  RxDrop drop = RxDrop::kNone;
  size_t reply_len = 0;
  UdpDatagram udp;
};

// Deferred work for the engine, in the order it arose.
struct NetAction {
  enum class Kind : uint8_t {
    kTransmit,        // send bytes[0, len): a complete frame (an ARP request)
    kTransmitQueued,  // `frame` (given to resolve()) may go now: its L2 destination is dst_mac
    kDropQueued,      // `frame`'s next hop did not answer: free it
  };
  Kind kind = Kind::kTransmit;
  FrameHandle frame = kNoFrame;
  MacAddr dst_mac{};
  Ipv4Addr next_hop{};
  uint8_t len = 0;
  std::array<uint8_t, 64> bytes{};
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
  uint64_t no_route = 0;         // next_hop() found nothing, or resolve() got an off-link hop
  std::array<uint64_t, kRxDropCount> rx_drops{};

  uint64_t drops(RxDrop reason) const { return rx_drops[static_cast<size_t>(reason)]; }
  uint64_t total_drops() const;
};

class NetStack {
 public:
  // Throws std::invalid_argument naming the bad field (setup time only).
  explicit NetStack(const NetStackConfig& config);

  // Classifies one received frame. `reply` is scratch space for an ARP or
  // ICMP reply (an echo reply is as long as its request: give a buffer of
  // at least the frame's size). Never throws, never allocates.
  RxResult on_rx_frame(std::span<const uint8_t> frame, uint64_t now_ns, std::span<uint8_t> reply);

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

  // Queues a gratuitous ARP for our address (call once the port is up).
  void announce();

  void poll_timers(uint64_t now_ns);
  // Earliest time poll_timers() has work (may be early, never late); UINT64_MAX if none.
  uint64_t next_deadline_ns() const { return neighbours_.next_deadline_ns(); }

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

  // ---- RoCE receive fast path (the engine, per connected QP) ----
  //
  // The expectation (wire::RxExpect) for more frames like `frame`: a RoCE
  // frame that on_rx_frame() delivered as `udp` and the caller then accepted
  // (wire::parse_roce with `opt`, from its QP's peer). Besides what RxExpect
  // compares (addresses, IPv4 ID/flags/TTL, UDP port, P_Key, dest QP as in
  // `frame`), it requires what on_rx_frame() checks and parse_frame() does
  // not: our VLAN ID and a zero UDP checksum (on_rx_expected() adds our
  // MAC). The source MAC is not compared: on_rx_frame() ignores it too.
  // Not usable (every frame then takes on_rx_frame) when `frame` is not
  // one on_rx_frame() delivers to an open port opt.udp_dst_port from a peer
  // address, its IPv4 flags are not exactly DF, or opt does not verify the
  // IPv4 checksum. Depends only on `frame`, `opt` and this stack's fixed
  // config (MAC, address, VLAN, ports): remake it when opt changes.
  wire::RxExpect make_roce_expect(std::span<const uint8_t> frame, const UdpDatagram& udp,
                                  const wire::ParseOptions& opt) const;

  // on_rx_frame() and wire::parse_roce(.., exp.opt, ..) in one step, for
  // frames that match `exp` (from make_roce_expect): true when it matched.
  // The frame is then one on_rx_frame() delivers, and it is counted as
  // on_rx_frame() counts it (rx_frames, rx_udp_delivered); `udp` is what
  // on_rx_frame() returns for it, `why` parse_roce's verdict and `view`
  // (meaningful when kNone) its view. False: nothing counted, the outputs
  // untouched; the caller passes the frame to on_rx_frame(). Never
  // allocates.
  bool on_rx_expected(std::span<const uint8_t> frame, const wire::RxExpect& exp, UdpDatagram& udp,
                      wire::RoceView& view, wire::DropReason& why);

  // Static neighbours at run time (policy reload); see NeighbourTable.
  bool add_static_neighbour(Ipv4Addr ip, MacAddr mac);
  bool remove_neighbour(Ipv4Addr ip);

  const NetStackConfig& config() const { return config_; }
  const NetCounters& counters() const { return counters_; }
  const NeighbourTable& neighbours() const { return neighbours_; }

 private:
  RxResult drop(RxDrop reason);
  // Each step gets the headers already copied and checked by the one before.
  RxResult on_arp(std::span<const uint8_t> frame, size_t l3, uint64_t now_ns,
                  std::span<uint8_t> reply);
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

  NetStackConfig config_;
  uint32_t prefix_mask_;
  std::array<uint64_t, 1024> udp_port_bitmap_{};  // 65536 bits
  NeighbourTable neighbours_;
  std::vector<NeighbourEvent> events_;
  size_t events_head_ = 0;
  NetCounters counters_;
};

}  // namespace conduit::net
