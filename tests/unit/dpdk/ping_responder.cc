// Manual check (not a registered test): runs NetStack on a real DPDK port so
// `ping` and `arping` from another host answer. Used to try af_packet/af_xdp
// vdevs on a veth pair inside network namespaces; see the net/dpdk section of
// the engineer's report for the exact commands.
//
//   ping_responder SECONDS DEVICE OUR_IP/PREFIX PEER_IP -- EAL ARGS...
//
// It resolves PEER_IP once at start (an ARP request goes out), answers ARP
// and ICMP echo for OUR_IP, and prints the NetStack and port counters at the
// end. Exit status 0 when PEER_IP was resolved and at least one echo answered.
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dpdk/dpdk_error.h"
#include "dpdk/eal.h"
#include "dpdk/port.h"
#include "net/net_stack.h"

using namespace conduit;

namespace {
uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

bool send_bytes(dpdk::Port& port, const uint8_t* p, size_t len) {
  rte_mbuf* m = port.alloc_mbuf();
  if (m == nullptr) return false;
  char* dst = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
  if (dst == nullptr) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(dst, p, len);
  if (port.tx_burst(0, &m, 1) != 1) {
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[5], "--") != 0) {
    std::fprintf(stderr, "usage: %s SECONDS DEVICE OUR_IP/PREFIX PEER_IP -- EAL ARGS...\n",
                 argv[0]);
    return 2;
  }
  const int seconds = std::atoi(argv[1]);
  const std::string cidr = argv[3];
  const auto slash = cidr.find('/');
  const auto our_ip = net::Ipv4Addr::parse(cidr.substr(0, slash));
  const auto peer_ip = net::Ipv4Addr::parse(argv[4]);
  if (!our_ip || !peer_ip || slash == std::string::npos) {
    std::fprintf(stderr, "bad address\n");
    return 2;
  }
  std::vector<std::string> eal_args(argv + 6, argv + argc);
  try {
    dpdk::Eal eal(eal_args);
    dpdk::PortConfig pc;
    pc.device = argv[2];
    pc.rx_ring_size = 512;
    pc.tx_ring_size = 512;
    pc.mbuf_count = 4095;
    dpdk::Port port(pc);
    const auto link = port.wait_for_link(2000);
    net::NetStackConfig nc;
    std::memcpy(nc.mac.bytes.data(), port.mac().addr_bytes, 6);
    nc.addr = *our_ip;
    nc.prefix_len = static_cast<uint8_t>(std::atoi(cidr.c_str() + slash + 1));
    nc.udp_ports = {4791};
    net::NetStack stack(nc);
    std::printf("port %s driver %s mac %s mtu %u link %s speed %u Mb/s tx_offloads 0x%llx\n",
                port.name().c_str(), port.driver().c_str(), nc.mac.to_string().c_str(),
                port.mtu_bytes(), link.up ? "up" : "down", link.speed_mbps,
                static_cast<unsigned long long>(port.tx_offloads()));

    bool resolved = false;
    stack.resolve(*peer_ip, now_ns());
    std::vector<uint8_t> reply(16384);
    net::NetAction actions[16];
    rte_mbuf* bufs[32];
    const uint64_t end = now_ns() + uint64_t(seconds) * 1'000'000'000;
    while (now_ns() < end) {
      const uint64_t now = now_ns();
      const uint16_t n = port.rx_burst(0, bufs, 32);
      for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = bufs[i];
        // Single-segment RX: the pool's data room holds a whole frame.
        const std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*),
                                             rte_pktmbuf_data_len(m));
        const net::RxResult r = stack.on_rx_frame(frame, now, reply);
        if (r.verdict == net::RxVerdict::kReply) send_bytes(port, reply.data(), r.reply_len);
        rte_pktmbuf_free(m);
      }
      if (now >= stack.next_deadline_ns()) stack.poll_timers(now);
      for (size_t k; (k = stack.take_actions(actions)) > 0;) {
        for (size_t a = 0; a < k; ++a) {
          if (actions[a].kind == net::NetAction::Kind::kTransmit) {
            send_bytes(port, actions[a].bytes.data(), actions[a].len);
          }
        }
      }
      if (!resolved) {
        const auto info = stack.neighbours().find(*peer_ip);
        if (info && info->state == net::NeighbourState::kReachable) {
          resolved = true;
          std::printf("resolved %s at %s\n", peer_ip->to_string().c_str(),
                      info->mac.to_string().c_str());
        }
      }
      if (n == 0) rte_delay_us_sleep(50);  // idle: do not hog the shared core
    }
    const auto& c = stack.counters();
    std::printf(
        "rx_frames %llu arp_requests_in %llu arp_replies_out %llu arp_requests_out %llu "
        "arp_replies_in %llu echo_in %llu echo_out %llu drops %llu\n",
        (unsigned long long)c.rx_frames, (unsigned long long)c.rx_arp_requests,
        (unsigned long long)c.tx_arp_replies, (unsigned long long)c.tx_arp_requests,
        (unsigned long long)c.rx_arp_replies, (unsigned long long)c.rx_icmp_echo_requests,
        (unsigned long long)c.tx_icmp_echo_replies, (unsigned long long)c.total_drops());
    for (size_t i = 1; i < net::kRxDropCount; ++i) {
      if (c.rx_drops[i]) {
        std::printf("  drop %s: %llu\n", net::rx_drop_name(static_cast<net::RxDrop>(i)),
                    (unsigned long long)c.rx_drops[i]);
      }
    }
    const auto s = port.stats();
    std::printf("port rx %llu tx %llu missed %llu\n", (unsigned long long)s.rx_packets,
                (unsigned long long)s.tx_packets, (unsigned long long)s.rx_missed);
    return resolved && c.tx_icmp_echo_replies > 0 ? 0 : 1;
  } catch (const dpdk::DpdkError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
