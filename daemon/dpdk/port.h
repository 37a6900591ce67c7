// One Ethernet port driven by a DPDK poll-mode driver: its mbuf pool, its
// RX/TX queues, MTU, offloads, link status and statistics.
//
// Setup (constructor) throws DpdkError with a message that names the port,
// the failing step, DPDK's reason and what to change. Teardown (destructor)
// stops and closes the port, then frees the pool. The burst calls are thin
// inline wrappers: no checks, no exceptions, no logging.
//
// Thread roles: construct/destroy on the main thread after Eal. Each queue's
// rx_burst/tx_burst belongs to one thread (the engine lcore); link(),
// stats() and the accessors may be called from the control thread.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conduit::dpdk {

struct PortConfig {
  // Which device: an ethdev name that EAL already probed ("net_af_packet0"
  // from --vdev, or a PCI address "0000:3b:00.0"), or a full device string
  // with arguments ("net_af_packet0,iface=veth0") that is hot-plugged when no
  // port of that name exists yet.
  std::string device;
  uint16_t rx_queues = 1;
  uint16_t tx_queues = 1;
  uint16_t rx_ring_size = 1024;  // descriptors per queue; the driver may round it
  uint16_t tx_ring_size = 1024;
  uint32_t mbuf_count = 8191;  // pool size (2^n - 1 is the most memory-efficient)
  uint16_t mbuf_cache = 256;   // per-lcore cache
  uint16_t mtu_bytes = 1500;   // IP MTU; 0 keeps the driver's default
  // Size mbufs for frames up to this many bytes (without FCS) even when the
  // MTU is smaller; 0 = from the MTU. For drivers that pass frames beyond the
  // MTU they report: net_af_packet in DPDK 22.11 reports 1518-byte frames at
  // most but carries whatever the interface MTU and its framesz allow.
  uint32_t max_frame_bytes = 0;
  bool promiscuous = false;         // needed by some vdevs to see frames for our MAC
  bool tx_checksum_offload = true;  // IPv4/UDP TX checksum, when the device has it
  bool rx_checksum_offload = true;  // IPv4/UDP RX checksum check, when the device has it
  bool tx_multi_segs = true;        // chained mbufs on TX, when the device has it
  bool tx_fast_free = false;        // only if every TX mbuf has refcnt 1 and comes from this pool
  int socket_id = SOCKET_ID_ANY;
  // af_xdp vdev strings: the XDP program to attach (dpdk/xdp_steer.h; empty =
  // DPDK's default, which takes every frame of the queue), and the address
  // (host byte order) it steers to conduitd.
  std::string xdp_program;
  uint32_t xdp_steer_ipv4 = 0;
  std::optional<std::array<uint8_t, 16>> xdp_steer_ipv6;  // port.address6
  std::optional<uint16_t> xdp_steer_vlan;                 // port.vlan (none: untagged)
};

struct LinkStatus {
  bool up = false;
  uint32_t speed_mbps = 0;  // 0 when unknown (many vdevs)
  bool full_duplex = false;
};

struct PortStats {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_missed = 0;  // dropped by the device: RX ring full
  uint64_t rx_errors = 0;
  uint64_t tx_errors = 0;
  uint64_t rx_no_mbuf = 0;  // RX failed for lack of mbufs
  uint64_t mbufs_free = 0;  // in the pool, incl. per-lcore caches (exhaustion stalls RX)
  uint64_t mbufs_in_use = 0;
  // AF_XDP sockets only (XDP_STATISTICS, summed over the port's sockets): where the kernel
  // lost or refused frames that never show in the ethdev counters.
  uint64_t xsk_rx_dropped = 0;          // dropped for other reasons (e.g. no fill buffer)
  uint64_t xsk_rx_invalid_descs = 0;    // bad RX descriptors
  uint64_t xsk_tx_invalid_descs = 0;    // TX descriptors the kernel refused (skipped, not sent)
  uint64_t xsk_rx_ring_full = 0;        // frames dropped: RX ring full
  uint64_t xsk_rx_fill_ring_empty = 0;  // times the fill ring was empty
  uint64_t xsk_tx_ring_empty = 0;       // times the kernel found the TX ring empty
};

class Port {
 public:
  explicit Port(const PortConfig& config);
  ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Up to n received mbufs into bufs (caller frees them); returns the count.
  uint16_t rx_burst(uint16_t queue, rte_mbuf** bufs, uint16_t n) {
    return rte_eth_rx_burst(port_id_, queue, bufs, n);
  }
  // Hands up to n mbufs to the device; the ones not taken (count..n) stay
  // the caller's to retry or free.
  uint16_t tx_burst(uint16_t queue, rte_mbuf** bufs, uint16_t n) {
    return rte_eth_tx_burst(port_id_, queue, bufs, n);
  }
  // An empty mbuf from this port's pool, or nullptr when exhausted.
  rte_mbuf* alloc_mbuf() { return rte_pktmbuf_alloc(pool_); }

  // Marks a frame for the device to fill in its IPv4 header checksum (and
  // nothing else) when tx_ipv4_checksum_offload(); the frame's checksum field
  // is then ignored. l2_len_bytes is 14, or 18 with a VLAN tag.
  void request_tx_ipv4_checksum(rte_mbuf* m, uint16_t l2_len_bytes) const {
    if (!tx_ipv4_cksum_) return;
    m->l2_len = l2_len_bytes;
    m->l3_len = 20;
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
  }

  LinkStatus link() const;
  // Waits up to timeout_ms for link up (setup time only); returns the status.
  LinkStatus wait_for_link(uint32_t timeout_ms) const;
  PortStats stats() const;
  void reset_stats();

  uint16_t port_id() const { return port_id_; }
  const std::string& name() const { return name_; }
  const std::string& driver() const { return driver_; }
  const rte_ether_addr& mac() const { return mac_; }
  uint16_t mtu_bytes() const { return mtu_bytes_; }
  uint16_t rx_ring_size() const { return rx_ring_size_; }
  uint16_t tx_ring_size() const { return tx_ring_size_; }
  uint64_t rx_offloads() const { return rx_offloads_; }  // RTE_ETH_RX_OFFLOAD_* enabled
  uint64_t tx_offloads() const { return tx_offloads_; }  // RTE_ETH_TX_OFFLOAD_* enabled
  bool tx_ipv4_checksum_offload() const { return tx_ipv4_cksum_; }
  // File descriptors that become readable (poll POLLIN) when a frame arrives:
  // the kernel sockets behind net_af_packet / net_af_xdp. DPDK has no RX
  // interrupt for these vdevs, but their sockets wake a poller. Empty for
  // other devices: an idle engine must then poll the port on a timer.
  // Owned by the driver; valid while the port is started.
  const std::vector<int>& rx_wait_fds() const { return rx_wait_fds_; }
  // af_xdp: the steering program in use (empty: DPDK's default program, or not af_xdp).
  const std::string& xdp_program() const { return xdp_program_; }
  // A PMD on a kernel interface (af_xdp, af_packet): that interface's name and its kernel
  // driver as ethtool names it ("veth", "mlx5_core"); empty for other devices or when the
  // kernel does not say.
  const std::string& kernel_interface() const { return kernel_if_; }
  const std::string& kernel_driver() const { return kernel_driver_; }
  rte_mempool* mempool() const { return pool_; }
  const PortConfig& config() const { return config_; }

 private:
  uint16_t find_or_probe();
  void find_rx_wait_fds(const std::vector<int>& fds_before_probe);
  void find_kernel_interface(uint32_t if_index);  // kernel_if_, kernel_driver_
  rte_mempool* create_umem_pool(const std::string& name, uint16_t data_room, int socket);
  void release();

  PortConfig config_;
  uint16_t port_id_ = RTE_MAX_ETHPORTS;
  std::string name_;
  std::string driver_;
  bool probed_by_us_ = false;
  uint64_t owner_id_ = 0;
  bool started_ = false;
  rte_mempool* pool_ = nullptr;
  rte_ether_addr mac_{};
  uint16_t mtu_bytes_ = 0;
  uint16_t rx_ring_size_ = 0;
  uint16_t tx_ring_size_ = 0;
  uint64_t rx_offloads_ = 0;
  uint64_t tx_offloads_ = 0;
  bool tx_ipv4_cksum_ = false;
  std::vector<int> rx_wait_fds_;
  std::string xdp_program_;
  std::string kernel_if_;
  std::string kernel_driver_;
};

}  // namespace conduit::dpdk
