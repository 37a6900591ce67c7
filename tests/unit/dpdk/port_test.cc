// The DPDK port wrapper against real poll-mode drivers without hardware:
// net_ring (TX loops back to RX: the PMD uses the same rte_ring for queue i
// of both directions when created without arguments) and net_null.
// EAL runs with --no-huge --no-pci; if it cannot start here the binary exits
// 77 (skip) and says why.
#include <rte_ethdev.h>
#include <rte_mbuf.h>
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
      return new Eal(args);
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
