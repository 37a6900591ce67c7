// The daemon's typed policy: what conduitd.yaml says, after validation.
//
// Every quantity carries its unit in its name (_bps, _ns, _bytes). A
// default-constructed Policy is the policy of a file that sets nothing except
// the two required keys (port.device, port.address); see config/POLICY.md for
// every key, its default and its range. Plain values: copy freely, no
// ownership, no thread affinity (the daemon keeps the running policy behind a
// shared_ptr<const Policy> and swaps it on a successful reload).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::policy {

// An IPv4 address in host byte order (10.0.0.1 == 0x0A000001).
struct Ipv4Address {
  uint32_t value = 0;
  bool operator==(const Ipv4Address&) const = default;
};

// An IPv6 address: its 16 bytes as on the wire.
struct Ipv6Address {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Ipv6Address&) const = default;
};

struct MacAddress {
  std::array<uint8_t, 6> bytes{};
  bool operator==(const MacAddress&) const = default;
};

struct SocketAddress {
  Ipv4Address ip;
  uint16_t port = 0;
  bool operator==(const SocketAddress&) const = default;
};

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// spin: the engine lcore polls forever. adaptive: after a run of empty polls
// it backs off and sleeps until a client doorbell or a short timer.
enum class IdleMode { kSpin, kAdaptive };

// daemon.metrics_max_qps: its default and largest value.
inline constexpr uint32_t kDefaultMetricsMaxQps = 1024;
inline constexpr uint32_t kMaxMetricsMaxQps = 1'000'000;

struct DaemonSection {
  std::string control_socket = "/run/conduit/conduitd.sock";
  std::string socket_group;            // group owning the socket; empty = daemon's own group
  std::vector<uint32_t> lcores = {1};  // engine lcores, one engine each; unique, non-empty
  LogLevel log_level = LogLevel::kInfo;
  std::optional<SocketAddress> metrics;  // the Prometheus endpoint; nullopt = off (the default)
  uint32_t metrics_max_qps = kDefaultMetricsMaxQps;  // QPs with per-QP series on that page
  IdleMode idle_mode = IdleMode::kAdaptive;
  bool operator==(const DaemonSection&) const = default;
};

enum class DeviceKind { kPci, kVdev };

struct Neighbour {
  Ipv4Address ip;
  MacAddress mac;
  bool operator==(const Neighbour&) const = default;
};
struct Neighbour6 {
  Ipv6Address ip;
  MacAddress mac;
  bool operator==(const Neighbour6&) const = default;
};

// The most static ARP entries port.neighbours takes (the engine's neighbour table
// holds them on top of its room for learned entries).
inline constexpr size_t kMaxStaticNeighbours = 16384;

struct PortSection {
  std::string device;  // "0000:3b:00.0" or "net_memif0,role=server,..."; required
  DeviceKind device_kind = DeviceKind::kPci;
  std::vector<std::string> eal_args;   // extra EAL arguments, passed through in order
  Ipv4Address address;                 // required, with prefix_len
  uint8_t prefix_len = 0;              // 1..32
  std::optional<Ipv4Address> gateway;  // inside address/prefix_len when set
  // RoCEv2 over IPv6 (optional): the port's IPv6 address and on-link prefix,
  // and the router for off-link IPv6 peers (on-link itself, or link-local).
  std::optional<Ipv6Address> address6;
  uint8_t prefix_len6 = 64;  // 1..128
  std::optional<Ipv6Address> gateway6;
  std::vector<Neighbour> neighbours;    // static ARP entries, file order, unique ip, <= 16384
  std::vector<Neighbour6> neighbours6;  // the same mapping's IPv6 entries (static NDP)
  uint32_t mtu_bytes = 1500;            // IP MTU, 576..9216
  // 802.1Q VLAN ID (1..4094) on every frame sent and required on every frame taken,
  // with each traffic class's priority as the tag's PCP. None: untagged frames.
  std::optional<uint16_t> vlan;
  // Without `vlan`: RoCE frames (data, ACKs, READ responses, CNPs) carry an 802.1Q tag of
  // VID 0 with their priority as the PCP (priority tags, for switches that trust PCP on
  // untagged ports); everything else goes untagged. Refused together with `vlan`.
  bool priority_tagging = false;
  // The rate a QP's congestion control starts at and never exceeds (DCQCN's line rate,
  // `none`'s rate). Unset: the speed the port reports (10 Gbit/s when it reports none).
  std::optional<uint64_t> line_rate_bps;  // 1 Mbit/s..1 Tbit/s when set
  uint16_t roce_udp_port = 4791;
  uint16_t cm_udp_port = 4792;     // native connection manager; != roce_udp_port
  uint32_t rx_descriptors = 1024;  // RX ring of the port's one queue (the driver may round it)
  uint32_t tx_descriptors = 1024;  // TX ring
  uint32_t mbufs = 8191;           // packet-buffer pool; > rx_descriptors + tx_descriptors
  bool operator==(const PortSection&) const = default;
};

// The ECN field the sender puts on data packets. CE is the switch's to set.
enum class EcnCodepoint { kNotEct = 0, kEct1 = 1, kEct0 = 2 };

enum class CcAlgorithm { kDcqcn, kFixed, kNone };
enum class DcqcnPreset { kMlx5, kPaper };

// The DCQCN reaction-point knobs, named as the mlx5 firmware names them.
// Integer knobs keep mlx5's encoding (documented per field); times, rates and
// sizes are converted to ns, bit/s and bytes.
struct DcqcnParams {
  uint64_t rpg_time_reset_ns = 0;              // rate-increase timer period T
  uint64_t rpg_byte_reset_bytes = 0;           // byte-counter period B; 0 disables it
  uint32_t rpg_threshold = 0;                  // F: increase events before AI/HAI, 1..31
  uint64_t rpg_ai_rate_bps = 0;                // additive increase step R_AI
  uint64_t rpg_hai_rate_bps = 0;               // hyper increase step R_HAI
  uint32_t rpg_gd = 0;                         // cut = RC * alpha / 2^(gd-10); 11 gives alpha/2
  uint32_t rpg_min_dec_fac_percent = 0;        // one cut keeps at least this % of RC, 1..100
  uint64_t rpg_min_rate_bps = 0;               // rate floor
  uint64_t rpg_max_rate_bps = 0;               // rate ceiling; 0 = line rate
  uint64_t rate_to_set_on_first_cnp_bps = 0;   // 0 = the first CNP cuts normally
  uint64_t rate_reduce_monitor_period_ns = 0;  // at most one cut per period; 0 = per CNP
  uint32_t initial_alpha_value = 0;            // alpha after the first CNP, in 1/1024, 0..1023
  uint32_t dce_tcp_g = 0;                      // alpha <- (G/1024) alpha [+ (1024-G)/1024], 0..1023
  uint64_t dce_tcp_rtt_ns = 0;                 // alpha update period K
  bool clamp_tgt_rate = false;                 // RT <- RC on every CNP
  bool clamp_tgt_rate_after_time_inc = false;  // also after a timer-driven increase
  bool operator==(const DcqcnParams&) const = default;
};

// The knob values of a named starting point (config/POLICY.md lists them).
DcqcnParams dcqcn_preset(DcqcnPreset preset);

struct CongestionControl {
  CcAlgorithm algorithm = CcAlgorithm::kDcqcn;
  DcqcnPreset preset = DcqcnPreset::kMlx5;  // what dcqcn started from (shown by the dump)
  DcqcnParams dcqcn = dcqcn_preset(DcqcnPreset::kMlx5);  // meaningful for kDcqcn
  uint64_t fixed_rate_bps = 0;                           // meaningful for kFixed, > 0
  bool operator==(const CongestionControl&) const = default;
};

struct TrafficClass {
  std::string name;         // [A-Za-z0-9_-], 1..32 chars, unique
  bool is_default = false;  // exactly one class is the default
  uint8_t dscp = 26;        // 0..63, unique, != cnp.dscp
  EcnCodepoint ecn = EcnCodepoint::kEct0;
  uint8_t priority = 3;                  // 802.1p / PFC priority 0..7
  bool strict = false;                   // strict priority (served before weighted classes)
  uint32_t weight = 1;                   // DWRR weight 1..1000 when !strict
  std::optional<uint64_t> max_rate_bps;  // class shaper; nullopt = none
  CongestionControl congestion_control;
  bool operator==(const TrafficClass&) const = default;
};

// The traffic class a file without `traffic_classes` gets: "default",
// DSCP 26 ECT(0), priority 3, weight 1, DCQCN with the mlx5 preset.
TrafficClass builtin_default_class();

struct CnpSection {
  uint8_t dscp = 48;
  EcnCodepoint ecn = EcnCodepoint::kEct0;  // a ConnectX-4 Lx CNP carries ToS 0xC2
  uint8_t priority = 6;
  uint64_t min_time_between_cnps_ns = 2'000;  // NP: per-flow CNP spacing
  bool operator==(const CnpSection&) const = default;
};

enum class LossRecovery { kGoBackN, kSelective };

// IP MTU a packet needs beyond its PMTU payload: IPv4 20 + UDP 8 + BTH 12 +
// RETH 16 + ImmDt 4 + ICRC 4, the largest header stack in front of a full
// payload (RDMA WRITE only with immediate). port.mtu >= transport.pmtu + this.
inline constexpr uint32_t kRoceOverheadBytes = 64;
// The same over IPv6 (a 40-byte header instead of 20).
inline constexpr uint32_t kRoceOverheadBytes6 = kRoceOverheadBytes + 20;

// The most RDMA READs a QP can have in flight (the transport's read table; mlx5's limit too).
inline constexpr uint32_t kMaxOutstandingReads = 16;

struct TransportSection {
  uint32_t pmtu_bytes = 1024;      // 256, 512, 1024, 2048 or 4096
  uint32_t timeout_exponent = 14;  // local ACK timeout 4.096 us * 2^t; 0 = no timer; 0..31
  uint32_t retry_cnt = 7;          // 0..7
  uint32_t rnr_retry = 7;          // 0..7, 7 = infinite
  uint32_t min_rnr_timer = 12;     // IB RNR timer code 0..31 (12 = 0.64 ms)
  uint32_t ack_frequency = 64;     // AckReq at least every N packets, 1..1024
  uint32_t window_packets = 1024;  // request packets unacknowledged per QP, 1..8192
  LossRecovery loss_recovery = LossRecovery::kGoBackN;
  // Selective repeat's outstanding bytes per QP; 0 = the transport's 128 KiB.
  uint64_t bdp_cap_bytes = 0;
  uint32_t max_outstanding_reads = 16;  // READ requests in flight per QP, 1..kMaxOutstandingReads
  bool operator==(const TransportSection&) const = default;

  // 4096 ns * 2^timeout_exponent; 0 when the timer is off.
  uint64_t local_ack_timeout_ns() const;
};

// The time an IB RNR timer code stands for (code 0 = 655.36 ms). code <= 31.
uint64_t rnr_timer_ns(uint32_t code);

// The most QPs and CQs one client can have: the client's shared-memory area has
// this many slots of each (shm-ipc's CONDUIT_SHM_MAX_QPS / _CQS; the daemon
// checks at compile time that the two agree).
inline constexpr uint32_t kMaxQpsPerClient = 4096;
inline constexpr uint32_t kMaxCqsPerClient = 4096;

// Ring depths a client's shared-memory area may be laid out with, and the
// sizes of one entry (shm-ipc's conduit_shm_send_wr / _recv_wr / _cqe; the
// daemon checks at compile time that they agree). Every QP slot of the area has
// a send and a receive ring of the policy's depth, every CQ slot a CQ ring, so
// the area's ring bytes are max_qps x (send + receive) + max_cqs x CQ; a policy
// whose rings would pass kMaxRingBytesPerClient is refused.
inline constexpr uint32_t kMinRingDepth = 16;
inline constexpr uint32_t kMaxWrDepth = 32768;  // mlx5's max_qp_wr
inline constexpr uint32_t kMaxCqeDepth = 65536;
inline constexpr uint32_t kSendWrBytes = 128;
inline constexpr uint32_t kRecvWrBytes = 128;
inline constexpr uint32_t kCqeBytes = 32;
inline constexpr uint64_t kMaxRingBytesPerClient = 1ull << 30;

struct ClientQuotas {
  uint32_t max_qps = 256;
  uint32_t max_cqs = 256;
  uint32_t max_mrs = 1024;
  uint32_t max_send_wr = 256;                  // send ring depth of every QP slot (power of two)
  uint32_t max_recv_wr = 256;                  // receive ring depth of every QP slot (power of two)
  uint32_t max_cqe = 1024;                     // CQ ring depth of every CQ slot (power of two)
  uint64_t max_registered_bytes = 4ull << 30;  // all regions of one client together
  uint64_t max_region_bytes = 1ull << 30;      // one region; <= max_registered_bytes
  bool operator==(const ClientQuotas&) const = default;

  // The bytes of rings in one client's shared-memory area (entries only).
  uint64_t ring_bytes() const {
    return uint64_t{max_qps} *
               (uint64_t{max_send_wr} * kSendWrBytes + uint64_t{max_recv_wr} * kRecvWrBytes) +
           uint64_t{max_cqs} * max_cqe * kCqeBytes;
  }
};

// An IPv4 network: address with the host bits zero, and prefix length 0..32.
struct Ipv4Prefix {
  Ipv4Address network;
  uint8_t length = 32;
  bool operator==(const Ipv4Prefix&) const = default;
};

// An IPv6 network: address with the host bits zero, and prefix length 1..128.
struct Ipv6Prefix {
  Ipv6Address network;
  uint8_t length = 128;
  bool operator==(const Ipv6Prefix&) const = default;
};

struct ClientsSection {
  // A peer may attach when its uid or one of its gids is listed. Both empty:
  // anyone who can open the control socket (its group and mode are the gate).
  std::vector<uint32_t> allowed_uids;
  std::vector<uint32_t> allowed_gids;
  // Hosts whose conduitd may connect to this host's listeners (connection
  // manager requests); others are rejected with "refused by policy". Empty: any.
  std::vector<Ipv4Prefix> allowed_peers;
  std::vector<Ipv6Prefix> allowed_peers6;  // the same list's IPv6 entries
  ClientQuotas quotas;                     // per client process
  bool operator==(const ClientsSection&) const = default;
};

struct Policy {
  DaemonSection daemon;
  PortSection port;
  std::vector<TrafficClass> traffic_classes = {builtin_default_class()};  // 1..16, file order
  CnpSection cnp;
  TransportSection transport;
  ClientsSection clients;
  bool operator==(const Policy&) const = default;

  // The class with is_default; a valid policy always has exactly one.
  const TrafficClass& default_class() const;
  // nullptr when no class has this name / DSCP.
  const TrafficClass* find_class(std::string_view name) const;
  const TrafficClass* class_for_dscp(uint8_t dscp) const;
};

// The EAL command line conduitd starts DPDK with: port.eal_args, then
//   -a DEVICE  for a PCI port, unless eal_args already say which PCI devices EAL
//              may probe (-a/--allow, -b/--block, --no-pci): so conduitd claims
//              its one port and leaves the host's other DPDK-bound devices alone;
//   -l LCORE   the first of daemon.lcores, unless eal_args give -l/--lcores.
std::vector<std::string> eal_arguments(const Policy& p);

}  // namespace conduit::policy
