// The DPDK port wrapper against real poll-mode drivers without hardware:
// net_ring (TX loops back to RX: the PMD uses the same rte_ring for queue i
// of both directions when created without arguments) and net_null.
// EAL runs with --no-huge --no-pci; if it cannot start here the binary exits
// 77 (skip) and says why.
#include <net/if.h>
#include <poll.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dpdk/dpdk_error.h"
#include "dpdk/eal.h"
#include "dpdk/port.h"
#include "dpdk/xdp_steer.h"

using namespace conduit::dpdk;

namespace {

void need_eal() {
  static Eal* eal = [] {
    const std::vector<std::string> args = {
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--file-prefix=conduit-unit-dpdk-" + std::to_string(getpid()),
        "-l",
        "0",
        "--log-level=lib.eal:error",
        "--log-level=pmd.*:error"};
    try {
      return new Eal(args);  // never destroyed; Eal removes its runtime directory at exit
    } catch (const DpdkError& e) {
      std::fprintf(stderr, "skip: DPDK EAL cannot start here: %s\n", e.what());
      std::exit(77);
    }
  }();
  (void)eal;
}

PortConfig small_port(const std::string& device) {
  PortConfig c;
  c.device = device;
  c.rx_ring_size = 256;
  c.tx_ring_size = 256;
  c.mbuf_count = 2047;
  c.mbuf_cache = 64;
  return c;
}

// Fills an mbuf with a frame whose bytes encode its index.
rte_mbuf* make_frame(Port& port, uint16_t index, uint16_t len) {
  rte_mbuf* m = port.alloc_mbuf();
  REQUIRE(m != nullptr);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
  REQUIRE(p != nullptr);
  for (uint16_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(index * 31 + i);
  return m;
}

std::string error_of(const PortConfig& c) {
  try {
    Port p(c);
  } catch (const DpdkError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("net_ring port loops frames from TX back to RX", "[dpdk]") {
  need_eal();
  Port port(small_port("net_ring0"));
  CHECK(port.name() == "net_ring0");
  CHECK(port.driver() == "net_ring");
  CHECK(port.rx_ring_size() >= 256);
  CHECK(port.link().up);
  CHECK(port.mtu_bytes() == 1500);

  constexpr uint16_t kBurst = 32;
  rte_mbuf* out[kBurst];
  for (uint16_t i = 0; i < kBurst; ++i) out[i] = make_frame(port, i, static_cast<uint16_t>(60 + i));
  const uint16_t sent = port.tx_burst(0, out, kBurst);
  REQUIRE(sent == kBurst);

  rte_mbuf* in[kBurst * 2];
  uint16_t got = 0;
  for (int tries = 0; tries < 100 && got < kBurst; ++tries) {
    got += port.rx_burst(0, in + got, static_cast<uint16_t>(kBurst * 2 - got));
  }
  REQUIRE(got == kBurst);
  for (uint16_t i = 0; i < got; ++i) {
    const auto len = rte_pktmbuf_pkt_len(in[i]);
    CHECK(len == 60u + i);
    const auto* p = rte_pktmbuf_mtod(in[i], const uint8_t*);
    bool same = true;
    for (uint32_t b = 0; b < len; ++b) same &= p[b] == static_cast<uint8_t>(i * 31 + b);
    CHECK(same);
    rte_pktmbuf_free(in[i]);
  }
  const PortStats s = port.stats();
  CHECK(s.tx_packets == kBurst);
  CHECK(s.rx_packets == kBurst);
  port.reset_stats();
  CHECK(port.stats().tx_packets == 0);
  CHECK(port.rx_burst(0, in, kBurst) == 0);
}

TEST_CASE("A ring port can be closed and hot-plugged again under its name", "[dpdk]") {
  need_eal();
  for (int round = 0; round < 2; ++round) {
    Port port(small_port("net_ring1"));
    rte_mbuf* m = make_frame(port, 1, 64);
    REQUIRE(port.tx_burst(0, &m, 1) == 1);
    rte_mbuf* r = nullptr;
    REQUIRE(port.rx_burst(0, &r, 1) == 1);
    rte_pktmbuf_free(r);
  }
}

TEST_CASE("net_null port: RX produces frames, TX consumes them", "[dpdk]") {
  need_eal();
  PortConfig c = small_port("net_null0,size=128");
  c.promiscuous = true;
  Port port(c);
  CHECK(port.name() == "net_null0");
  rte_mbuf* bufs[16];
  const uint16_t n = port.rx_burst(0, bufs, 16);
  REQUIRE(n == 16);
  CHECK(rte_pktmbuf_pkt_len(bufs[0]) == 128);
  CHECK(port.tx_burst(0, bufs, n) == n);  // the null PMD frees what it takes
  const PortStats s = port.stats();
  CHECK(s.rx_packets == 16);
  CHECK(s.tx_packets == 16);
}

TEST_CASE("Offloads are only those the device reports", "[dpdk]") {
  need_eal();
  PortConfig c = small_port("net_ring2");
  c.tx_checksum_offload = true;
  c.rx_checksum_offload = true;
  Port port(c);
  rte_eth_dev_info info{};
  REQUIRE(rte_eth_dev_info_get(port.port_id(), &info) == 0);
  CHECK((port.tx_offloads() & ~info.tx_offload_capa) == 0);
  CHECK((port.rx_offloads() & ~info.rx_offload_capa) == 0);
  CHECK(port.tx_ipv4_checksum_offload() ==
        ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0));
  rte_mbuf* m = make_frame(port, 0, 64);
  port.request_tx_ipv4_checksum(m, 14);
  if (!port.tx_ipv4_checksum_offload()) CHECK(m->ol_flags == 0);
  rte_pktmbuf_free(m);
}

TEST_CASE("Setup errors name the problem", "[dpdk]") {
  need_eal();
  std::string e = error_of(small_port("net_nosuchpmd0"));
  CHECK(e.find("net_nosuchpmd0") != std::string::npos);
  CHECK(e.find("cannot probe") != std::string::npos);

  e = error_of(small_port(""));
  CHECK(e.find("no port device") != std::string::npos);

  PortConfig c = small_port("net_ring3");
  c.rx_queues = 200;
  e = error_of(c);
  CHECK(e.find("RX queues") != std::string::npos);
  CHECK(e.find("200") != std::string::npos);

  c = small_port("net_ring3");
  c.mbuf_count = 300;  // cannot fill 2 x 256 descriptors
  e = error_of(c);
  CHECK(e.find("raise mbuf_count") != std::string::npos);

  c = small_port("net_ring3");
  c.mbuf_cache = 1000;
  e = error_of(c);
  CHECK(e.find("mbuf cache") != std::string::npos);

  c = small_port("net_ring3");
  c.mtu_bytes = 40;  // below every driver's minimum (68)
  e = error_of(c);
  CHECK(e.find("MTU") != std::string::npos);

  // After each failure the device was unplugged again: a good config works.
  Port ok(small_port("net_ring3"));
  CHECK(ok.link().up);
}

TEST_CASE("A port cannot be driven twice", "[dpdk]") {
  need_eal();
  Port first(small_port("net_ring4"));
  const std::string e = error_of(small_port("net_ring4"));
  CHECK(e.find("already in use") != std::string::npos);
}

TEST_CASE("A second EAL is refused with a clear message", "[dpdk]") {
  need_eal();
  try {
    Eal again({"--no-huge"});
    FAIL("second Eal accepted");
  } catch (const DpdkError& e) {
    CHECK(std::string(e.what()).find("already") != std::string::npos);
  }
}

TEST_CASE("A jumbo MTU sizes the mbufs for whole frames", "[dpdk]") {
  need_eal();
  PortConfig c = small_port("net_ring5");
  c.mtu_bytes = 9000;
  c.mbuf_count = 1023;
  c.rx_ring_size = 128;
  c.tx_ring_size = 128;
  Port port(c);
  CHECK(port.mtu_bytes() == 9000);
  rte_mbuf* m = port.alloc_mbuf();
  REQUIRE(m != nullptr);
  CHECK(rte_pktmbuf_tailroom(m) >= 9000 + 14 + 4);
  rte_pktmbuf_free(m);
  rte_mbuf* f = make_frame(port, 3, 9014);
  REQUIRE(port.tx_burst(0, &f, 1) == 1);
  rte_mbuf* r = nullptr;
  REQUIRE(port.rx_burst(0, &r, 1) == 1);
  CHECK(rte_pktmbuf_pkt_len(r) == 9014);
  CHECK(r->nb_segs == 1);
  rte_pktmbuf_free(r);
}

TEST_CASE("Several queues: each TX queue of a ring port loops to its RX queue", "[dpdk]") {
  need_eal();
  PortConfig c = small_port("net_ring6");
  c.rx_queues = 2;
  c.tx_queues = 2;
  Port port(c);
  CHECK(port.wait_for_link(100).up);
  rte_mbuf* a = make_frame(port, 1, 64);
  rte_mbuf* b = make_frame(port, 2, 65);
  REQUIRE(port.tx_burst(1, &a, 1) == 1);
  REQUIRE(port.tx_burst(0, &b, 1) == 1);
  rte_mbuf* r = nullptr;
  REQUIRE(port.rx_burst(1, &r, 1) == 1);
  CHECK(rte_pktmbuf_pkt_len(r) == 64);
  rte_pktmbuf_free(r);
  REQUIRE(port.rx_burst(0, &r, 1) == 1);
  CHECK(rte_pktmbuf_pkt_len(r) == 65);
  rte_pktmbuf_free(r);
}

TEST_CASE("max_frame_bytes sizes mbufs beyond the MTU", "[dpdk]") {
  need_eal();
  PortConfig c = small_port("net_ring7");
  c.max_frame_bytes = 9216;
  c.mbuf_count = 1023;
  c.rx_ring_size = 128;
  c.tx_ring_size = 128;
  Port port(c);
  CHECK(port.mtu_bytes() == 1500);
  rte_mbuf* m = port.alloc_mbuf();
  REQUIRE(m != nullptr);
  CHECK(rte_pktmbuf_tailroom(m) >= 9216);
  rte_pktmbuf_free(m);

  c = small_port("net_ring8");  // net_ring7 is still held by `port`
  c.max_frame_bytes = 70000;
  CHECK(error_of(c).find("do not fit one mbuf") != std::string::npos);
}

TEST_CASE("A port without kernel sockets offers no RX wake-up descriptor", "[dpdk]") {
  need_eal();
  Port port(small_port("net_ring7"));
  CHECK(port.rx_wait_fds().empty());
}

// The engine sleeps on these descriptors: a frame arriving must make them
// readable, and taking it with an RX burst must make them quiet again.
// af_packet on the loopback device of a private network namespace (root only).
TEST_CASE("An af_packet port's socket becomes readable when a frame arrives", "[dpdk]") {
  if (geteuid() != 0) {
    WARN("skipped: needs root for a private network namespace");
    return;
  }
  need_eal();
  REQUIRE(unshare(CLONE_NEWNET) == 0);  // this test's own loopback device, nobody else's
  {
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(s >= 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    REQUIRE(ioctl(s, SIOCGIFFLAGS, &ifr) == 0);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    REQUIRE(ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
    close(s);
  }
  PortConfig c = small_port("net_af_packet_wake,iface=lo,framecnt=256");
  c.rx_checksum_offload = false;
  c.tx_checksum_offload = false;
  Port port(c);
  const std::vector<int> fds = port.rx_wait_fds();
  REQUIRE(!fds.empty());
  for (int fd : fds) {
    int domain = 0;
    socklen_t len = sizeof domain;
    REQUIRE(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0);
    CHECK(domain == AF_PACKET);
  }
  auto readable = [&fds](int timeout_ms) {
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    return poll(p.data(), p.size(), timeout_ms) > 0;
  };
  auto drain = [&port] {
    uint32_t n = 0;
    rte_mbuf* bufs[32];
    for (uint16_t got; (got = port.rx_burst(0, bufs, 32)) > 0; n += got) {
      for (uint16_t i = 0; i < got; ++i) rte_pktmbuf_free(bufs[i]);
    }
    return n;
  };
  drain();
  CHECK_FALSE(readable(0));

  // A broadcast frame of an unused EtherType: the loopback device hands it
  // back to every packet socket on it, ours included.
  rte_mbuf* m = make_frame(port, 1, 60);
  auto* eth = rte_pktmbuf_mtod(m, uint8_t*);
  std::memset(eth, 0xFF, 6);
  eth[12] = 0x88;
  eth[13] = 0xB5;  // IEEE 802 local experimental EtherType
  REQUIRE(port.tx_burst(0, &m, 1) == 1);
  CHECK(readable(2000));
  CHECK(drain() >= 1);
  CHECK_FALSE(readable(0));
}

TEST_CASE("af_xdp vdev strings get conduit's XDP steering program unless they name one") {
  using conduit::dpdk::with_xdp_program;
  const std::string prog = "/opt/conduit/lib/conduit/conduit_steer.o";
  CHECK(with_xdp_program("net_af_xdp0,iface=eth0,start_queue=0", prog) ==
        "net_af_xdp0,iface=eth0,start_queue=0,xdp_prog=" + prog);
  // The operator's own program wins.
  CHECK(with_xdp_program("net_af_xdp0,iface=eth0,xdp_prog=/x.o", prog) ==
        "net_af_xdp0,iface=eth0,xdp_prog=/x.o");
  // Other drivers, a port EAL already probed (a bare name), or no program: unchanged.
  CHECK(with_xdp_program("net_af_packet0,iface=eth0", prog) == "net_af_packet0,iface=eth0");
  CHECK(with_xdp_program("net_af_xdp0", prog) == "net_af_xdp0");
  CHECK(with_xdp_program("net_af_xdp0,iface=eth0", "") == "net_af_xdp0,iface=eth0");
}

// conduitd's PCI ports (and --vdev ones) are probed by EAL, not hot-plugged by
// the Port; closing the port releases it but leaves the device probed. A start
// that failed, or a port that was closed, must leave such a device usable: a
// second start in the same process works.
TEST_CASE("A device probed before the port can be started again after a failed start", "[dpdk]") {
  need_eal();
  REQUIRE(rte_dev_probe("net_ring9") == 0);  // as EAL does for -a/--vdev
  PortConfig c = small_port("net_ring9");
  c.rx_queues = 200;
  std::string e = error_of(c);
  INFO(e);
  CHECK(e.find("RX queues") != std::string::npos);
  c = small_port("net_ring9");
  c.mtu_bytes = 40;
  e = error_of(c);
  CHECK(e.find("MTU") != std::string::npos);
  for (int round = 0; round < 2; ++round) {
    e = error_of(small_port("net_ring9"));
    CHECK(e.empty());
  }
}
