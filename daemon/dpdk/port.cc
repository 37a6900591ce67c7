#include "dpdk/port.h"

#include <dirent.h>
#include <linux/ethtool.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <thread>

#include "dpdk/dpdk_error.h"

#include "dpdk/xdp_steer.h"

namespace conduit::dpdk {
namespace {

constexpr uint16_t kVlanAndCrcBytes = 4 + 4;
#ifndef AF_XDP
constexpr int AF_XDP = 44;
#endif

// This process's open sockets of the kernel families behind the af_packet and
// af_xdp vdevs, in fd order.
std::vector<int> kernel_port_sockets() {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  const int own = dirfd(d);
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    int domain = 0;
    socklen_t len = sizeof domain;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) continue;
    if (domain == AF_PACKET || domain == AF_XDP) out.push_back(static_cast<int>(fd));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string available_ports() {
  std::string out;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) {
    char name[RTE_ETH_NAME_MAX_LEN];
    if (rte_eth_dev_get_name_by_port(id, name) == 0)
      out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out.empty() ? "none" : out;
}

// Unplugs the device a device string names, through its bus (vdev, pci, ...).
void unplug(const std::string& device) {
  rte_devargs da{};
  if (rte_devargs_parse(&da, device.c_str()) != 0) return;
  if (da.bus != nullptr) rte_eal_hotplug_remove(rte_bus_name(da.bus), da.name);
  std::free(da.data);  // what rte_devargs_reset() does (experimental in DPDK 22.11)
}

}  // namespace

Port::Port(const PortConfig& config) : config_(config) {
  try {
    const std::vector<int> sockets_before = kernel_port_sockets();
    const std::string given_device = config_.device;
    config_.device = with_xdp_program(config_.device, config_.xdp_program);
    if (config_.device != given_device) xdp_program_ = config_.xdp_program;
    port_id_ = find_or_probe();

    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(port_id_, &info); rc != 0) {
      throw DpdkError(dpdk_reason("port " + name_ + ": cannot read device info", rc));
    }
    driver_ = info.driver_name ? info.driver_name : "?";
    const std::string who = "port " + name_ + " (driver " + driver_ + ")";
    if (config_.rx_queues == 0 || config_.rx_queues > info.max_rx_queues) {
      throw DpdkError(who + " supports 1.." + std::to_string(info.max_rx_queues) + " RX queues; " +
                      std::to_string(config_.rx_queues) + " were asked for");
    }
    if (config_.tx_queues == 0 || config_.tx_queues > info.max_tx_queues) {
      throw DpdkError(who + " supports 1.." + std::to_string(info.max_tx_queues) + " TX queues; " +
                      std::to_string(config_.tx_queues) + " were asked for");
    }
    uint16_t mtu = config_.mtu_bytes;
    if (mtu == 0 && rte_eth_dev_get_mtu(port_id_, &mtu) != 0) mtu = RTE_ETHER_MTU;
    if (mtu < info.min_mtu || mtu > info.max_mtu) {
      throw DpdkError(who + " accepts an MTU of " + std::to_string(info.min_mtu) + ".." +
                      std::to_string(info.max_mtu) + " bytes; " + std::to_string(mtu) +
                      " was asked for");
    }
    uint16_t dev_mtu = mtu;  // what the ethdev itself is configured with
    if (uint32_t{mtu} + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN > info.max_rx_pktlen) {
      if (driver_ != "net_af_packet" ||
          info.max_rx_pktlen < RTE_ETHER_MIN_MTU + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN) {
        throw DpdkError(who + " receives frames of at most " + std::to_string(info.max_rx_pktlen) +
                        " bytes: an MTU of " + std::to_string(mtu) + " does not fit");
      }
      // net_af_packet (DPDK 22.11) reports 1518-byte frames whatever its
      // framesz; what it carries is set by the kernel interface's MTU and the
      // vdev's framesz. Configure the ethdev within its report and size the
      // mbufs for the real MTU.
      dev_mtu = static_cast<uint16_t>(info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
    }

    // Pool: one mbuf must hold a whole frame at this MTU (single-segment RX).
    const uint32_t frame_bytes =
        std::max<uint32_t>(RTE_ETHER_HDR_LEN + mtu + kVlanAndCrcBytes, config_.max_frame_bytes);
    const uint32_t data_room =
        std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + frame_bytes);
    if (data_room > UINT16_MAX) {
      throw DpdkError(who + ": frames of " + std::to_string(frame_bytes) +
                      " bytes do not fit one mbuf (at most 65535 with headroom)");
    }
    if (config_.mbuf_cache > RTE_MEMPOOL_CACHE_MAX_SIZE ||
        config_.mbuf_cache * 3ull / 2 > config_.mbuf_count) {
      throw DpdkError(who + ": mbuf cache " + std::to_string(config_.mbuf_cache) +
                      " must be <= " + std::to_string(RTE_MEMPOOL_CACHE_MAX_SIZE) +
                      " and <= 2/3 of the pool size " + std::to_string(config_.mbuf_count));
    }
    const uint32_t ring_mbufs = uint32_t{config_.rx_queues} * config_.rx_ring_size +
                                uint32_t{config_.tx_queues} * config_.tx_ring_size;
    if (config_.mbuf_count <= ring_mbufs) {
      throw DpdkError(who + ": " + std::to_string(config_.mbuf_count) +
                      " mbufs cannot fill the RX/TX rings (" + std::to_string(ring_mbufs) +
                      " descriptors); raise mbuf_count or lower the ring sizes");
    }
    // Offloads: ask only for what the device reports.
    uint64_t want_tx = 0, want_rx = 0;
    if (config_.tx_checksum_offload) {
      want_tx |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    }
    if (config_.tx_multi_segs) want_tx |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    if (config_.tx_fast_free) want_tx |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
    if (config_.rx_checksum_offload) {
      want_rx |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
    }
    tx_offloads_ = want_tx & info.tx_offload_capa;
    rx_offloads_ = want_rx & info.rx_offload_capa;
    tx_ipv4_cksum_ = (tx_offloads_ & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;

    rte_eth_conf conf{};
    conf.rxmode.mtu = dev_mtu;
    conf.rxmode.offloads = rx_offloads_;
    conf.txmode.offloads = tx_offloads_;
    if (int rc = rte_eth_dev_configure(port_id_, config_.rx_queues, config_.tx_queues, &conf);
        rc != 0) {
      throw DpdkError(dpdk_reason(who + ": configure failed", rc));
    }
    rx_ring_size_ = config_.rx_ring_size;
    tx_ring_size_ = config_.tx_ring_size;
    if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_ring_size_, &tx_ring_size_);
        rc != 0) {
      throw DpdkError(dpdk_reason(who + ": ring sizes " + std::to_string(config_.rx_ring_size) +
                                      "/" + std::to_string(config_.tx_ring_size) + " rejected",
                                  rc));
    }
    static std::atomic<uint32_t> pool_seq{0};
    const std::string pool_name =
        "conduit_p" + std::to_string(port_id_) + "_" + std::to_string(pool_seq.fetch_add(1));
    int socket =
        config_.socket_id == SOCKET_ID_ANY ? rte_eth_dev_socket_id(port_id_) : config_.socket_id;
    if (socket < 0) socket = SOCKET_ID_ANY;  // vdevs have no NUMA node
    pool_ = driver_ == "net_af_xdp"
                ? create_umem_pool(pool_name, static_cast<uint16_t>(data_room), socket)
                : rte_pktmbuf_pool_create(pool_name.c_str(), config_.mbuf_count, config_.mbuf_cache,
                                          0, static_cast<uint16_t>(data_room), socket);
    if (pool_ == nullptr) {
      throw DpdkError(dpdk_reason(
          who + ": cannot create a pool of " + std::to_string(config_.mbuf_count) + " mbufs of " +
              std::to_string(data_room) + " bytes (raise EAL -m or hugepages, or lower mbuf_count)",
          rte_errno));
    }

    for (uint16_t q = 0; q < config_.rx_queues; ++q) {
      rte_eth_rxconf rxconf = info.default_rxconf;
      rxconf.offloads = rx_offloads_;
      if (int rc = rte_eth_rx_queue_setup(port_id_, q, rx_ring_size_, static_cast<unsigned>(socket),
                                          &rxconf, pool_);
          rc != 0) {
        throw DpdkError(dpdk_reason(who + ": RX queue " + std::to_string(q) + " setup failed", rc));
      }
    }
    for (uint16_t q = 0; q < config_.tx_queues; ++q) {
      rte_eth_txconf txconf = info.default_txconf;
      txconf.offloads = tx_offloads_;
      if (int rc = rte_eth_tx_queue_setup(port_id_, q, tx_ring_size_, static_cast<unsigned>(socket),
                                          &txconf);
          rc != 0) {
        throw DpdkError(dpdk_reason(who + ": TX queue " + std::to_string(q) + " setup failed", rc));
      }
    }
    if (int rc = rte_eth_dev_start(port_id_); rc != 0) {
      throw DpdkError(dpdk_reason(who + ": start failed", rc));
    }
    started_ = true;
    if (config_.promiscuous) {
      if (int rc = rte_eth_promiscuous_enable(port_id_); rc != 0) {
        throw DpdkError(dpdk_reason(who + ": cannot enable promiscuous mode", rc));
      }
    }
    if (int rc = rte_eth_macaddr_get(port_id_, &mac_); rc != 0) {
      throw DpdkError(dpdk_reason(who + ": cannot read the MAC address", rc));
    }
    if (rte_eth_dev_get_mtu(port_id_, &mtu_bytes_) != 0 || dev_mtu != mtu) mtu_bytes_ = mtu;
    find_rx_wait_fds(sockets_before);
    find_kernel_interface(info.if_index);
    if (!xdp_program_.empty()) {
      // The program passes everything until it knows our address: tell it now.
      if (std::string err =
              configure_xdp_steering(static_cast<int>(info.if_index), config_.xdp_steer_ipv4,
                                     config_.xdp_steer_ipv6, config_.xdp_steer_vlan);
          !err.empty()) {
        throw DpdkError(who + ": XDP steering program " + xdp_program_ + ": " + err);
      }
    }
  } catch (...) {
    release();
    throw;
  }
}

Port::~Port() { release(); }

void Port::find_kernel_interface(uint32_t if_index) {
  char name[IF_NAMESIZE] = {};
  if (if_index == 0 || if_indextoname(if_index, name) == nullptr) return;
  kernel_if_ = name;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ethtool_drvinfo drv{};
  drv.cmd = ETHTOOL_GDRVINFO;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
  ifr.ifr_data = reinterpret_cast<char*>(&drv);
  if (::ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
    drv.driver[sizeof drv.driver - 1] = '\0';
    kernel_driver_ = drv.driver;
  }
  ::close(fd);
}

// DPDK 22.11's af_xdp PMD registers its RX pool as the socket's UMEM: one span
// from the first object, pool size x object size long. rte_pktmbuf_pool_create()
// keeps objects inside 4 KiB pages when there are no hugepages (--no-huge), so
// a 2.4 KB mbuf takes a whole page and two thirds of the pool lie beyond that
// span: the kernel refuses TX descriptors there (XDP_STATISTICS tx_invalid_descs;
// the frame is lost without a trace in the ethdev counters) and silently skips
// fill-ring entries there, until RX stops. Seen on kernel 6.18 over veth: a
// 1 MiB send_bw lost 4,629 of 10,817 frames and the receiver stalled after 4,693.
// Packed objects (no page-boundary rule: the PMD copies, the device does no DMA
// from this memory) in one chunk make the span exact.
rte_mempool* Port::create_umem_pool(const std::string& name, uint16_t data_room, int socket) {
  const unsigned elt_size = sizeof(rte_mbuf) + data_room;
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), config_.mbuf_count, elt_size,
                                             config_.mbuf_cache, sizeof(rte_pktmbuf_pool_private),
                                             socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
  if (mp == nullptr) return nullptr;
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = data_room;
  priv.mbuf_priv_size = 0;
  if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr) != 0) {
    rte_mempool_free(mp);
    return nullptr;
  }
  rte_pktmbuf_pool_init(mp, &priv);
  if (rte_mempool_populate_default(mp) < 0) {
    rte_mempool_free(mp);
    return nullptr;
  }
  if (mp->nb_mem_chunks != 1) {
    rte_mempool_free(mp);
    throw DpdkError("port " + name_ + ": the af_xdp pool needs one contiguous memory chunk, got " +
                    std::to_string(mp->nb_mem_chunks) +
                    " (raise EAL -m, or use hugepages: scripts/setup-hugepages)");
  }
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  return mp;
}

uint16_t Port::find_or_probe() {
  const std::string& dev = config_.device;
  if (dev.empty()) throw DpdkError("no port device given (a PCI address or a vdev name)");
  name_ = dev.substr(0, dev.find(','));
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name_.c_str(), &id) != 0) {
    // Not probed at EAL init: hot-plug it (vdev strings, or a PCI device EAL skipped).
    if (int rc = rte_dev_probe(dev.c_str()); rc != 0) {
      throw DpdkError(dpdk_reason("cannot probe device \"" + dev +
                                      "\" (ports present: " + available_ports() +
                                      "; for a vdev check its name and arguments, for PCI the "
                                      "driver binding and EAL -a/--no-pci)",
                                  rc));
    }
    probed_by_us_ = true;
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &id) != 0) {
      // The device was probed already (by EAL, -a/--vdev) and its port closed by an
      // earlier Port: rte_dev_probe() accepts that without a port, and a closed port
      // comes back only when the device is unplugged and probed again.
      unplug(dev);
      if (int rc = rte_dev_probe(dev.c_str()); rc != 0) {
        throw DpdkError(dpdk_reason("cannot probe device \"" + dev + "\" again", rc));
      }
    }
    if (rte_eth_dev_get_port_by_name(name_.c_str(), &id) != 0) {
      throw DpdkError("device \"" + dev + "\" probed but no ethdev port named \"" + name_ +
                      "\" appeared (ports present: " + available_ports() + ")");
    }
  }
  // Claim the port so a second Port (or another DPDK user) cannot drive it too.
  rte_eth_dev_owner owner{};
  if (int rc = rte_eth_dev_owner_new(&owner.id); rc != 0) {
    throw DpdkError(dpdk_reason("port " + name_ + ": cannot allocate an owner id", rc));
  }
  std::snprintf(owner.name, sizeof owner.name, "conduit");
  if (int rc = rte_eth_dev_owner_set(id, &owner); rc != 0) {
    throw DpdkError(dpdk_reason("port " + name_ + " is already in use", rc));
  }
  owner_id_ = owner.id;
  return id;
}

void Port::find_rx_wait_fds(const std::vector<int>& fds_before_probe) {
  rx_wait_fds_.clear();
  if (driver_ != "net_af_packet" && driver_ != "net_af_xdp") return;
  const std::vector<int> now = kernel_port_sockets();
  // The sockets our probe opened; a device EAL probed before us (--vdev)
  // opened them earlier: then every such socket, as conduitd drives one port.
  std::set_difference(now.begin(), now.end(), fds_before_probe.begin(), fds_before_probe.end(),
                      std::back_inserter(rx_wait_fds_));
  if (rx_wait_fds_.empty()) rx_wait_fds_ = now;
}

void Port::release() {
  if (port_id_ < RTE_MAX_ETHPORTS) {
    if (started_) rte_eth_dev_stop(port_id_);
    started_ = false;
    rte_eth_dev_info info{};
    const bool have_info = rte_eth_dev_info_get(port_id_, &info) == 0;
    if (owner_id_ != 0) rte_eth_dev_owner_unset(port_id_, owner_id_);
    owner_id_ = 0;
    rte_eth_dev_close(port_id_);
    // A hot-plugged device is unplugged again so its name can be reused.
    if (probed_by_us_ && have_info && info.device != nullptr) {
      rte_dev_remove(info.device);
    }
    port_id_ = RTE_MAX_ETHPORTS;
  } else if (probed_by_us_ && !name_.empty()) {
    // Probed but no port found: unplug through the device's bus.
    unplug(config_.device);
  }
  probed_by_us_ = false;
  rx_wait_fds_.clear();
  if (pool_ != nullptr) rte_mempool_free(pool_);
  pool_ = nullptr;
}

LinkStatus Port::link() const {
  rte_eth_link l{};
  LinkStatus s;
  if (rte_eth_link_get_nowait(port_id_, &l) != 0) return s;
  s.up = l.link_status == RTE_ETH_LINK_UP;
  s.speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed;
  s.full_duplex = l.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
  return s;
}

LinkStatus Port::wait_for_link(uint32_t timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const LinkStatus s = link();
    if (s.up || std::chrono::steady_clock::now() >= deadline) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

PortStats Port::stats() const {
  rte_eth_stats st{};
  PortStats s;
  if (rte_eth_stats_get(port_id_, &st) != 0) return s;
  s.rx_packets = st.ipackets;
  s.tx_packets = st.opackets;
  s.rx_bytes = st.ibytes;
  s.tx_bytes = st.obytes;
  s.rx_missed = st.imissed;
  s.rx_errors = st.ierrors;
  s.tx_errors = st.oerrors;
  s.rx_no_mbuf = st.rx_nombuf;
  if (pool_ != nullptr) {
    s.mbufs_free = rte_mempool_avail_count(pool_);
    s.mbufs_in_use = rte_mempool_in_use_count(pool_);
  }
  if (driver_ == "net_af_xdp") {
    for (int fd : rx_wait_fds_) {
      xdp_statistics xs{};
      socklen_t len = sizeof xs;
      if (getsockopt(fd, SOL_XDP, XDP_STATISTICS, &xs, &len) != 0) continue;
      s.xsk_rx_dropped += xs.rx_dropped;
      s.xsk_rx_invalid_descs += xs.rx_invalid_descs;
      s.xsk_tx_invalid_descs += xs.tx_invalid_descs;
      s.xsk_rx_ring_full += xs.rx_ring_full;
      s.xsk_rx_fill_ring_empty += xs.rx_fill_ring_empty_descs;
      s.xsk_tx_ring_empty += xs.tx_ring_empty_descs;
    }
  }
  return s;
}

void Port::reset_stats() { rte_eth_stats_reset(port_id_); }

}  // namespace conduit::dpdk
