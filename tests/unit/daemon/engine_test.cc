// Two engines, each with its own DPDK port, joined back to back by a pair of
// rte_rings (A's TX ring is B's RX ring and the other way round): the real
// engine, net (ARP), wire (ICRC), transport and pacer code on both sides.
// The "clients" are this test writing the shared-memory rings directly, as
// libconduit does, so each ring entry's path through the engine is visible.
// Needs only EAL without hugepages; exits 77 when EAL cannot start.
#include "engine/engine.h"

#include <poll.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "control/control_service.h"

#include "dpdk/dpdk_error.h"
#include "dpdk/eal.h"
#include "net/checksum.h"
#include "shm/doorbell.h"
#include "wire/gsi.h"

using namespace conduit;

namespace {

void need_eal() {
  static dpdk::Eal* eal = [] {
    const std::vector<std::string> args = {
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--file-prefix=conduit-unit-engine-" + std::to_string(getpid()),
        "-l",
        "0",
        "--log-level=lib.eal:error",
        "--log-level=pmd.*:error"};
    try {
      return new dpdk::Eal(args);  // never destroyed; Eal removes its runtime directory at exit
    } catch (const dpdk::DpdkError& e) {
      std::printf("skip: DPDK EAL cannot start here: %s\n", e.what());
      std::exit(77);
    }
  }();
  (void)eal;
}

constexpr uint32_t kLkey = 0x101;
constexpr uint32_t kRkey = 0x202;
constexpr uint64_t kIova = 0x7000'0000;

// One host: a port, an engine, one client region with one QP and one CQ.
struct Host {
  std::unique_ptr<dpdk::Port> port;
  std::unique_ptr<control::EngineChannel> channel;
  std::unique_ptr<engine::Engine> engine;
  shm::Region region;
  shm::SpscProducer<conduit_shm_send_wr> sq;
  shm::SpscProducer<conduit_shm_recv_wr> rq;
  shm::SpscConsumer<conduit_shm_cqe> cq;
  uint32_t qpn = 0;
  uint64_t cookie = 0;

  uint8_t* arena() const { return region.arena(); }

  void submit(control::EngineCommand cmd) {
    cmd.cookie = ++cookie;
    cmd.client_id = 1;
    REQUIRE(channel->submit(cmd));
  }
};

// port.roce_udp_port of the engines make_engine builds (a test that changes it puts it back).
uint16_t g_roce_udp_port = wire::kRoceUdpPort;
// With it, make_engine gives each host port.address6 fe80::c0:MAC_LOW/64 (RoCEv2 over IPv6);
// a test that sets it puts it back.
bool g_ipv6 = false;
// While one is alive, hosts make_engine builds speak IPv6 (g_ipv6), put back when the scope
// ends, a failed REQUIRE included.
struct Ipv6Hosts {
  Ipv6Hosts() { g_ipv6 = true; }
  ~Ipv6Hosts() { g_ipv6 = false; }
  Ipv6Hosts(const Ipv6Hosts&) = delete;
  Ipv6Hosts& operator=(const Ipv6Hosts&) = delete;
};
// Port MTU for make_engine (0: the device's, 1500 for ring ports); a test that sets it puts it
// back.
uint16_t g_port_mtu = 0;
// port.vlan for make_engine (none: untagged); Fixture::Options sets it per host.
std::optional<uint16_t> g_vlan;
bool g_priority_tagging = false;
// With g_ipv6 too, host addresses are global instead, each in its own /64
// (2001:db8:0:MAC_LOW::c0:MAC_LOW): hosts reach each other through routers only.
bool g_ipv6_global = false;
// Called by make_engine with each engine's configuration and MAC low byte before the engine is
// made (a test that sets it puts it back).
std::function<void(engine::EngineConfig&, uint8_t)> g_engine_config_hook;
net::Ipv6Addr host_addr6(uint8_t mac_low) {
  if (g_ipv6_global) {
    return net::Ipv6Addr{
        {0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, mac_low, 0, 0, 0, 0, 0, 0xC0, 0, mac_low}};
  }
  return net::Ipv6Addr{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, mac_low}};
}

// The port, channel and engine of a host, no client yet.
void make_engine(Host& h, const std::string& port_name, net::Ipv4Addr addr, uint8_t mac_low,
                 cc::ControllerKind cc_kind, engine::IdleMode idle_mode = engine::IdleMode::kSpin,
                 uint64_t class_max_rate_bps = 0) {
  dpdk::PortConfig pc;
  pc.device = port_name;
  pc.rx_ring_size = 512;
  pc.tx_ring_size = 512;
  pc.mbuf_count = 4095;
  pc.mbuf_cache = 64;
  pc.mtu_bytes = g_port_mtu;
  h.port = std::make_unique<dpdk::Port>(pc);
  REQUIRE(control::EngineChannel::create(64, &h.channel) == 0);

  engine::EngineConfig ec;
  // Ring ports have no MAC of their own; any locally administered one will do.
  ec.net.mac = net::MacAddr{{0x02, 0, 0, 0, 0, mac_low}};
  ec.net.addr = addr;
  ec.net.prefix_len = 24;
  if (g_ipv6) {
    ec.net.addr6 = host_addr6(mac_low);
    ec.net.link_mtu = h.port->mtu_bytes();
  }
  ec.net.vlan_id = g_vlan;
  ec.priority_tagging = g_priority_tagging;
  ec.roce_udp_port = g_roce_udp_port;
  ec.net.udp_ports = {g_roce_udp_port, ec.cm_udp_port};
  ec.idle_mode = idle_mode;
  // Paced sleeps stay on however late this loaded machine wakes the engine: the test that
  // counts them must not depend on the scheduler (the gate has its own tests).
  ec.paced_sleep_late_us = 1'000'000;
  engine::TrafficClassSpec tc;
  tc.name = "default";
  tc.cc.kind = cc_kind;
  tc.sched.max_rate_bps = class_max_rate_bps;
  ec.classes.push_back(tc);
  if (g_engine_config_hook) g_engine_config_hook(ec, mac_low);
  h.engine = std::make_unique<engine::Engine>(ec, *h.port, *h.channel);
}

void make_host(Host& h, const std::string& port_name, net::Ipv4Addr addr, uint32_t qpn,
               cc::ControllerKind cc_kind = cc::ControllerKind::kNone,
               engine::IdleMode idle_mode = engine::IdleMode::kSpin,
               uint64_t class_max_rate_bps = 0) {
  make_engine(h, port_name, addr, static_cast<uint8_t>(qpn), cc_kind, idle_mode,
              class_max_rate_bps);
  shm::RegionConfig rc;
  rc.max_qps = 2;
  rc.max_cqs = 2;
  rc.arena_bytes = 8u << 20;
  rc.huge_pages = shm::HugePages::kNever;
  REQUIRE(shm::Region::create(rc, &h.region) == 0);
  h.sq = h.region.sq(0).producer(0);
  h.rq = h.region.rq(0).producer(0);
  h.cq = h.region.cq(0).consumer(0);
  h.qpn = qpn;

  control::EngineCommand c;
  c.op = control::EngineOp::kAddClient;
  c.region = h.region.base();
  c.layout = &h.region.layout();
  h.submit(c);
  c = {};
  c.op = control::EngineOp::kAddCq;
  c.cq_slot = 0;
  h.submit(c);
  c = {};
  c.op = control::EngineOp::kAddMr;
  c.lkey = kLkey;
  c.rkey = kRkey;
  c.access = shm::kMrLocalWrite | shm::kMrRemoteWrite | shm::kMrRemoteRead;
  c.region_offset = h.region.layout().arena_offset;
  c.length = h.region.arena_size();
  c.iova = kIova;
  h.submit(c);
  c = {};
  c.op = control::EngineOp::kAddQp;
  c.qpn = qpn;
  c.qp_slot = 0;
  std::strcpy(c.traffic_class, "default");
  h.submit(c);
}

void connect(Host& h, const Host& peer, net::Ipv4Addr peer_addr) {
  control::EngineCommand c;
  c.op = control::EngineOp::kModifyQp;
  c.qpn = h.qpn;
  c.attr.mask = proto::kAttrState | proto::kAttrAccess;
  c.attr.state = proto::QpState::kInit;
  c.attr.access = proto::kAccessAll;
  h.submit(c);
  c.attr = {};
  c.attr.mask = proto::kAttrState | proto::kAttrPathMtu | proto::kAttrDestQpn | proto::kAttrRqPsn |
                proto::kAttrDgid | proto::kAttrMinRnrTimer;
  c.attr.state = proto::QpState::kRtr;
  c.attr.path_mtu = 3;  // 1024 B
  c.attr.dest_qpn = peer.qpn;
  c.attr.rq_psn = 0xFFFFF0;  // PSNs wrap during the test
  c.attr.min_rnr_timer = 1;
  c.attr.dgid[10] = c.attr.dgid[11] = 0xFF;
  c.attr.dgid[12] = static_cast<uint8_t>(peer_addr.value >> 24);
  c.attr.dgid[13] = static_cast<uint8_t>(peer_addr.value >> 16);
  c.attr.dgid[14] = static_cast<uint8_t>(peer_addr.value >> 8);
  c.attr.dgid[15] = static_cast<uint8_t>(peer_addr.value);
  if (g_ipv6) {
    // The peer's address6 (its MAC's low byte is its QPN); a QP of this host: ::1, as a
    // client names its own host.
    c.attr.dgid = peer_addr == h.engine->net().config().addr
                      ? net::Ipv6Addr{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}.bytes
                      : host_addr6(static_cast<uint8_t>(peer.qpn)).bytes;
  }
  h.submit(c);
  c.attr = {};
  c.attr.mask = proto::kAttrState | proto::kAttrSqPsn | proto::kAttrTimeout | proto::kAttrRetryCnt |
                proto::kAttrRnrRetry;
  c.attr.state = proto::QpState::kRts;
  c.attr.sq_psn = 0xFFFFF0;
  c.attr.timeout = 14;
  c.attr.retry_cnt = 7;
  c.attr.rnr_retry = 7;
  h.submit(c);
}

// Runs both engines until pred() or the deadline; returns pred().
template <class Pred>
bool run_until(Host& a, Host& b, Pred pred, uint64_t budget_ms = 5000) {
  const uint64_t deadline = engine::tsc_now_ns() + budget_ms * 1'000'000;
  while (!pred()) {
    const uint64_t now = engine::tsc_now_ns();
    if (now > deadline) return false;
    a.engine->poll_once(now);
    b.engine->poll_once(now);
  }
  return true;
}

// Every control command was acknowledged with status 0.
void expect_acks_ok(Host& h) {
  control::EngineEvent ev[64];
  uint32_t n;
  while ((n = h.channel->poll_events(ev, 64)) > 0) {
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].kind == control::EngineEventKind::kAck) {
        INFO("command cookie " << ev[i].cookie);
        CHECK(ev[i].status == 0);
      }
    }
  }
}

// Adds CQ 0 of `h` again, now with a wakeup pipe for the engine to kick: `ours` is the end it
// writes, `theirs` the client's (both stay the caller's).
void add_cq0_wakeup(Host& h, shm::WakeFd& ours, shm::WakeFd& theirs) {
  REQUIRE(shm::WakeFd::create(shm::WakeFd::Kind::kPipe, &ours, &theirs) == 0);
  control::EngineCommand c;
  c.op = control::EngineOp::kAddCq;
  c.cq_slot = 0;
  c.event_fd = ours.fd();
  h.submit(c);
}

struct Fixture {
  rte_ring* ab = nullptr;
  rte_ring* ba = nullptr;
  Host a, b;
  const net::Ipv4Addr addr_a = net::Ipv4Addr::from_octets(198, 18, 0, 1);
  const net::Ipv4Addr addr_b = net::Ipv4Addr::from_octets(198, 18, 0, 2);

  // ring_slots: the rte_ring between the ports (one direction), a power of two; it holds
  // one frame less. connect_qps false: the QPs stay in RESET (the connection manager
  // connects them).
  struct Options {
    cc::ControllerKind cc_kind = cc::ControllerKind::kNone;
    unsigned ring_slots = 1024;
    bool connect_qps = true;
    engine::IdleMode idle_mode = engine::IdleMode::kSpin;
    uint64_t class_max_rate_bps = 0;      // the default class's max rate (0: none)
    uint16_t port_mtu_a = 0;              // a's port MTU, if not 0 (else g_port_mtu, as b's)
    std::optional<uint16_t> vlan_a = {};  // a's port.vlan (none: untagged)
    std::optional<uint16_t> vlan_b = {};  // b's
    bool priority_tagging = false;        // both: port.priority_tagging
  };
  explicit Fixture(cc::ControllerKind cc_kind = cc::ControllerKind::kNone)
      : Fixture(Options{cc_kind}) {}
  explicit Fixture(const Options& o) {
    const unsigned ring_slots = o.ring_slots;
    const bool connect_qps = o.connect_qps;
    const cc::ControllerKind cc_kind = o.cc_kind;
    need_eal();
    static int instances = 0;  // port and ring names must be unique per process
    const int id = ++instances;
    const std::string s = std::to_string(id);
    ab = rte_ring_create(("ab" + s).c_str(), ring_slots, SOCKET_ID_ANY,
                         RING_F_SP_ENQ | RING_F_SC_DEQ);
    ba = rte_ring_create(("ba" + s).c_str(), ring_slots, SOCKET_ID_ANY,
                         RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(ab != nullptr);
    REQUIRE(ba != nullptr);
    // Port A receives from ba and sends into ab; port B the other way round.
    REQUIRE(rte_eth_from_rings(("eng_a" + s).c_str(), &ba, 1, &ab, 1, SOCKET_ID_ANY) >= 0);
    REQUIRE(rte_eth_from_rings(("eng_b" + s).c_str(), &ab, 1, &ba, 1, SOCKET_ID_ANY) >= 0);
    const uint16_t port_mtu = g_port_mtu;
    if (o.port_mtu_a != 0) g_port_mtu = o.port_mtu_a;
    g_vlan = o.vlan_a;
    g_priority_tagging = o.priority_tagging;
    make_host(a, "net_ring_eng_a" + s, addr_a, 0x11, cc_kind, o.idle_mode, o.class_max_rate_bps);
    g_port_mtu = port_mtu;
    g_vlan = o.vlan_b;
    make_host(b, "net_ring_eng_b" + s, addr_b, 0x22, cc_kind, o.idle_mode, o.class_max_rate_bps);
    g_vlan.reset();
    g_priority_tagging = false;
    if (!connect_qps) return;
    connect(a, b, addr_b);
    connect(b, a, addr_a);
  }
};

// What each side saw, for the failure message.
std::string describe(const Host& h) {
  const auto& c = h.engine->counters();
  const auto& n = h.engine->net().counters();
  std::string s = "qpn " + std::to_string(h.qpn) + ": rx_frames " + std::to_string(c.rx_frames) +
                  " rx_roce " + std::to_string(c.rx_roce) + " unknown_qp " +
                  std::to_string(c.rx_unknown_qp) + " tx_frames " + std::to_string(c.tx_frames) +
                  " net_drops " + std::to_string(n.total_drops()) + " arp_req_rx " +
                  std::to_string(n.rx_arp_requests) + " arp_rep_rx " +
                  std::to_string(n.rx_arp_replies);
  for (size_t i = 0; i < c.rx_wire_drops.size(); ++i) {
    if (c.rx_wire_drops[i] != 0) {
      s += std::string(" wire_drop[") + wire::drop_reason_name(static_cast<wire::DropReason>(i)) +
           "]=" + std::to_string(c.rx_wire_drops[i]);
    }
  }
  for (size_t i = 0; i < n.rx_drops.size(); ++i) {
    if (n.rx_drops[i] != 0) {
      s += std::string(" net_drop[") + net::rx_drop_name(static_cast<net::RxDrop>(i)) +
           "]=" + std::to_string(n.rx_drops[i]);
    }
  }
  return s;
}

conduit_shm_cqe wait_cqe(Fixture& f, Host& h) {
  conduit_shm_cqe cqe{};
  if (!run_until(f.a, f.b, [&] { return h.cq.try_dequeue(&cqe); })) {
    FAIL("no completion; " << describe(f.a) << "; " << describe(f.b));
  }
  return cqe;
}

void post_recv(Host& h, uint64_t wr_id, uint64_t offset, uint32_t len) {
  conduit_shm_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.num_sge = 1;
  wr.sg_list[0] = {offset, len, kLkey};
  REQUIRE(h.rq.try_enqueue(wr));
}

void post_send(Host& h, uint64_t wr_id, uint8_t opcode, uint64_t offset, uint32_t len,
               uint64_t remote_offset = 0, uint32_t imm = 0) {
  conduit_shm_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.flags = CONDUIT_SHM_SEND_SIGNALED;
  wr.num_sge = 1;
  wr.u.sg_list[0] = {offset, len, kLkey};
  if (opcode == CONDUIT_SHM_WR_SEND_WITH_IMM || opcode == CONDUIT_SHM_WR_RDMA_WRITE_WITH_IMM) {
    wr.imm_data = imm;
  }
  if (opcode >= CONDUIT_SHM_WR_RDMA_WRITE) {
    wr.remote_addr = kIova + remote_offset;
    wr.rkey = kRkey;
  }
  REQUIRE(h.sq.try_enqueue(wr));
}

void fill_random(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

}  // namespace

TEST_CASE("engine: SEND, WRITE with immediate and READ between two engines", "[engine]") {
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);

  const uint32_t len = 300'000;  // many PMTU segments, PSNs wrap
  fill_random(f.a.arena(), len, 7);

  SECTION("SEND lands in the posted receive, byte-exact") {
    post_recv(f.b, 77, 1 << 20, len);
    post_send(f.a, 1, CONDUIT_SHM_WR_SEND_WITH_IMM, 0, len, 0, 0xABCD1234);
    const conduit_shm_cqe rx = wait_cqe(f, f.b);
    CHECK(rx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(rx.wr_id == 77);
    CHECK(rx.opcode == CONDUIT_SHM_WC_RECV);
    CHECK(rx.byte_len == len);
    CHECK((rx.flags & CONDUIT_SHM_WC_WITH_IMM) != 0);
    CHECK(rx.imm_data == 0xABCD1234);
    CHECK(rx.src_qp == f.a.qpn);
    const conduit_shm_cqe tx = wait_cqe(f, f.a);
    CHECK(tx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(tx.wr_id == 1);
    CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), len) == 0);
  }

  SECTION("RDMA WRITE places bytes at the remote address") {
    post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
    const conduit_shm_cqe tx = wait_cqe(f, f.a);
    CHECK(tx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(tx.opcode == CONDUIT_SHM_WC_RDMA_WRITE);
    CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  }

  SECTION("RDMA READ fetches remote bytes") {
    fill_random(f.b.arena() + (3 << 20), len, 9);
    post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_READ, 4 << 20, len, 3 << 20);
    const conduit_shm_cqe tx = wait_cqe(f, f.a);
    CHECK(tx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(tx.opcode == CONDUIT_SHM_WC_RDMA_READ);
    CHECK(std::memcmp(f.a.arena() + (4 << 20), f.b.arena() + (3 << 20), len) == 0);
  }

  SECTION("a hostile work request gets an error completion, not a crash") {
    post_send(f.a, 4, CONDUIT_SHM_WR_SEND, f.a.region.arena_size() - 10, 100);  // beyond the MR
    const conduit_shm_cqe tx = wait_cqe(f, f.a);
    CHECK(tx.wr_id == 4);
    CHECK(tx.status == CONDUIT_SHM_WC_LOC_PROT_ERR);
    conduit_shm_send_wr garbage;
    std::memset(&garbage, 0xA5, sizeof(garbage));
    REQUIRE(f.a.sq.try_enqueue(garbage));
    const conduit_shm_cqe bad = wait_cqe(f, f.a);
    CHECK(bad.status != CONDUIT_SHM_WC_SUCCESS);
    // The QP still works afterwards.
    post_send(f.a, 5, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 5 << 20);
    CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  }

  CHECK(f.a.engine->counters().tx_frames > 0);
  CHECK(f.b.engine->net().counters().rx_arp_requests +
            f.a.engine->net().counters().rx_arp_requests >
        0);
}

namespace {
// Calls fn(bytes, length) for each frame waiting in `ring`, in order; the ring keeps them (fn
// may change their bytes in place).
template <class Fn>
void for_each_frame(rte_ring* ring, Fn fn) {
  void* objs[1024];
  const unsigned n = rte_ring_dequeue_burst(ring, objs, 1024, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    auto* m = static_cast<rte_mbuf*>(objs[i]);
    fn(rte_pktmbuf_mtod(m, uint8_t*), size_t{m->data_len});
  }
  REQUIRE(rte_ring_enqueue_bulk(ring, objs, n, nullptr) == n);
}

// The IPv6 flow label of the first RoCE frame (to UDP 4791, untagged) waiting in `ring`, or
// -1 when there is none; the ring keeps its frames.
int64_t first_ipv6_roce_flow_label(rte_ring* ring) {
  int64_t label = -1;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    if (label < 0 && len >= 62 && f[12] == 0x86 && f[13] == 0xDD && f[20] == 17 &&
        (f[56] << 8 | f[57]) == wire::kRoceUdpPort) {
      label = (f[15] & 0x0F) << 16 | f[16] << 8 | f[17];
    }
  });
  return label;
}
}  // namespace

TEST_CASE("engine: RoCEv2 over IPv6: neighbour discovery, then SEND, WRITE and READ byte-exact",
          "[engine][ipv6]") {
  const Ipv6Hosts ipv6_hosts;
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 200'000;
  fill_random(f.a.arena(), len, 17);
  fill_random(f.b.arena() + (3 << 20), len, 19);
  post_recv(f.b, 7, 1 << 20, len);
  post_send(f.a, 1, CONDUIT_SHM_WR_SEND, 0, len);
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_READ, 4 << 20, len, 3 << 20);
  const conduit_shm_cqe rx = wait_cqe(f, f.b);
  CHECK(rx.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(rx.byte_len == len);
  for (uint64_t id = 1; id <= 3; ++id) {
    const conduit_shm_cqe tx = wait_cqe(f, f.a);
    CHECK(tx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(tx.wr_id == id);
  }
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), len) == 0);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  CHECK(std::memcmp(f.a.arena() + (4 << 20), f.b.arena() + (3 << 20), len) == 0);
  const net::NetCounters& na = f.a.engine->net().counters();
  const net::NetCounters& nb = f.b.engine->net().counters();
  INFO(describe(f.a) << "; " << describe(f.b));
  // Each side resolved the other with a Neighbor Solicitation, and every RoCE packet went
  // over IPv6: nothing over IPv4, so no ARP for the other's IPv4 address.
  CHECK(na.tx_ns + nb.tx_ns >= 2);
  CHECK(na.rx_ns >= 1);
  CHECK(nb.rx_ns >= 1);
  CHECK(na.rx_na >= 1);
  CHECK(nb.rx_na >= 1);
  CHECK(na.tx_arp_requests == 0);
  CHECK(nb.tx_arp_requests == 0);
  CHECK(nb.rx_udp6_delivered >= len / 1024);
  CHECK(na.rx_udp6_delivered > 0);
  // The receive fast path takes IPv6 frames too: all but the first of each
  // QP's frames from its peer (data on b, ACKs and READ responses on a),
  // counted by the stack as the full path counts them.
  const engine::EngineCounters& ea = f.a.engine->counters();
  const engine::EngineCounters& eb = f.b.engine->counters();
  CHECK(eb.rx_roce_fast > 0);
  CHECK(eb.rx_roce_fast + 2 >= eb.rx_roce);
  CHECK(ea.rx_roce_fast > 0);
  CHECK(ea.rx_roce_fast + 2 >= ea.rx_roce);
  CHECK(nb.rx_udp6_delivered == eb.rx_roce);
  CHECK(f.a.engine->counters().rx_wrong_peer == 0);
  CHECK(f.b.engine->counters().rx_wrong_peer == 0);

  // The QP's frames carry Linux's flow label for the QPN pair (RFC 6437: stable per flow).
  post_send(f.a, 4, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 2 << 20);
  int64_t label = -1;
  REQUIRE(run_until(f.a, f.a, [&] { return (label = first_ipv6_roce_flow_label(f.ab)) >= 0; }));
  CHECK(label == wire::flow_label_for_qp(f.a.qpn, f.b.qpn));
  CHECK(label != 0);
  CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
}

TEST_CASE("engine: a non-default port.roce_udp_port carries data, ACKs and READ responses",
          "[engine]") {
  // Both ends listen on 4800 only: a frame sent to 4791 (the IANA port) is not theirs.
  struct RestorePort {
    ~RestorePort() { g_roce_udp_port = wire::kRoceUdpPort; }
  } restore;
  g_roce_udp_port = 4800;
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 20'000;
  fill_random(f.a.arena(), len, 11);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 1 << 20);
  const conduit_shm_cqe w = wait_cqe(f, f.a);
  CHECK(w.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), len) == 0);
  fill_random(f.b.arena() + (2 << 20), len, 12);
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_READ, 3 << 20, len, 2 << 20);
  const conduit_shm_cqe r = wait_cqe(f, f.a);
  CHECK(r.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + (3 << 20), f.b.arena() + (2 << 20), len) == 0);
  CHECK(f.a.engine->counters().rx_roce > 0);
  CHECK(f.b.engine->counters().rx_roce > 0);
}

// One host, one client with QPs 0x31 (slot 0) and 0x32 (slot 1) connected to
// each other through the loopback path, commands applied.
void make_loopback_pair(Host& h, const std::string& port_name) {
  static int instances = 0;  // port names must be unique per process (GENERATE reruns)
  make_host(h, port_name + "_" + std::to_string(++instances),
            net::Ipv4Addr::from_octets(198, 18, 0, 9), 0x31);
  // A second QP in slot 1 of the same client, same CQ.
  control::EngineCommand c;
  c.op = control::EngineOp::kAddQp;
  c.qpn = 0x32;
  c.qp_slot = 1;
  std::strcpy(c.traffic_class, "default");
  h.submit(c);
  const net::Ipv4Addr self = net::Ipv4Addr::from_octets(198, 18, 0, 9);
  // connect() reads only the peer's QPN.
  Host peer_stub;
  peer_stub.qpn = 0x32;
  connect(h, peer_stub, self);
  const uint32_t first = h.qpn;
  h.qpn = 0x32;
  Host first_stub;
  first_stub.qpn = first;
  connect(h, first_stub, self);
  h.qpn = first;
  for (int i = 0; i < 1000; ++i) h.engine->poll_once(engine::tsc_now_ns());  // apply commands
  expect_acks_ok(h);
}

TEST_CASE("engine: two QPs of one host talk through the loopback path", "[engine]") {
  need_eal();
  // A single net_ring port; nothing may leave through it. Over IPv4 and, with IPv6 GIDs
  // (::1, this host's address6), over IPv6.
  const bool v6 = GENERATE(false, true);
  INFO((v6 ? "IPv6" : "IPv4"));
  struct RestoreV4 {
    ~RestoreV4() { g_ipv6 = false; }
  } restore;
  g_ipv6 = v6;
  Host h;
  make_loopback_pair(h, "net_ring_loop0");
  g_ipv6 = false;
  auto rq1 = h.region.rq(1).producer(0);
  auto run = [&](auto pred) {
    const uint64_t deadline = engine::tsc_now_ns() + 5'000'000'000ull;
    while (!pred()) {
      if (engine::tsc_now_ns() > deadline) return false;
      h.engine->poll_once(engine::tsc_now_ns());
    }
    return true;
  };
  const uint32_t len = 100'000;
  fill_random(h.arena(), len, 3);
  conduit_shm_recv_wr rwr{};
  rwr.wr_id = 9;
  rwr.num_sge = 1;
  rwr.sg_list[0] = {1u << 20, len, kLkey};
  REQUIRE(rq1.try_enqueue(rwr));
  post_send(h, 8, CONDUIT_SHM_WR_SEND, 0, len);
  int seen = 0;
  bool recv_ok = false, send_ok = false;
  REQUIRE(run([&] {
    conduit_shm_cqe cqe;
    while (h.cq.try_dequeue(&cqe)) {
      ++seen;
      if (cqe.wr_id == 9) recv_ok = cqe.status == CONDUIT_SHM_WC_SUCCESS && cqe.byte_len == len;
      if (cqe.wr_id == 8) send_ok = cqe.status == CONDUIT_SHM_WC_SUCCESS;
    }
    return seen == 2;
  }));
  CHECK(recv_ok);
  CHECK(send_ok);
  CHECK(std::memcmp(h.arena(), h.arena() + (1 << 20), len) == 0);
  CHECK(h.engine->counters().loopback_frames > 0);
  CHECK(h.engine->counters().tx_frames == 0);
  CHECK(h.engine->net().counters().tx_ns == 0);  // no neighbour discovery for ourselves
  CHECK(h.engine->counters().rx_wrong_peer == 0);
}

TEST_CASE("engine: a QP removed because its client went away fails its local peer", "[engine]") {
  need_eal();
  Host h;
  make_loopback_pair(h, "net_ring_gone0");
  // QP 0x31 waits for a SEND that will never come.
  conduit_shm_recv_wr rwr{};
  rwr.wr_id = 77;
  rwr.num_sge = 1;
  rwr.sg_list[0] = {0, 4096, kLkey};
  REQUIRE(h.rq.try_enqueue(rwr));
  for (int i = 0; i < 100; ++i) h.engine->poll_once(engine::tsc_now_ns());
  conduit_shm_cqe cqe{};
  CHECK_FALSE(h.cq.try_dequeue(&cqe));

  control::EngineCommand c;
  c.op = control::EngineOp::kRemoveQp;
  c.qpn = 0x32;
  c.qp_slot = 1;
  const bool owner_gone = GENERATE(false, true);
  c.owner_gone = owner_gone;
  h.submit(c);
  for (int i = 0; i < 100; ++i) h.engine->poll_once(engine::tsc_now_ns());
  expect_acks_ok(h);
  if (owner_gone) {
    // The peer's receive is flushed at once and the QP reported in ERROR.
    REQUIRE(h.cq.try_dequeue(&cqe));
    CHECK(cqe.wr_id == 77);
    CHECK(cqe.status == CONDUIT_SHM_WC_WR_FLUSH_ERR);
    CHECK(h.engine->counters().peers_failed == 1);
  } else {
    // An ordinary destroy leaves the peer alone (verbs semantics).
    CHECK_FALSE(h.cq.try_dequeue(&cqe));
    CHECK(h.engine->counters().peers_failed == 0);
  }
}

TEST_CASE("engine: WRs posted before their QP's removal was taken complete flushed", "[engine]") {
  // conduitd's stop releases every client: kRemoveQp (owner_gone) for each QP. The engine
  // takes commands before the clients' rings in a loop, so WRs a client posted just before
  // were never read: they got no completion at all, and a client still polling its CQ
  // (its region stays mapped) waited for them in vain. Posted to the QP in ERROR they
  // complete with WR_FLUSH_ERR, as verbs' do; none is sent.
  Fixture f;
  REQUIRE_FALSE(run_until(
      f.a, f.b, [] { return false; }, 50));  // apply commands
  expect_acks_ok(f.a);
  post_recv(f.a, 11, 0, 4096);
  post_send(f.a, 12, CONDUIT_SHM_WR_SEND, 4096, 64);
  post_send(f.a, 13, CONDUIT_SHM_WR_RDMA_WRITE, 8192, 64, 0);
  const uint64_t tx_before = f.a.engine->counters().tx_frames;
  control::EngineCommand c;
  c.op = control::EngineOp::kRemoveQp;
  c.qpn = f.a.qpn;
  c.qp_slot = 0;
  c.owner_gone = true;
  f.a.submit(c);
  f.a.engine->poll_once(engine::tsc_now_ns());
  std::map<uint64_t, uint8_t> status;
  for (conduit_shm_cqe cqe{}; f.a.cq.try_dequeue(&cqe);) status[cqe.wr_id] = cqe.status;
  CHECK(status.size() == 3);
  CHECK(status[11] == CONDUIT_SHM_WC_WR_FLUSH_ERR);
  CHECK(status[12] == CONDUIT_SHM_WC_WR_FLUSH_ERR);
  CHECK(status[13] == CONDUIT_SHM_WC_WR_FLUSH_ERR);
  for (int i = 0; i < 100; ++i) f.a.engine->poll_once(engine::tsc_now_ns());
  CHECK(f.a.engine->counters().tx_frames == tx_before);
}

namespace {

// The acks h's engine posted since the last call, by command cookie.
std::map<uint64_t, control::EngineEvent> take_acks(Host& h) {
  std::map<uint64_t, control::EngineEvent> acks;
  control::EngineEvent ev[64];
  for (uint32_t n; (n = h.channel->poll_events(ev, 64)) > 0;) {
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].kind == control::EngineEventKind::kAck) acks[ev[i].cookie] = ev[i];
    }
  }
  return acks;
}

}  // namespace

TEST_CASE("engine: completions a full CQ loses are counted in its wakeup line for the client",
          "[engine]") {
  // Completions that cannot wait for room (a rejected WR's; the WR_FLUSH_ERR ones of a
  // removed QP's outstanding WRs, as conduitd's stop removes every QP) are lost when the CQ
  // ring is full. They were counted only in the engine (cqe_dropped; a removal's not even
  // there), so the client never learnt that some WRs would never complete. Now the CQ's
  // wakeup line counts them (cqes_lost, the client's conduit_poll_cq -EOVERFLOW) and the CQ
  // is kicked; the removal's ack reports them, the client's release's ack the total.
  need_eal();
  Host h;
  make_loopback_pair(h, "net_ring_ovr0");
  const uint32_t depth = h.region.layout().cq_depth;
  conduit_shm_wakeup* line = h.region.cq_wakeup(0);
  REQUIRE(line->cqes_lost == 0u);
  shm::WakeFd ours, efd;
  add_cq0_wakeup(h, ours, efd);
  control::EngineCommand c;
  // QP 0x32 holds four receives: outstanding WRs its removal flushes.
  auto rq1 = h.region.rq(1).producer(0);
  for (uint64_t i = 0; i < 4; ++i) {
    conduit_shm_recv_wr rwr{};
    rwr.wr_id = 1000 + i;
    rwr.num_sge = 1;
    rwr.sg_list[0] = {i * 4096, 4096, kLkey};
    REQUIRE(rq1.try_enqueue(rwr));
  }
  for (int i = 0; i < 10; ++i) h.engine->poll_once(engine::tsc_now_ns());
  expect_acks_ok(h);
  REQUIRE(h.region.rq(1).ctrl->cons == 4u);  // taken by the QP

  // Sends with an unknown lkey: each rejected, its error completion written at once.
  auto post_bad = [&](uint32_t n, uint64_t first_id) {
    for (uint32_t i = 0; i < n;) {
      conduit_shm_send_wr wr{};
      wr.wr_id = first_id + i;
      wr.opcode = CONDUIT_SHM_WR_SEND;
      wr.flags = CONDUIT_SHM_SEND_SIGNALED;
      wr.num_sge = 1;
      wr.u.sg_list[0] = {0, 64, 0xBAD00};
      if (h.sq.try_enqueue(wr)) {
        ++i;
      } else {
        h.engine->poll_once(engine::tsc_now_ns());
      }
    }
    for (int i = 0; i < 10; ++i) h.engine->poll_once(engine::tsc_now_ns());
  };
  post_bad(depth, 0);  // the CQ is full now, nothing lost yet
  CHECK(h.engine->counters().wr_rejected == depth);
  CHECK(h.engine->counters().cqe_dropped == 0);
  CHECK(line->cqes_lost == 0u);
  efd.drain();
  shm::consumer_arm_wakeup(line);  // the client sleeps on the full CQ
  post_bad(3, depth);
  CHECK(h.engine->counters().wr_rejected == depth + 3);
  CHECK(h.engine->counters().cqe_dropped == 3);
  CHECK(line->cqes_lost == 3u);
  CHECK(efd.drain() >= 1);  // kicked: the overrun wakes it
  CHECK(line->needs_wakeup == 0u);

  // The client may write anything there: the engine keeps its own count.
  line->cqes_lost = 0xDEADBEEF;
  // QP 0x32 removed as at conduitd's stop: its four flushed receives find the CQ full.
  c = {};
  c.op = control::EngineOp::kRemoveQp;
  c.qpn = 0x32;
  c.qp_slot = 1;
  c.owner_gone = true;
  h.submit(c);
  const uint64_t remove_qp_cookie = h.cookie;
  shm::consumer_arm_wakeup(line);
  for (int i = 0; i < 10; ++i) h.engine->poll_once(engine::tsc_now_ns());
  CHECK(h.engine->counters().cqe_dropped == 3 + 4);
  CHECK(line->cqes_lost == 3u + 4u);
  CHECK(efd.drain() >= 1);
  auto acks = take_acks(h);
  REQUIRE(acks.count(remove_qp_cookie) == 1);
  CHECK(acks[remove_qp_cookie].status == 0);
  CHECK(acks[remove_qp_cookie].cqes_lost == 4u);

  // The ring holds the first depth rejections, in order, and nothing else.
  conduit_shm_cqe cqe{};
  uint64_t next = 0;
  while (h.cq.try_dequeue(&cqe)) {
    CHECK(cqe.wr_id == next);
    ++next;
  }
  CHECK(next == depth);

  // With room again, the removal of QP 0x31 (its peer failed it: no WR outstanding) loses
  // nothing; the client's release reports its total.
  c = {};
  c.op = control::EngineOp::kRemoveClient;
  h.submit(c);
  const uint64_t remove_client_cookie = h.cookie;
  for (int i = 0; i < 10; ++i) h.engine->poll_once(engine::tsc_now_ns());
  acks = take_acks(h);
  REQUIRE(acks.count(remove_client_cookie) == 1);
  CHECK(acks[remove_client_cookie].cqes_lost == 4u);
  CHECK(h.engine->counters().cqe_dropped == 3 + 4);
}

TEST_CASE("engine: impossible ring indices cut the client off and tell the control thread",
          "[engine]") {
  need_eal();
  Host h;
  make_loopback_pair(h, "net_ring_cut0");
  auto* ctrl = h.region.sq(0).ctrl;
  const uint32_t cons = shm::load_cons(ctrl);
  // More entries than the ring has slots: no producer can have written that.
  std::atomic_ref<uint32_t>(ctrl->prod)
      .store(cons + h.region.layout().sq_depth + 7, std::memory_order_release);
  bool broken_event = false;
  for (int i = 0; i < 100 && !broken_event; ++i) {
    h.engine->poll_once(engine::tsc_now_ns());
    control::EngineEvent ev[16];
    const uint32_t n = h.channel->poll_events(ev, 16);
    for (uint32_t k = 0; k < n; ++k) {
      if (ev[k].kind == control::EngineEventKind::kClientBroken) {
        CHECK(ev[k].client_id == 1);
        broken_event = true;
      }
    }
  }
  CHECK(broken_event);
  CHECK(h.engine->counters().clients_broken == 1);
  // The engine no longer reads the client's rings, even once the indices look
  // sane again: a valid entry stays unread and gets no completion.
  post_send(h, 5, CONDUIT_SHM_WR_SEND, 0, 64);  // stores prod = cons + 1
  for (int i = 0; i < 100; ++i) h.engine->poll_once(engine::tsc_now_ns());
  CHECK(shm::load_cons(ctrl) == cons);
  conduit_shm_cqe cqe{};
  while (h.cq.try_dequeue(&cqe)) CHECK(cqe.wr_id != 5);
  CHECK(h.engine->counters().clients_broken == 1);  // reported once
}

namespace {

// The IPv4 header checksum of an untagged frame, after a test changed its header.
void fix_ipv4_checksum(uint8_t* f) {
  f[24] = f[25] = 0;
  const uint16_t sum = net::ipv4_header_checksum(std::span<const uint8_t>(f + 14, 20));
  f[24] = static_cast<uint8_t>(sum >> 8);
  f[25] = static_cast<uint8_t>(sum);
}

// Sets CE on every ECT RoCE frame waiting in `ring` (a switch marking them), fixing the IPv4
// header checksum; the ICRC does not cover the ECN bits. IPv6 frames too (untagged, UDP right
// after the header): ECN is the traffic class's low two bits. Returns how many were marked.
uint32_t mark_ce(rte_ring* ring) {
  uint32_t marked = 0;
  for_each_frame(ring, [&](uint8_t* f, size_t len) {
    if (len >= 18 && f[12] == 0x81 && f[13] == 0x00) {  // tagged: the rest as if untagged
      f += 4;
      len -= 4;
    }
    const bool ipv4_udp = len >= 42 && f[12] == 0x08 && f[13] == 0x00 && f[23] == 17;
    if (ipv4_udp && (f[36] << 8 | f[37]) == wire::kRoceUdpPort && (f[15] & 3) != 0) {
      f[15] |= 3;
      fix_ipv4_checksum(f);
      ++marked;
    }
    const bool ipv6_udp = len >= 62 && f[12] == 0x86 && f[13] == 0xDD && f[20] == 17;
    if (ipv6_udp && (f[56] << 8 | f[57]) == wire::kRoceUdpPort && (f[15] & 0x30) != 0) {
      f[15] |= 0x30;
      ++marked;
    }
  });
  return marked;
}

// A WRITE of len random bytes (seeded) from a to b with every data frame CE-marked on the
// way (mark_ce between a's TX and b's RX), run until a's completion; checks its status and the
// bytes. Returns how many frames were marked.
uint32_t marked_write(Fixture& f, uint32_t len, uint32_t seed) {
  fill_random(f.a.arena(), len, seed);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  uint32_t marked = 0;
  conduit_shm_cqe cqe{};
  const uint64_t deadline = engine::tsc_now_ns() + 5'000'000'000ull;
  while (!f.a.cq.try_dequeue(&cqe)) {
    REQUIRE(engine::tsc_now_ns() < deadline);
    f.a.engine->poll_once(engine::tsc_now_ns());
    marked += mark_ce(f.ab);
    f.b.engine->poll_once(engine::tsc_now_ns());
  }
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  CHECK(marked > 0);
  return marked;
}

struct Snapshot {
  std::map<std::string, uint64_t> counters;
  std::vector<control::EngineEvent> qps;
  int32_t ack_status = 1;
};

// Sends kSnapshot and runs both engines until its ack.
Snapshot take_snapshot(Fixture& f, Host& h) {
  control::CounterSnapshot buf;
  control::EngineCommand c;
  c.op = control::EngineOp::kSnapshot;
  c.snapshot = &buf;
  h.submit(c);
  const uint64_t cookie = h.cookie;
  Snapshot out;
  REQUIRE(run_until(f.a, f.b, [&] {
    control::EngineEvent ev;
    while (h.channel->poll_events(&ev, 1) == 1) {
      if (ev.cookie != cookie) continue;
      if (ev.kind == control::EngineEventKind::kQpStats) {
        CHECK(out.ack_status == 1);  // every per-QP event comes before the ack
        out.qps.push_back(ev);
      } else if (ev.kind == control::EngineEventKind::kAck) {
        out.ack_status = ev.status;
      }
    }
    return out.ack_status != 1;
  }));
  for (uint32_t i = 0; i < buf.count; ++i) out.counters[buf.items[i].name] = buf.items[i].value;
  return out;
}

}  // namespace

TEST_CASE("engine: DCQCN over IPv6: CE in the traffic class brings CNPs, the sender slows",
          "[engine][ipv6]") {
  const Ipv6Hosts ipv6_hosts;
  Fixture f(cc::ControllerKind::kDcqcn);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint64_t line_rate = take_snapshot(f, f.a).qps.at(0).rate_bps;
  const uint32_t len = 1 << 20;
  const uint32_t marked = marked_write(f, len, 23);
  const Snapshot sa = take_snapshot(f, f.a);
  const Snapshot sb = take_snapshot(f, f.b);
  const control::EngineEvent& qa = sa.qps.at(0);
  const control::EngineEvent& qb = sb.qps.at(0);
  INFO("a: rate " << qa.rate_bps << " cnps_rx " << qa.cnps_rx << "; b: cnps_tx " << qb.cnps_tx);
  // Every marked frame was IPv6 (no IPv4 RoCE here), and so were the CNPs back.
  CHECK(sb.counters.at("engine.rx_ce_marked") == marked);
  CHECK(qb.cnps_tx > 0);
  CHECK(qa.cnps_rx > 0);
  CHECK(qa.rate_bps < line_rate);
  CHECK(sa.counters.at("net.rx_udp6_delivered") >= qa.cnps_rx);
  CHECK(sa.counters.at("net.tx_arp_requests") == 0);
}

namespace {
// A frame waiting in a ring between the ports, as the tests below look at it.
struct SeenFrame {
  bool tagged = false;
  uint16_t tci = 0;         // when tagged
  uint16_t ether_type = 0;  // after the tag, if any
  int bth_opcode = -1;      // an IPv4 RoCE frame's (UDP 4791)
};
// The frames waiting in `ring`; the ring keeps them.
std::vector<SeenFrame> frames_in(rte_ring* ring) {
  std::vector<SeenFrame> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    SeenFrame s;
    if (len < 14) return;
    if (len >= 18 && f[12] == 0x81 && f[13] == 0x00) {
      s.tagged = true;
      s.tci = static_cast<uint16_t>(f[14] << 8 | f[15]);
      f += 4;
      len -= 4;
    }
    s.ether_type = static_cast<uint16_t>(f[12] << 8 | f[13]);
    if (s.ether_type == 0x0800 && len >= 14 + 20 + 8 + 12 && f[23] == 17 &&
        (f[36] << 8 | f[37]) == wire::kRoceUdpPort) {
      s.bth_opcode = f[42];
    }
    out.push_back(s);
  });
  return out;
}
}  // namespace

TEST_CASE(
    "engine: with port.vlan every frame is tagged: ARP at PCP 0, RoCE and ACKs at the "
    "class's priority, CNPs at cnp.priority; with port.priority_tagging RoCE frames carry "
    "those PCPs in VID 0 tags and ARP goes untagged",
    "[engine][vlan]") {
  Fixture::Options o;
  o.cc_kind = cc::ControllerKind::kDcqcn;
  o.connect_qps = false;
  uint16_t vid = 0;
  SECTION("port.vlan") {
    vid = 100;
    o.vlan_a = o.vlan_b = vid;
  }
  SECTION("port.priority_tagging") { o.priority_tagging = true; }
  Fixture f(o);
  const bool vlan = vid != 0;
  const uint16_t kDataTci = static_cast<uint16_t>(3 << 13 | vid);  // the default class's 3
  const uint16_t kCnpTci = static_cast<uint16_t>(6 << 13 | vid);   // cnp.priority's default

  // A connected QP needs its peer's MAC: a's ARP request goes out first, on the VLAN with
  // PCP 0, or untagged (a priority tag is for RoCE frames only).
  connect(f.a, f.b, f.addr_b);
  connect(f.b, f.a, f.addr_a);
  std::vector<SeenFrame> first;
  for (int i = 0; i < 100 && first.empty(); ++i) {
    f.a.engine->poll_once(engine::tsc_now_ns());
    first = frames_in(f.ab);
  }
  REQUIRE_FALSE(first.empty());
  CHECK(first[0].tagged == vlan);
  if (vlan) CHECK(first[0].tci == vid);
  CHECK(first[0].ether_type == 0x0806);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);

  const uint32_t len = 64 * 1024;
  fill_random(f.a.arena(), len, 31);
  post_recv(f.b, 1, 1 << 20, len);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, len);
  CHECK(wait_cqe(f, f.b).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), len) == 0);

  // A WRITE with every data frame CE-marked: the data, the ACKs and the CNPs, each looked at
  // on its way.
  fill_random(f.a.arena(), len, 32);
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  size_t data = 0, acks = 0, cnps = 0, untagged = 0, wrong = 0;
  conduit_shm_cqe cqe{};
  const uint64_t deadline = engine::tsc_now_ns() + 5'000'000'000ull;
  while (!f.a.cq.try_dequeue(&cqe)) {
    REQUIRE(engine::tsc_now_ns() < deadline);
    f.a.engine->poll_once(engine::tsc_now_ns());
    for (const SeenFrame& s : frames_in(f.ab)) {
      if (!s.tagged && (vlan || s.bth_opcode >= 0)) ++untagged;
      if (s.bth_opcode >= 0x06 && s.bth_opcode <= 0x0B) {  // RDMA WRITE first..only
        ++data;
        if (s.tci != kDataTci) ++wrong;
      }
    }
    mark_ce(f.ab);
    f.b.engine->poll_once(engine::tsc_now_ns());
    for (const SeenFrame& s : frames_in(f.ba)) {
      if (!s.tagged && (vlan || s.bth_opcode >= 0)) ++untagged;
      if (s.bth_opcode == 0x11) {  // ACK
        ++acks;
        if (s.tci != kDataTci) ++wrong;
      } else if (s.bth_opcode == 0x81) {  // CNP
        ++cnps;
        if (s.tci != kCnpTci) ++wrong;
      }
    }
  }
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  INFO("data " << data << " acks " << acks << " cnps " << cnps);
  CHECK(data > 0);
  CHECK(acks > 0);
  CHECK(cnps > 0);
  CHECK(untagged == 0);
  CHECK(wrong == 0);
  // The tagged CNPs reached a's reaction point.
  CHECK(take_snapshot(f, f.a).qps.at(0).cnps_rx > 0);
  // The tagged data took b's receive fast path (a VLAN's or priority tags, VID 0), and
  // priority-tagged frames are counted as such on either path.
  CHECK(f.b.engine->counters().rx_roce_fast > 0);
  if (!vlan) {
    CHECK(f.b.engine->net().counters().rx_priority_tagged >= f.b.engine->counters().rx_roce);
  }
}

TEST_CASE("engine: hosts on different VLANs, or one untagged, do not hear each other",
          "[engine][vlan]") {
  Fixture::Options o;
  SECTION("VLAN 100 and VLAN 200") {
    o.vlan_a = 100;
    o.vlan_b = 200;
  }
  SECTION("VLAN 100 and untagged") { o.vlan_a = 100; }
  SECTION("untagged and VLAN 200") { o.vlan_b = 200; }
  Fixture f(o);
  post_recv(f.b, 1, 1 << 20, 64);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 64);
  conduit_shm_cqe cqe{};
  CHECK_FALSE(run_until(
      f.a, f.b, [&] { return f.b.cq.try_dequeue(&cqe); }, 300));
  // a's ARP requests arrived at b, which dropped and counted each.
  const auto& drops = f.b.engine->net().counters().rx_drops;
  CHECK(drops[static_cast<size_t>(net::RxDrop::kVlanMismatch)] > 0);
  CHECK(f.b.engine->net().counters().rx_arp_requests == 0);
}

TEST_CASE("engine: kSnapshot reports per-QP rate, alpha, CNPs and bytes, and the counters",
          "[engine][stats]") {
  Fixture f(cc::ControllerKind::kDcqcn);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);

  const Snapshot idle = take_snapshot(f, f.a);
  CHECK(idle.ack_status == 0);
  REQUIRE(idle.qps.size() == 1);
  CHECK(idle.qps[0].qpn == f.a.qpn);
  CHECK(idle.qps[0].state == proto::QpState::kRts);
  const uint64_t line_rate = idle.qps[0].rate_bps;
  CHECK(line_rate > 0);
  CHECK(idle.qps[0].cnps_rx == 0);
  CHECK(idle.counters.count("engine.rx_drop.icrc") == 1);
  CHECK(idle.counters.count("net.rx_drop.ip_bad_checksum") == 1);
  CHECK(idle.counters.count("transport.rx_duplicates") == 1);

  // A 1 MiB WRITE from a to b with every data frame CE-marked on the way: b's notification
  // point sends CNPs, a's reaction point cuts its rate.
  const uint32_t len = 1 << 20;
  const uint32_t marked = marked_write(f, len, 11);

  const Snapshot sa = take_snapshot(f, f.a);
  const Snapshot sb = take_snapshot(f, f.b);
  REQUIRE(sa.qps.size() == 1);
  REQUIRE(sb.qps.size() == 1);
  const control::EngineEvent& qa = sa.qps[0];
  const control::EngineEvent& qb = sb.qps[0];
  INFO("a: rate " << qa.rate_bps << " alpha " << qa.alpha_ppm << " cnps_rx " << qa.cnps_rx
                  << "; b: cnps_tx " << qb.cnps_tx << " ce "
                  << sb.counters.at("engine.rx_ce_marked"));
  CHECK(qb.cnps_tx > 0);
  CHECK(qb.cnps_tx == sb.counters.at("engine.tx_cnps"));
  CHECK(sb.counters.at("engine.rx_ce_marked") == marked);
  CHECK(qa.cnps_rx > 0);
  CHECK(qa.cnps_rx == sa.counters.at("engine.rx_cnps"));
  CHECK(qa.rate_bps < line_rate);
  CHECK(qa.alpha_ppm > 0);
  CHECK(qa.tx_bytes >= len);
  CHECK(qb.rx_bytes >= len);
  CHECK(sa.counters.at("engine.tx_frames") > 0);
  CHECK(sa.counters.at("transport.tx_packets") >= len / 1024);

  // The transport totals keep a removed QP's share: counters never go backwards.
  control::EngineCommand rm;
  rm.op = control::EngineOp::kRemoveQp;
  rm.qpn = f.a.qpn;
  f.a.submit(rm);
  const Snapshot gone = take_snapshot(f, f.a);
  CHECK(gone.qps.empty());
  CHECK(gone.counters.at("engine.qps") == 0);
  CHECK(gone.counters.at("transport.tx_packets") >= sa.counters.at("transport.tx_packets"));
}

namespace {

// Sends h a kSetPolicy for *u and runs both engines until its ack; the ack's status.
int32_t set_policy(Fixture& f, Host& h, engine::PolicyUpdate* u) {
  control::EngineCommand c;
  c.op = control::EngineOp::kSetPolicy;
  c.policy = u;
  h.submit(c);
  const uint64_t cookie = h.cookie;
  int32_t status = 1;
  REQUIRE(run_until(f.a, f.b, [&] {
    control::EngineEvent ev;
    while (h.channel->poll_events(&ev, 1) == 1) {
      if (ev.kind == control::EngineEventKind::kAck && ev.cookie == cookie) status = ev.status;
    }
    return status != 1;
  }));
  return status;
}

engine::TrafficClassSpec class_spec(const char* name, uint8_t dscp, uint8_t ecn,
                                    cc::ControllerKind kind) {
  engine::TrafficClassSpec c;
  c.name = name;
  c.dscp = dscp;
  c.ecn = ecn;
  c.cc.kind = kind;
  return c;
}

// The ToS bytes of the RoCE frames in ring whose BTH opcode is (or, with cnp false,
// is not) a CNP's; the frames go back into the ring in order.
std::vector<uint8_t> roce_tos(rte_ring* ring, bool cnp) {
  std::vector<uint8_t> out;
  for_each_frame(ring, [&](const uint8_t* fr, size_t len) {
    if (len < 54 || fr[12] != 0x08 || fr[13] != 0x00 || fr[23] != 17 ||
        (fr[36] << 8 | fr[37]) != wire::kRoceUdpPort) {
      return;
    }
    if ((fr[42] == 0x81) == cnp) out.push_back(fr[15]);
  });
  return out;
}

}  // namespace

TEST_CASE("engine: a reload's classes and CNP settings reach the running QPs", "[engine][policy]") {
  Fixture f(cc::ControllerKind::kDcqcn);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint64_t line_rate = take_snapshot(f, f.a).qps.at(0).rate_bps;

  // a: the QP's class "default" is gone; the new default class "gold" paces at 1 Gbit/s
  // and marks DSCP 10 with ECT(1). DCQCN -> fixed: a new controller.
  engine::PolicyUpdate u;
  u.classes.push_back(class_spec("gold", 10, wire::kEcnEct1, cc::ControllerKind::kFixed));
  u.classes[0].cc.fixed_rate_bps = 1'000'000'000;
  u.classes.push_back(class_spec("bulk", 12, wire::kEcnEct0, cc::ControllerKind::kNone));
  u.classes[1].sched.weight = 4;
  REQUIRE(set_policy(f, f.a, &u) == 0);
  CHECK(u.qps == 1);
  CHECK(u.qps_to_default == 1);
  CHECK(u.qps_new_controller == 1);
  REQUIRE(u.classes.size() == 1);  // the engine's old table came back to be freed
  CHECK(u.classes[0].name == "default");
  Snapshot s = take_snapshot(f, f.a);
  CHECK(s.qps.at(0).rate_bps == 1'000'000'000);
  CHECK(s.counters.at("engine.policy_updates") == 1);

  // b: CNPs go out with DSCP 40 and not-ECT; its own class stays (same name, same cc).
  engine::PolicyUpdate ub;
  ub.classes.push_back(class_spec("default", 26, wire::kEcnEct0, cc::ControllerKind::kDcqcn));
  ub.np.cnp_dscp = 40;
  ub.np.cnp_ecn = 0;
  ub.np.min_time_between_cnps = 0;  // a CNP for every marked packet
  REQUIRE(set_policy(f, f.b, &ub) == 0);
  CHECK(ub.qps == 1);
  CHECK(ub.qps_to_default == 0);
  CHECK(ub.qps_new_controller == 0);

  // A CE-marked WRITE a -> b: a's frames carry the new class's marking, b's CNPs the new
  // CNP marking; the data arrives intact.
  const uint32_t len = 256 << 10;
  fill_random(f.a.arena(), len, 21);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  std::vector<uint8_t> data_tos, cnp_tos;
  conduit_shm_cqe cqe{};
  const uint64_t deadline = engine::tsc_now_ns() + 5'000'000'000ull;
  while (!f.a.cq.try_dequeue(&cqe)) {
    REQUIRE(engine::tsc_now_ns() < deadline);
    f.a.engine->poll_once(engine::tsc_now_ns());
    for (uint8_t t : roce_tos(f.ab, false)) data_tos.push_back(t);
    mark_ce(f.ab);
    f.b.engine->poll_once(engine::tsc_now_ns());
    for (uint8_t t : roce_tos(f.ba, true)) cnp_tos.push_back(t);
  }
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  REQUIRE(!data_tos.empty());
  for (uint8_t t : data_tos) CHECK(t == (10 << 2 | wire::kEcnEct1));
  REQUIRE(!cnp_tos.empty());
  for (uint8_t t : cnp_tos) CHECK(t == 40 << 2);

  // Back to DCQCN with a 2 Gbit/s ceiling (new controller: it starts at the ceiling), then
  // the same algorithm with 1.5 Gbit/s: taken in place, the unlimited flow at the new one.
  engine::PolicyUpdate u2;
  u2.classes.push_back(class_spec("gold", 10, wire::kEcnEct1, cc::ControllerKind::kDcqcn));
  u2.classes[0].cc.dcqcn.rpg_max_rate = 2000;
  REQUIRE(set_policy(f, f.a, &u2) == 0);
  CHECK(u2.qps_to_default == 0);
  CHECK(u2.qps_new_controller == 1);
  CHECK(take_snapshot(f, f.a).qps.at(0).rate_bps == 2'000'000'000);
  engine::PolicyUpdate u3;
  u3.classes.push_back(class_spec("gold", 10, wire::kEcnEct1, cc::ControllerKind::kDcqcn));
  u3.classes[0].cc.dcqcn.rpg_max_rate = 1500;
  REQUIRE(set_policy(f, f.a, &u3) == 0);
  CHECK(u3.qps_new_controller == 0);
  CHECK(take_snapshot(f, f.a).qps.at(0).rate_bps == 1'500'000'000);

  // Invalid (a weighted class of weight 0, DCQCN knobs out of range): refused whole.
  engine::PolicyUpdate bad;
  bad.classes.push_back(class_spec("gold", 10, wire::kEcnEct1, cc::ControllerKind::kNone));
  bad.classes.push_back(class_spec("zero", 14, wire::kEcnEct0, cc::ControllerKind::kNone));
  bad.classes[1].sched.weight = 0;
  CHECK(set_policy(f, f.a, &bad) == -EINVAL);
  engine::PolicyUpdate bad_cc;
  bad_cc.classes.push_back(class_spec("gold", 10, wire::kEcnEct1, cc::ControllerKind::kDcqcn));
  bad_cc.classes[0].cc.dcqcn.rpg_time_reset = 0;
  CHECK(set_policy(f, f.a, &bad_cc) == -EINVAL);
  s = take_snapshot(f, f.a);
  CHECK(s.qps.at(0).rate_bps == 1'500'000'000);
  CHECK(s.counters.at("engine.policy_updates") == 3);
  CHECK(line_rate > 1'500'000'000);
}

// Both engines on a clock the test moves (step_ns per loop), so no timer depends on how fast
// this machine runs the loops. Afterwards the real clock is waited for, so that later calls
// with tsc_now_ns() never go back in time.
struct SimClock {
  uint64_t t = engine::tsc_now_ns();
  ~SimClock() { wait_for_real(); }
  void wait_for_real() const {
    while (engine::tsc_now_ns() <= t) usleep(1000);
  }
};

// Runs both engines on the simulated clock until pred() or max_loops; returns pred().
template <class Pred>
bool run_sim(Fixture& f, SimClock& clock, Pred pred, uint64_t step_ns = 1000,
             int max_loops = 200'000) {
  for (int i = 0; i < max_loops; ++i) {
    if (pred()) return true;
    f.a.engine->poll_once(clock.t += step_ns);
    f.b.engine->poll_once(clock.t);
  }
  return pred();
}

TEST_CASE("engine: a full device ring holds frames back: none dropped, none sent twice",
          "[engine]") {
  Fixture f(Fixture::Options{.ring_slots = 64});  // 63 frames fit between the ports
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 1 << 20;  // 1024 frames at PMTU 1024
  fill_random(f.a.arena(), len, 21);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  SimClock clock;
  // b's engine does not run for a while (descheduled, asleep): the ring fills, and a must
  // keep what the device refuses instead of dropping it (each drop cost a go-back-N round).
  for (int i = 0; i < 500; ++i) f.a.engine->poll_once(clock.t += 1000);
  CHECK(f.a.engine->counters().tx_backpressure > 0);
  CHECK(f.a.engine->counters().tx_ring_full_drops == 0);
  conduit_shm_cqe cqe{};
  REQUIRE(run_sim(f, clock, [&] { return f.a.cq.try_dequeue(&cqe); }));
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  CHECK(f.a.engine->counters().tx_ring_full_drops == 0);
  clock.wait_for_real();
  const Snapshot sa = take_snapshot(f, f.a);
  const Snapshot sb = take_snapshot(f, f.b);
  CHECK(sa.counters.at("transport.tx_retransmits") == 0);
  CHECK(sa.counters.at("transport.timeouts") == 0);
  CHECK(sb.counters.at("transport.rx_out_of_sequence") == 0);
}

TEST_CASE(
    "engine: an ACK does not wait behind its QP's own data in the pacer, nor overtakes "
    "its READ responses",
    "[engine]") {
  // Both classes capped at 20 Mbit/s: a 1 KiB frame leaves every ~0.43 ms, and the 32 frames
  // a QP may keep in the pacer are ~14 ms of backlog. b WRITEs 256 KiB to a; a's SEND to b then
  // completes within a few simulated loops, because b's ACK for it leaves at once. Before, it
  // waited behind b's queued WRITE frames (~14 ms here).
  Fixture f(Fixture::Options{.class_max_rate_bps = 20'000'000});
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 256 << 10;
  post_recv(f.b, 2, 0, 64);  // posted well before a's SEND comes (no RNR NAK)
  fill_random(f.b.arena() + (1 << 20), len, 31);
  post_send(f.b, 1, CONDUIT_SHM_WR_RDMA_WRITE, 1 << 20, len, 2 << 20);
  SimClock clock;
  REQUIRE_FALSE(run_sim(
      f, clock, [] { return false; }, 1000, 2000));  // 2 ms: b's backlog
  std::memcpy(f.a.arena(), "ahead", 6);
  post_send(f.a, 3, CONDUIT_SHM_WR_SEND, 0, 6);
  conduit_shm_cqe cqe{};
  int loops = 0;
  REQUIRE(run_sim(f, clock, [&] {
    ++loops;
    return f.a.cq.try_dequeue(&cqe);
  }));
  CHECK(cqe.wr_id == 3);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  INFO("loops " << loops);
  CHECK(loops < 3000);  // under 3 ms of simulated time; the backlog is ~14 ms
  CHECK(f.b.engine->counters().tx_acks_unpaced > 0);
  // b's WRITE is still on its way, and arrives whole.
  conduit_shm_cqe b_cqe{};
  REQUIRE(run_sim(f, clock, [&] { return f.b.cq.try_dequeue(&b_cqe); }));
  CHECK(b_cqe.wr_id == 2);  // the RECV first
  REQUIRE(run_sim(f, clock, [&] { return f.b.cq.try_dequeue(&b_cqe); }));
  CHECK(b_cqe.wr_id == 1);
  CHECK(b_cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + (2 << 20), f.b.arena() + (1 << 20), len) == 0);

  // a READs 64 KiB of b and SENDs behind it: b's ACK for the SEND waits behind its READ
  // responses in the pacer (an ACK past an outstanding READ would tell a the responses were
  // lost, and a would ask again). Both complete, the data is b's, nothing was resent.
  fill_random(f.b.arena() + (4 << 20), 64 << 10, 37);
  post_recv(f.b, 5, 0, 64);
  REQUIRE_FALSE(run_sim(
      f, clock, [] { return false; }, 1000, 100));
  post_send(f.a, 4, CONDUIT_SHM_WR_RDMA_READ, 4 << 20, 64 << 10, 4 << 20);
  post_send(f.a, 6, CONDUIT_SHM_WR_SEND, 0, 6);
  REQUIRE(run_sim(f, clock, [&] { return f.a.cq.try_dequeue(&cqe); }));
  CHECK(cqe.wr_id == 4);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  REQUIRE(run_sim(f, clock, [&] { return f.a.cq.try_dequeue(&cqe); }));
  CHECK(cqe.wr_id == 6);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + (4 << 20), f.b.arena() + (4 << 20), 64 << 10) == 0);
  clock.wait_for_real();
  const Snapshot sa = take_snapshot(f, f.a);
  const Snapshot sb = take_snapshot(f, f.b);
  CHECK(sa.counters.at("transport.tx_retransmits") == 0);
  CHECK(sb.counters.at("transport.tx_retransmits") == 0);
  CHECK(sa.counters.at("transport.timeouts") == 0);
}

TEST_CASE("engine: time the engine did not run does not count against the peer's ACK timer",
          "[engine]") {
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  fill_random(f.a.arena(), 4096, 22);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
  SimClock clock;
  // a sends the WRITE; then neither engine runs for 100 ms (the OS ran something else), more
  // than the 67 ms ACK timeout (timeout 14). a runs first when they are back: its ACK timer
  // is past due, though b has not had a chance to answer.
  for (int i = 0; i < 20; ++i) f.a.engine->poll_once(clock.t += 1000);
  const engine::EngineCounters before = f.a.engine->counters();
  clock.t += 100'000'000;
  f.a.engine->poll_once(clock.t);
  f.b.engine->poll_once(clock.t);
  CHECK(f.a.engine->counters().stalls == before.stalls + 1);
  CHECK(f.a.engine->counters().stalled_ns - before.stalled_ns == 99'000'000);
  CHECK(f.a.engine->counters().stall_max_ns == 99'000'000);
  conduit_shm_cqe cqe{};
  REQUIRE(run_sim(f, clock, [&] { return f.a.cq.try_dequeue(&cqe); }));
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), 4096) == 0);
  clock.wait_for_real();
  const Snapshot sa = take_snapshot(f, f.a);
  CHECK(sa.counters.at("transport.timeouts") == 0);
  CHECK(sa.counters.at("transport.tx_retransmits") == 0);
  CHECK(sa.counters.at("engine.stalls") >= 1);
}

TEST_CASE("engine: frames the pacer holds back let the engine sleep until they may leave",
          "[engine][idle]") {
  // Both engines adaptive, the class capped at 100 Mbit/s: a 1 KiB frame may leave every
  // ~85 us, longer than the engine's first spin window (10 us). Before, frames waiting in the
  // pacer counted as pending work and the engine spun through every gap.
  Fixture f(Fixture::Options{.idle_mode = engine::IdleMode::kAdaptive,
                             .class_max_rate_bps = 100'000'000});
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 256 << 10;  // 256 frames at PMTU 1024: ~22 ms at the class rate
  fill_random(f.a.arena(), len, 23);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 2 << 20);
  const engine::EngineCounters before = f.a.engine->counters();
  conduit_shm_cqe cqe{};
  bool done = false;
  {
    std::thread ta([&] { f.a.engine->run(); });
    std::thread tb([&] { f.b.engine->run(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!(done = f.a.cq.try_dequeue(&cqe)) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    f.a.engine->stop();
    f.b.engine->stop();
    ta.join();
    tb.join();
  }
  const engine::EngineCounters& after = f.a.engine->counters();
  INFO(describe(f.a) << "; sleeps " << after.sleeps - before.sleeps << ", paced "
                     << after.paced_sleeps - before.paced_sleeps);
  REQUIRE(done);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), len) == 0);
  // Most gaps between departures were slept through (a gap ends early when an ACK or a
  // command is polled first, and a late wake-up lets two frames leave together).
  CHECK(after.paced_sleeps - before.paced_sleeps >= 64);
  CHECK(after.tx_ring_full_drops == 0);
}

TEST_CASE("engine: after it completes work for a client the engine yields its core once",
          "[engine][idle]") {
  // A client sharing the engine's core either sleeps on its CQ's wakeup pipe or polls and
  // yields (conduit-perf -Y); a spinning engine that is not preempted keeps it waiting for
  // the rest of its time slice (send_lat p99.9 2 ms over memif; BENCHMARKS.md, fifteenth
  // and sixteenth demo runs). So the engine gives the core up once, at its next idle loop,
  // after a completion reached a client's CQ (kicked or not) or a WRITE's last packet put
  // data in client memory, and never for work no client of this host waits on (serving a
  // peer's READ).
  need_eal();
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  shm::WakeFd ours, efd;
  add_cq0_wakeup(f.a, ours, efd);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 5) == false);
  expect_acks_ok(f.a);
  fill_random(f.a.arena(), 4096, 5);
  fill_random(f.b.arena() + (2 << 20), 4096, 6);
  bool kicked = false, first = false, second = false;
  uint64_t yields_a = 0, yields_b = 0, after_write_b = 0;
  {
    std::thread ta([&] { f.a.engine->run(); });
    std::thread tb([&] { f.b.engine->run(); });
    // Idle loops first: a yield owed for the set-up's completions is taken in them.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    yields_a = f.a.engine->counters().wakeup_yields;
    yields_b = f.b.engine->counters().wakeup_yields;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    conduit_shm_cqe cqe{};
    // A WRITE, its CQ armed: the completion kicks the wakeup pipe; b has data in its memory.
    shm::consumer_arm_wakeup(f.a.region.cq_wakeup(0));
    post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
    pollfd p{efd.fd(), POLLIN, 0};
    kicked = ::poll(&p, 1, 10'000) == 1;
    shm::consumer_disarm_wakeup(f.a.region.cq_wakeup(0));
    efd.drain();
    while (!(first = f.a.cq.try_dequeue(&cqe)) && std::chrono::steady_clock::now() < deadline) {
    }
    CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // b's idle loops
    after_write_b = f.b.engine->counters().wakeup_yields;
    // A READ of b's memory, CQ not armed: no kick, a yields for its completion, b for
    // nothing (it only answered).
    post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_READ, 8192, 4096, 2 << 20);
    while (!(second = f.a.cq.try_dequeue(&cqe)) && std::chrono::steady_clock::now() < deadline) {
    }
    CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
    // Idle loops after the last completion (a yield owed would be taken in them).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    f.a.engine->stop();
    f.b.engine->stop();
    ta.join();
    tb.join();
  }
  INFO(describe(f.a) << "; " << describe(f.b));
  REQUIRE(kicked);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(std::memcmp(f.b.arena() + (1 << 20), f.a.arena(), 4096) == 0);
  CHECK(std::memcmp(f.a.arena() + 8192, f.b.arena() + (2 << 20), 4096) == 0);
  CHECK(f.a.engine->counters().wakeup_yields - yields_a == 2);       // two completions
  CHECK(after_write_b - yields_b == 1);                              // the WRITE landed
  CHECK(f.b.engine->counters().wakeup_yields - after_write_b == 0);  // served a READ
  CHECK(efd.drain() == 0);  // the second completion did not kick
}

namespace {

// h's engine on its own thread, as in conduitd, reached only through the channel by a
// control service with one client; closed, stopped and joined on destruction.
struct ServedEngine {
  Host& h;
  control::ControlService svc;
  std::thread thread;
  uint32_t client = 0;
  std::vector<proto::UniqueFd> no_fds;
  uint32_t seq = 0;

  explicit ServedEngine(Host& host)
      : h(host), svc({}, {}, host.channel.get()), thread([this] { h.engine->run(); }) {
    client = svc.open_client({::getpid(), ::getuid(), ::getgid()});
  }
  ~ServedEngine() {
    if (client != 0) svc.close_client(client);
    h.engine->stop();
    thread.join();
  }
  ServedEngine(const ServedEngine&) = delete;
  ServedEngine& operator=(const ServedEngine&) = delete;

  proto::ReplyMessage call(proto::Request body) {
    auto out = svc.handle(client, proto::RequestMessage{++seq, std::move(body)}, no_fds);
    INFO(out.reply.reason);
    REQUIRE(out.reply.status == 0);
    return out.reply;
  }
  std::map<std::string, uint64_t> stats() {
    const proto::ReplyMessage reply = call(proto::StatsRequest{});
    std::map<std::string, uint64_t> by_name;
    for (const auto& c : std::get<proto::StatsReply>(reply.body).counters)
      by_name[c.name] = c.value;
    return by_name;
  }
};

}  // namespace

TEST_CASE("engine: the control service's stats and QP table come from the engine",
          "[engine][stats]") {
  need_eal();
  Host h;
  make_engine(h, "net_ring_svc0", net::Ipv4Addr::from_octets(198, 18, 0, 7), 0x41,
              cc::ControllerKind::kDcqcn);
  ServedEngine served(h);
  REQUIRE(served.client != 0);
  auto call = [&](proto::Request body) { return served.call(std::move(body)); };
  call(proto::AttachRequest{CONDUIT_SHM_ABI_VERSION, 1 << 20, "stats-test"});
  const auto cq = std::get<proto::CreateCqReply>(call(proto::CreateCqRequest{64, false}).body);
  const auto qp = std::get<proto::CreateQpReply>(
      call(proto::CreateQpRequest{cq.cq_id, cq.cq_id, 16, 16, ""}).body);

  const auto by_name = served.stats();
  CHECK(by_name.at("control.engine_snapshots") >= 1);
  CHECK(by_name.at("control.engine_snapshot_timeouts") == 0);
  CHECK(by_name.at("engine.loops") > 0);
  CHECK(by_name.at("engine.qps") == 1);
  CHECK(by_name.count("engine.rx_drop.icrc") == 1);

  const auto list =
      std::get<proto::ListQpsReply>(call(proto::ListQpsRequest{0, proto::kMaxListEntries}).body);
  REQUIRE(list.qps.size() == 1);
  CHECK(list.qps[0].qpn == qp.qpn);
  // The rate is the engine's (DCQCN starts at the line rate), not the "-" of an empty table.
  CHECK(list.qps[0].rate_bps > 0);
  CHECK(list.qps[0].tx_bytes == 0);
}

TEST_CASE("engine: a reload the engine answers late is taken when the answer comes",
          "[engine][policy]") {
  need_eal();
  Host h;
  make_engine(h, "net_ring_late0", net::Ipv4Addr::from_octets(198, 18, 0, 9), 0x43,
              cc::ControllerKind::kDcqcn);
  control::ControlService svc({}, {}, h.channel.get());
  auto poll_engine = [&] {
    for (int i = 0; i < 200; ++i) h.engine->poll_once(engine::tsc_now_ns());
  };
  poll_engine();
  svc.process_engine_events();
  const std::vector<std::string> names{"default", "bulk"};
  auto update = [] {
    auto u = std::make_shared<engine::PolicyUpdate>();
    u->classes.push_back(class_spec("default", 26, wire::kEcnEct0, cc::ControllerKind::kDcqcn));
    u->classes.push_back(class_spec("bulk", 10, wire::kEcnEct1, cc::ControllerKind::kNone));
    u->np.min_time_between_cnps = 4;
    return u;
  };
  // The engine is not polled while the service waits: as if it were descheduled.
  int late = 0;
  std::string why;
  CHECK(svc.set_engine_policy(update(), names, 20, why, [&] { ++late; }) == -ETIMEDOUT);
  CHECK(late == 0);
  CHECK(h.engine->counters().policy_updates == 0);
  // A second reload while the first is in flight is refused, and its callback never runs.
  int second = 0;
  CHECK(svc.set_engine_policy(update(), names, 20, why, [&] { ++second; }) == -EBUSY);
  // The engine runs again: it applies the update, and the service's next look at its
  // events calls back once.
  poll_engine();
  CHECK(h.engine->counters().policy_updates == 1);
  svc.process_engine_events();
  CHECK(late == 1);
  svc.process_engine_events();
  CHECK(late == 1);
  CHECK(second == 0);
  // A late answer that refuses the update (no classes: invalid) calls nothing back.
  int refused = 0;
  CHECK(svc.set_engine_policy(std::make_shared<engine::PolicyUpdate>(), names, 20, why,
                              [&] { ++refused; }) == -ETIMEDOUT);
  poll_engine();
  svc.process_engine_events();
  CHECK(refused == 0);
  CHECK(h.engine->counters().policy_updates == 1);
  // A timely answer applies and calls nothing back either: the caller has the result.
  int timely = 0;
  std::atomic<bool> stop{false};
  std::thread runner([&] {
    while (!stop.load()) h.engine->poll_once(engine::tsc_now_ns());
  });
  const int rc = svc.set_engine_policy(update(), names, 2000, why, [&] { ++timely; });
  stop = true;
  runner.join();
  CHECK(rc == 0);
  svc.process_engine_events();
  CHECK(timely == 0);
  CHECK(h.engine->counters().policy_updates == 2);
}

TEST_CASE("engine: a reload's idle_mode reaches the running engine", "[engine][idle]") {
  need_eal();
  Host h;
  make_engine(h, "net_ring_idle0", net::Ipv4Addr::from_octets(198, 18, 0, 8), 0x42,
              cc::ControllerKind::kNone, engine::IdleMode::kAdaptive);
  ServedEngine served(h);
  REQUIRE(served.client != 0);
  auto stats = [&] { return served.stats(); };
  // Adaptive: an idle engine goes to sleep (within its 200 us spin window; up to 5 s here).
  auto s = stats();
  for (int i = 0; i < 5000 && s.at("engine.sleeps") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = stats();
  }
  REQUIRE(s.at("engine.sleeps") > 0);
  // Spin, set from another thread as a reload does. The stats command posted after it is
  // answered in a loop with work (no sleep there), and the command ring's release/acquire
  // makes every later loop see spin: from that answer on, the engine never sleeps.
  h.engine->set_idle_mode(engine::IdleMode::kSpin);
  const auto before = stats();
  auto after = stats();
  for (int i = 0; i < 5000 && after.at("engine.loops") <= before.at("engine.loops") + 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    after = stats();
  }
  CHECK(after.at("engine.loops") > before.at("engine.loops") + 1);
  CHECK(after.at("engine.sleeps") == before.at("engine.sleeps"));
}

TEST_CASE("engine: stop() wakes an engine asleep in adaptive idle mode", "[engine][idle]") {
  // conduitd stops the engine from the main thread. An idle engine sleeps in ppoll on the
  // control eventfd (and the clients' doorbells); a stop that only set the flag waited for
  // that sleep's timeout. The timeout is made 30 s here, so an engine that is not woken
  // blocks far beyond the 10 s bound.
  need_eal();
  g_engine_config_hook = [](engine::EngineConfig& ec, uint8_t) {
    ec.idle_sleep_us = 30'000'000;
    ec.idle_sleep_max_us = 30'000'000;
  };
  struct PutBack {
    ~PutBack() { g_engine_config_hook = nullptr; }
  } put_back;
  Host h;
  make_engine(h, "net_ring_idst0", net::Ipv4Addr::from_octets(198, 18, 0, 9), 0x43,
              cc::ControllerKind::kNone, engine::IdleMode::kAdaptive);
  std::atomic<bool> returned{false};
  std::thread t([&] {
    h.engine->run();
    returned = true;
  });
  // Asleep: the heartbeat (one step per loop) stood still for 100 ms (up to 5 s here).
  uint64_t beat = h.engine->heartbeat();
  int still = 0;
  for (int i = 0; i < 500 && still < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const uint64_t now = h.engine->heartbeat();
    still = now == beat ? still + 1 : 0;
    beat = now;
  }
  CHECK(still == 10);
  const auto t0 = std::chrono::steady_clock::now();
  h.engine->stop();
  for (int i = 0; i < 1000 && !returned; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(returned);
  t.join();
  CHECK(waited < std::chrono::seconds(10));
  CHECK(h.engine->counters().sleeps >= 1);
}

// ---- connection manager -------------------------------------------------------------

namespace {

// Everything h's engine posted since the last call, appended to log.
void take_events(Host& h, std::vector<control::EngineEvent>& log) {
  control::EngineEvent ev[64];
  for (uint32_t n; (n = h.channel->poll_events(ev, 64)) > 0;) log.insert(log.end(), ev, ev + n);
}

const control::EngineEvent* find_cm(const std::vector<control::EngineEvent>& log,
                                    proto::CmEventKind kind) {
  for (const auto& e : log) {
    if (e.kind == control::EngineEventKind::kCmEvent && e.cm.kind == kind) return &e;
  }
  return nullptr;
}

const control::EngineEvent* find_ack(const std::vector<control::EngineEvent>& log,
                                     uint64_t cookie) {
  for (const auto& e : log) {
    if (e.kind == control::EngineEventKind::kAck && e.cookie == cookie) return &e;
  }
  return nullptr;
}

control::EngineCommand cm_cmd(control::EngineOp op, uint32_t qpn, uint32_t pmtu, bool sr,
                              const char* priv) {
  control::EngineCommand c;
  c.op = op;
  c.qpn = qpn;
  c.cm.access = proto::kAccessAll;
  c.cm.pmtu_bytes = pmtu;
  c.cm.flags = sr ? proto::kCmFlagSelectiveRepeat : 0;
  c.cm.private_len = static_cast<uint8_t>(std::strlen(priv) + 1);
  std::memcpy(c.cm.private_data, priv, c.cm.private_len);
  return c;
}

// Both hosts' engine events as they come, for the connection-manager tests.
struct CmEvents {
  explicit CmEvents(Fixture& fixture) : f(fixture) {}
  Fixture& f;
  std::vector<control::EngineEvent> a, b;
  // Runs both engines, logging their events, until pred() or the deadline; returns pred().
  template <class Pred>
  bool pump(Pred pred) {
    return run_until(f.a, f.b, [&] {
      take_events(f.a, a);
      take_events(f.b, b);
      return pred();
    });
  }
  // b listens on `service`, a connects its QP to it (IPv4, go-back-N) asking for `pmtu`,
  // with `flags` (kCmFlagRdmaCm: the IB CM); the request as b's client sees it, once it has.
  std::optional<control::CmEventInfo> request(uint64_t service, uint32_t pmtu, uint32_t flags = 0) {
    control::EngineCommand listen;
    listen.op = control::EngineOp::kCmListen;
    listen.cm.service = service;
    f.b.submit(listen);
    connect(service, pmtu, flags);
    if (!pump([&] { return find_cm(b, proto::CmEventKind::kRequest) != nullptr; })) return {};
    return find_cm(b, proto::CmEventKind::kRequest)->cm;
  }
  // a connects its QP to b's `service` (IPv4, go-back-N), asking for `pmtu`, with `flags`.
  void connect(uint64_t service, uint32_t pmtu, uint32_t flags = 0) {
    auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, pmtu, false, "");
    conn.cm.peer = proto::cm_addr_v4(f.addr_b.value);
    conn.cm.service = service;
    conn.cm.flags |= flags;
    f.a.submit(conn);
  }
  // request() at PMTU 1024, b accepts with its QP; true once both ends are established.
  bool establish(uint64_t service) {
    const auto req = request(service, 1024);
    if (!req) return false;
    auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 1024, false, "");
    accept.cm.conn = req->conn;
    f.b.submit(accept);
    return pump([&] {
      return find_cm(a, proto::CmEventKind::kEstablished) != nullptr &&
             find_cm(b, proto::CmEventKind::kEstablished) != nullptr;
    });
  }
};

}  // namespace

TEST_CASE("engine: the connection manager connects two QPs over the wire, then SEND works",
          "[engine][cm]") {
  Fixture f(Fixture::Options{.connect_qps = false});
  CmEvents ev{f};
  auto& ev_a = ev.a;
  auto& ev_b = ev.b;

  control::EngineCommand listen;
  listen.op = control::EngineOp::kCmListen;
  listen.cm.service = 5;
  f.b.submit(listen);
  auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, 4096, true, "req");
  conn.cm.peer = proto::cm_addr_v4(f.addr_b.value);
  conn.cm.service = 5;
  f.a.submit(conn);
  const uint64_t connect_cookie = f.a.cookie;
  REQUIRE(ev.pump([&] { return find_cm(ev_b, proto::CmEventKind::kRequest) != nullptr; }));
  const control::CmEventInfo req = find_cm(ev_b, proto::CmEventKind::kRequest)->cm;
  CHECK(req.remote_qpn == f.a.qpn);
  CHECK(req.peer == proto::cm_addr_v4(f.addr_a.value));
  CHECK(req.service == 5);
  // a asked for 4096 on a 1500-byte port: it offers the largest path MTU that leaves the
  // port (1024 + 64 bytes of headers), as rdma_cm takes the port's active MTU.
  CHECK(req.pmtu_bytes == 1024);
  CHECK(req.flags == proto::kCmFlagSelectiveRepeat);
  CHECK(std::string(reinterpret_cast<const char*>(req.private_data)) == "req");
  const control::EngineEvent* ack = find_ack(ev_a, connect_cookie);
  REQUIRE(ack != nullptr);
  CHECK(ack->status == 0);
  CHECK(ack->cm.conn != 0);

  // b accepts with a smaller PMTU and selective repeat: both are what the QPs get.
  auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 1024, true, "rep");
  accept.cm.conn = req.conn;
  f.b.submit(accept);
  REQUIRE(ev.pump([&] {
    return find_cm(ev_a, proto::CmEventKind::kEstablished) != nullptr &&
           find_cm(ev_b, proto::CmEventKind::kEstablished) != nullptr;
  }));
  const control::CmEventInfo ea = find_cm(ev_a, proto::CmEventKind::kEstablished)->cm;
  const control::CmEventInfo eb = find_cm(ev_b, proto::CmEventKind::kEstablished)->cm;
  CHECK(ea.qpn == f.a.qpn);
  CHECK(ea.remote_qpn == f.b.qpn);
  CHECK(eb.remote_qpn == f.a.qpn);
  CHECK(ea.pmtu_bytes == 1024);
  CHECK(eb.pmtu_bytes == 1024);
  CHECK(ea.flags == proto::kCmFlagSelectiveRepeat);
  CHECK(ea.sq_psn == eb.rq_psn);  // each side's start PSN is what the other expects
  CHECK(eb.sq_psn == ea.rq_psn);
  CHECK(std::string(reinterpret_cast<const char*>(ea.private_data)) == "rep");

  // Connected: a SEND goes through.
  std::memcpy(f.a.arena(), "through the CM", 15);
  post_recv(f.b, 1, 0, 64);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 15);
  conduit_shm_cqe cqe = wait_cqe(f, f.b);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(cqe.byte_len == 15);
  CHECK(std::memcmp(f.b.arena(), "through the CM", 15) == 0);
  cqe = wait_cqe(f, f.a);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);

  // A second connect on a connected QP is refused.
  f.a.submit(conn);
  const uint64_t again = f.a.cookie;
  REQUIRE(ev.pump([&] { return find_ack(ev_a, again) != nullptr; }));
  CHECK(find_ack(ev_a, again)->status == -EBUSY);

  // a disconnects: b hears of it.
  control::EngineCommand disc;
  disc.op = control::EngineOp::kCmDisconnect;
  disc.qpn = f.a.qpn;
  f.a.submit(disc);
  REQUIRE(ev.pump([&] { return find_cm(ev_b, proto::CmEventKind::kDisconnected) != nullptr; }));
  CHECK(find_cm(ev_b, proto::CmEventKind::kDisconnected)->cm.qpn == f.b.qpn);
}

TEST_CASE("engine: an IB CM request runs the REQ's path MTU, whatever the acceptor asked for",
          "[engine][cm]") {
  // The IB REP carries no MTU: the requester runs its REQ's (1024 here), so the passive side
  // must too. Had b taken its 512, every message over 512 bytes would fail between them.
  Fixture f(Fixture::Options{.connect_qps = false});
  CmEvents ev{f};
  const auto found = ev.request(9, 1024, proto::kCmFlagRdmaCm);
  REQUIRE(found);
  const control::CmEventInfo req = *found;
  CHECK(req.pmtu_bytes == 1024);
  auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 512, false, "");
  accept.cm.conn = req.conn;
  f.b.submit(accept);
  REQUIRE(ev.pump([&] {
    return find_cm(ev.a, proto::CmEventKind::kEstablished) != nullptr &&
           find_cm(ev.b, proto::CmEventKind::kEstablished) != nullptr;
  }));
  CHECK(find_cm(ev.a, proto::CmEventKind::kEstablished)->cm.pmtu_bytes == 1024);
  CHECK(find_cm(ev.b, proto::CmEventKind::kEstablished)->cm.pmtu_bytes == 1024);
  // A one-packet SEND of 1000 bytes: b's QP takes it.
  std::memset(f.a.arena(), 0x5A, 1000);
  post_recv(f.b, 1, 0, 2048);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 1000);
  const conduit_shm_cqe rx = wait_cqe(f, f.b);
  CHECK(rx.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(rx.byte_len == 1000);
  CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
}

namespace {
// The IB CM REJs (MAD attribute 0x0012 on the GSI, QP 1) in the IPv4 frames waiting in
// `ring`, in order, as (reason, message rejected); the ring keeps its frames.
std::vector<std::pair<uint16_t, uint8_t>> ib_cm_rejs(rte_ring* ring) {
  std::vector<std::pair<uint16_t, uint8_t>> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    // Ethernet, IPv4 (20 bytes), UDP to 4791, BTH (UD SEND_ONLY to QP 1), DETH, the MAD.
    constexpr size_t kBth = 42;
    constexpr size_t kMad = kBth + 12 + 8;
    constexpr size_t kRej = kMad + 24;
    if (len < kRej + 12 || f[12] != 0x08 || f[14] != 0x45 || f[23] != 17 ||
        (f[36] << 8 | f[37]) != wire::kRoceUdpPort || f[kBth] != 0x64 ||
        (f[kBth + 5] << 16 | f[kBth + 6] << 8 | f[kBth + 7]) != 1 || f[kMad + 1] != 0x07 ||
        (f[kMad + 16] << 8 | f[kMad + 17]) != 0x0012) {
      return;
    }
    out.emplace_back(static_cast<uint16_t>(f[kRej + 10] << 8 | f[kRej + 11]),
                     static_cast<uint8_t>(f[kRej + 8] >> 6));
  });
  return out;
}
}  // namespace

TEST_CASE("engine: an IB CM REQ whose path MTU the port cannot carry gets REJ(invalid MTU)",
          "[engine][cm]") {
  // a's port carries a 2048-byte path MTU, b's (1500) only 1024. a's rdma_cm-style REQ asks
  // for 2048; b cannot run a smaller one (the REP has no MTU): its accept is refused and a REJ
  // with reason 26 (invalid MTU) for the REQ goes out. Nothing stays: no connection on either
  // side, and b's QP takes the next request.
  Fixture f(Fixture::Options{.connect_qps = false, .port_mtu_a = 2200});
  REQUIRE(f.a.port->mtu_bytes() == 2200);
  REQUIRE(f.b.port->mtu_bytes() == 1500);
  CmEvents ev{f};
  const auto found = ev.request(9, 2048, proto::kCmFlagRdmaCm);
  REQUIRE(found);
  const control::CmEventInfo req = *found;
  CHECK(req.pmtu_bytes == 2048);
  auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 1024, false, "");
  accept.cm.conn = req.conn;
  f.b.submit(accept);
  const uint64_t accept_cookie = f.b.cookie;
  // b alone: its answer waits on the wire.
  REQUIRE(run_until(
              f.b, f.b, [] { return false; }, 20) == false);
  take_events(f.b, ev.b);
  REQUIRE(find_ack(ev.b, accept_cookie) != nullptr);
  CHECK(find_ack(ev.b, accept_cookie)->status == -EMSGSIZE);
  const auto rejs = ib_cm_rejs(f.ba);
  REQUIRE(rejs.size() == 1);
  CHECK(rejs[0].first == 26);  // invalid MTU
  CHECK(rejs[0].second == 0);  // of a REQ
  CHECK(f.b.engine->counters().cm_gsi_tx >= 1);

  REQUIRE(ev.pump([&] { return find_cm(ev.a, proto::CmEventKind::kRejected) != nullptr; }));
  const control::CmEventInfo rej = find_cm(ev.a, proto::CmEventKind::kRejected)->cm;
  CHECK(rej.qpn == f.a.qpn);
  CHECK(rej.reason == proto::kCmPolicy);
  CHECK(find_cm(ev.b, proto::CmEventKind::kEstablished) == nullptr);
  CHECK(take_snapshot(f, f.b).counters.at("cm.connections") == 0);
  CHECK(take_snapshot(f, f.a).counters.at("cm.connections") == 0);
  // The same request is gone: accepting it again finds nothing.
  f.b.submit(accept);
  const uint64_t again = f.b.cookie;
  REQUIRE(ev.pump([&] { return find_ack(ev.b, again) != nullptr; }));
  CHECK(find_ack(ev.b, again)->status == -ENOENT);

  // b's QP was left as it was: a request for 1024 connects both QPs, and a SEND goes through.
  ev.connect(9, 1024, proto::kCmFlagRdmaCm);
  const auto next_request = [&]() -> const control::EngineEvent* {
    for (const auto& e : ev.b) {
      if (e.kind == control::EngineEventKind::kCmEvent &&
          e.cm.kind == proto::CmEventKind::kRequest && e.cm.conn != req.conn) {
        return &e;
      }
    }
    return nullptr;
  };
  REQUIRE(ev.pump([&] { return next_request() != nullptr; }));
  const control::EngineEvent* req2 = next_request();
  CHECK(req2->cm.pmtu_bytes == 1024);
  accept.cm.conn = req2->cm.conn;
  f.b.submit(accept);
  REQUIRE(ev.pump([&] {
    return find_cm(ev.a, proto::CmEventKind::kEstablished) != nullptr &&
           find_cm(ev.b, proto::CmEventKind::kEstablished) != nullptr;
  }));
  CHECK(find_cm(ev.b, proto::CmEventKind::kEstablished)->cm.qpn == f.b.qpn);
  std::memset(f.a.arena(), 0x6B, 1000);
  post_recv(f.b, 1, 0, 2048);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 1000);
  CHECK(wait_cqe(f, f.b).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
}

TEST_CASE("engine: an IB CM REJ 'stale connection' and its private data reach the client",
          "[engine][cm]") {
  // b's listener refuses a's rdma_cm request; on the way its REJ becomes what a Linux peer
  // sends for a stale connection (reason 10) with rdma_reject()-style private data. a's client
  // gets kRejected, reason kCmRefused (rdma_cm: REJECTED, ECONNREFUSED), the stale flag
  // (libconduit's text says what happened) and the private data.
  Fixture f(Fixture::Options{.connect_qps = false});
  CmEvents ev{f};
  const auto req = ev.request(9, 1024, proto::kCmFlagRdmaCm);
  REQUIRE(req);
  control::EngineCommand reject;
  reject.op = control::EngineOp::kCmReject;
  reject.cm.conn = req->conn;
  reject.cm.reason = proto::kCmRefused;
  f.b.submit(reject);
  REQUIRE(run_until(
              f.b, f.b, [] { return false; }, 20) == false);
  take_events(f.b, ev.b);
  // Rewrite b's REJ (Ethernet, IPv4, UDP, BTH, DETH, MAD) in the ring and its ICRC.
  int rewritten = 0;
  for_each_frame(f.ba, [&](uint8_t* fr, size_t len) {
    constexpr size_t kRej = 42 + 12 + 8 + 24;
    if (len < kRej + 200 || fr[12] != 0x08 || fr[23] != 17 ||
        (fr[36] << 8 | fr[37]) != wire::kRoceUdpPort || (fr[42 + 12 + 8 + 17]) != 0x12) {
      return;
    }
    fr[kRej + 10] = 0;
    fr[kRej + 11] = 10;  // stale connection
    fr[kRej + 84] = 0x5A;
    fr[kRej + 87] = 0xA5;
    fr[kRej + 84 + 99] = 0x01;  // rdma_reject() with 100 bytes: more than an event carries
    wire::finish_gsi_icrc(fr + 14);
    ++rewritten;
  });
  REQUIRE(rewritten == 1);
  REQUIRE(ev.pump([&] { return find_cm(ev.a, proto::CmEventKind::kRejected) != nullptr; }));
  const control::CmEventInfo rej = find_cm(ev.a, proto::CmEventKind::kRejected)->cm;
  CHECK(rej.qpn == f.a.qpn);
  CHECK(rej.reason == proto::kCmRefused);
  CHECK((rej.flags & proto::kCmFlagStale) != 0);
  REQUIRE(rej.private_len == proto::kMaxCmPrivateBytes);
  CHECK(rej.private_data[0] == 0x5A);
  CHECK(rej.private_data[3] == 0xA5);
  CHECK((rej.flags & proto::kCmFlagPrivateTruncated) != 0);  // the first 64 bytes, said so
  CHECK(f.a.engine->counters().cm_gsi_rx >= 1);
}

namespace {
// The UDP checksum of every IPv6 datagram to UDP `port` waiting in `ring` (untagged frames),
// recomputed: 0 when it verifies, else the stored value's mismatch; -1 for a zero checksum.
// The ring keeps its frames.
std::vector<int> ipv6_udp_checksums(rte_ring* ring, uint16_t port) {
  std::vector<int> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    if (len < 62 || f[12] != 0x86 || f[13] != 0xDD || f[20] != 17 || (f[56] << 8 | f[57]) != port) {
      return;
    }
    const size_t udp_len = size_t(f[18] << 8 | f[19]);
    if (f[60] == 0 && f[61] == 0) {
      out.push_back(-1);
      return;
    }
    // RFC 8200 section 8.1: the pseudo-header (addresses, length, next header) and the datagram.
    uint64_t sum = udp_len + 17;
    for (size_t k = 22; k < 54; k += 2) sum += uint32_t(f[k] << 8 | f[k + 1]);
    for (size_t k = 0; k < udp_len; k += 2) {
      sum += uint32_t(f[54 + k] << 8 | (k + 1 < udp_len ? f[54 + k + 1] : 0));
    }
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    out.push_back(static_cast<int>(~sum & 0xFFFF));
  });
  return out;
}
}  // namespace

TEST_CASE("engine: over IPv6, the native CM and the IB CM connect two QPs, then SEND works",
          "[engine][cm][ipv6]") {
  const Ipv6Hosts ipv6_hosts;
  for (const bool ib : {false, true}) {
    INFO((ib ? "IB CM (rdma_cm)" : "native CM"));
    Fixture f(Fixture::Options{.connect_qps = false});
    CmEvents ev{f};
    control::EngineCommand listen;
    listen.op = control::EngineOp::kCmListen;
    listen.cm.service = 7;
    f.b.submit(listen);
    auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, 1024, false, "six");
    conn.cm.peer = host_addr6(0x22).bytes;  // b's port.address6
    conn.cm.service = 7;
    if (ib) conn.cm.flags |= proto::kCmFlagRdmaCm;
    f.a.submit(conn);
    REQUIRE(ev.pump([&] { return find_cm(ev.b, proto::CmEventKind::kRequest) != nullptr; }));
    const control::CmEventInfo req = find_cm(ev.b, proto::CmEventKind::kRequest)->cm;
    CHECK(req.peer == host_addr6(0x11).bytes);  // a's address6, as b saw it
    CHECK(req.remote_qpn == f.a.qpn);
    CHECK(req.flags == (ib ? proto::kCmFlagRdmaCm : 0u));
    CHECK(std::string(reinterpret_cast<const char*>(req.private_data)) == "six");
    auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 1024, false, "");
    accept.cm.conn = req.conn;
    f.b.submit(accept);
    if (!ib) {
      // b's REP leaves with a valid UDP checksum (RFC 8200: mandatory over IPv6; the GSI's
      // datagrams have the ICRC instead, as rxe's).
      std::vector<int> sums;
      REQUIRE(run_until(f.b, f.b, [&] {
        sums = ipv6_udp_checksums(f.ba, 4792);
        return !sums.empty();
      }));
      CHECK(sums == std::vector<int>(sums.size(), 0));
    }
    REQUIRE(ev.pump([&] {
      return find_cm(ev.a, proto::CmEventKind::kEstablished) != nullptr &&
             find_cm(ev.b, proto::CmEventKind::kEstablished) != nullptr;
    }));
    CHECK(find_cm(ev.a, proto::CmEventKind::kEstablished)->cm.peer == host_addr6(0x22).bytes);
    CHECK(find_cm(ev.b, proto::CmEventKind::kEstablished)->cm.peer == host_addr6(0x11).bytes);

    std::memcpy(f.a.arena(), "over IPv6", 10);
    post_recv(f.b, 1, 0, 64);
    post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 10);
    const conduit_shm_cqe rx = wait_cqe(f, f.b);
    CHECK(rx.status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(std::memcmp(f.b.arena(), "over IPv6", 10) == 0);
    CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);

    const engine::EngineCounters& ca = f.a.engine->counters();
    const engine::EngineCounters& cb = f.b.engine->counters();
    INFO(describe(f.a) << "; " << describe(f.b));
    if (ib) {
      CHECK(ca.cm_gsi_tx >= 2);  // REQ, RTU
      CHECK(cb.cm_gsi_rx >= 2);
      CHECK(cb.cm_gsi_rx_dropped == 0);  // the IPv6 ICRCs were right
      CHECK(ca.cm_tx_datagrams == 0);
    } else {
      CHECK(ca.cm_tx_datagrams >= 2);
      CHECK(cb.cm_rx_datagrams >= 2);
      CHECK(ca.cm_gsi_tx == 0);
    }
    // Every message went over IPv6: the peers found each other by NDP, not ARP, and the
    // native CM's UDP checksums were right (the stack checks non-zero ones).
    const net::NetCounters& na = f.a.engine->net().counters();
    const net::NetCounters& nb = f.b.engine->net().counters();
    CHECK(na.tx_arp_requests + nb.tx_arp_requests == 0);
    CHECK(na.tx_ns + nb.tx_ns > 0);
    CHECK(nb.rx_udp6_delivered > 0);
    CHECK(take_snapshot(f, f.b).counters.at("net.rx_drop.udp_bad_checksum") == 0);
  }
}

TEST_CASE("engine: a connect to an IPv6 peer without port.address6 is refused", "[engine][cm]") {
  Fixture f(Fixture::Options{.connect_qps = false});
  CmEvents ev{f};
  auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, 1024, false, "");
  conn.cm.peer = host_addr6(0x22).bytes;
  conn.cm.service = 7;
  f.a.submit(conn);
  const uint64_t cookie = f.a.cookie;
  REQUIRE(ev.pump([&] { return find_ack(ev.a, cookie) != nullptr; }));
  CHECK(find_ack(ev.a, cookie)->status == -ENETUNREACH);
}

TEST_CASE("engine: a QP that stops ACKs what it received ahead of its DREQ", "[engine][cm]") {
  // The class is capped at 20 Mbit/s and b's flow is busy with a WRITE: b's pacer holds its
  // 32 frames (a 1 KiB frame leaves every ~0.4 ms), so b's ACK for a's SEND waits in its
  // responder queue until a slot frees (ACKs leave unpaced, but only once taken from the QP).
  // b's client has its RECV completion, and then stops the QP: it disconnects, or destroys it
  // with the connection up. Either way b's DREQ must not overtake the ACK: a's SEND has
  // completed, successfully, by the time a hears of the disconnect (before, a saw the
  // disconnect first, and after a destroy the ACK was freed with the QP and a's SEND
  // retried into nothing).
  const auto op = GENERATE(control::EngineOp::kCmDisconnect, control::EngineOp::kRemoveQp);
  Fixture f(Fixture::Options{.connect_qps = false, .class_max_rate_bps = 20'000'000});
  CmEvents ev{f};
  REQUIRE(ev.establish(7));

  post_recv(f.b, 1, 0, 64);
  post_send(f.b, 2, CONDUIT_SHM_WR_RDMA_WRITE, 4096, 64 << 10, 1 << 20);  // ~27 ms of frames
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 2) == false);
  std::memcpy(f.a.arena(), "last words", 11);
  post_send(f.a, 3, CONDUIT_SHM_WR_SEND, 0, 11);
  const conduit_shm_cqe recv = wait_cqe(f, f.b);
  REQUIRE(recv.wr_id == 1);
  CHECK(recv.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.b.arena(), "last words", 11) == 0);
  conduit_shm_cqe cqe{};
  REQUIRE_FALSE(f.a.cq.try_dequeue(&cqe));  // a has not run since b took the SEND

  control::EngineCommand stop;
  stop.op = op;
  stop.qpn = f.b.qpn;
  stop.qp_slot = 0;
  f.b.submit(stop);
  REQUIRE(ev.pump([&] { return find_cm(ev.a, proto::CmEventKind::kDisconnected) != nullptr; }));
  REQUIRE(f.a.cq.try_dequeue(&cqe));
  CHECK(cqe.wr_id == 3);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(f.b.engine->counters().tx_final_acks == 1);
}

namespace {
// The RoCE opcodes (BTH byte 0) of the IPv4 frames to UDP 4791 waiting in `ring`, in order;
// the ring keeps its frames.
std::vector<uint8_t> roce_opcodes(rte_ring* ring) {
  std::vector<uint8_t> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    if (len >= 58 && f[12] == 0x08 && f[23] == 17 && (f[36] << 8 | f[37]) == wire::kRoceUdpPort) {
      out.push_back(f[42]);
    }
  });
  return out;
}
}  // namespace

TEST_CASE("engine: a QP that stops sends the READ responses in its pacer before its final ACK",
          "[engine][cm]") {
  // The class is capped at 5 Mbit/s: b's pacer holds the 16 responses of a's 16 KiB READ
  // (a 1 KiB frame leaves every ~1.7 ms) when b's client, which has the RECV completion of
  // a's SEND posted after the READ, stops the QP. b's final ACK covers the READ (it was
  // answered: the transport gave all its responses out), so it must not leave ahead of
  // them: a would take it as the responses lost and ask again, and after a destroy the
  // responses were freed with the QP. With them sent first, a has both completions,
  // successful and the data in place, by the time it hears of the disconnect.
  const auto op = GENERATE(control::EngineOp::kCmDisconnect, control::EngineOp::kRemoveQp);
  Fixture f(Fixture::Options{.connect_qps = false, .class_max_rate_bps = 5'000'000});
  CmEvents ev{f};
  REQUIRE(ev.establish(7));

  constexpr uint32_t kReadBytes = 16 << 10;
  fill_random(f.b.arena() + (1 << 20), kReadBytes, 11);
  post_recv(f.b, 1, 0, 64);
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_READ, 1 << 20, kReadBytes, 1 << 20);
  std::memcpy(f.a.arena(), "after the READ", 15);
  post_send(f.a, 4, CONDUIT_SHM_WR_SEND, 0, 15);
  const conduit_shm_cqe recv = wait_cqe(f, f.b);
  REQUIRE(recv.wr_id == 1);
  CHECK(recv.status == CONDUIT_SHM_WC_SUCCESS);
  conduit_shm_cqe cqe{};
  REQUIRE_FALSE(f.a.cq.try_dequeue(&cqe));  // the READ's responses are still coming

  control::EngineCommand stop;
  stop.op = op;
  stop.qpn = f.b.qpn;
  stop.qp_slot = 0;
  f.b.submit(stop);
  // b alone, long enough for its pacer to have sent everything: on the wire, no READ
  // response after the first ACK (the final one, or the queued ACK of the SEND behind them).
  REQUIRE(run_until(
              f.b, f.b, [] { return false; }, 60) == false);
  CHECK(f.b.engine->counters().tx_final_acks == 1);
  const std::vector<uint8_t> ops = roce_opcodes(f.ba);
  const auto is_response = [](uint8_t o) {
    return o >= static_cast<uint8_t>(wire::Opcode::kReadResponseFirst) &&
           o <= static_cast<uint8_t>(wire::Opcode::kReadResponseOnly);
  };
  const auto first_ack =
      std::find(ops.begin(), ops.end(), static_cast<uint8_t>(wire::Opcode::kAcknowledge));
  REQUIRE(first_ack != ops.end());
  CHECK(std::count_if(ops.begin(), first_ack, is_response) > 0);
  CHECK(std::none_of(first_ack, ops.end(), is_response));

  REQUIRE(ev.pump([&] { return find_cm(ev.a, proto::CmEventKind::kDisconnected) != nullptr; }));
  REQUIRE(f.a.cq.try_dequeue(&cqe));
  CHECK(cqe.wr_id == 3);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + (1 << 20), f.b.arena() + (1 << 20), kReadBytes) == 0);
  REQUIRE(f.a.cq.try_dequeue(&cqe));
  CHECK(cqe.wr_id == 4);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
}

TEST_CASE("engine: a QP that stops frees its own requests still in its pacer", "[engine][cm]") {
  // The class is capped at 5 Mbit/s: a's pacer holds most of a 16 KiB WRITE's 16 frames when
  // a's client stops the QP. The WR is flushed with an error, so the rest of its frames must
  // not go out and run at the peer (only answers the final ACK covers are sent at once).
  const auto op = GENERATE(control::EngineOp::kCmDisconnect, control::EngineOp::kRemoveQp);
  Fixture f(Fixture::Options{.connect_qps = false, .class_max_rate_bps = 5'000'000});
  CmEvents ev{f};
  REQUIRE(ev.establish(7));
  (void)roce_opcodes(f.ab);  // (the set-up's frames were taken by b)

  constexpr uint32_t kBytes = 16 << 10;
  fill_random(f.a.arena() + (1 << 20), kBytes, 12);
  post_send(f.a, 5, CONDUIT_SHM_WR_RDMA_WRITE, 1 << 20, kBytes, 1 << 20);
  REQUIRE(run_until(
              f.a, f.a, [] { return false; }, 6) == false);  // a few frames leave
  const auto writes = [&] {
    const std::vector<uint8_t> ops = roce_opcodes(f.ab);
    return std::count_if(ops.begin(), ops.end(), [](uint8_t o) {
      return o >= static_cast<uint8_t>(wire::Opcode::kWriteFirst) &&
             o <= static_cast<uint8_t>(wire::Opcode::kWriteOnlyImm);
    });
  };
  const auto before = writes();
  INFO("WRITE frames before the stop: " << before);
  REQUIRE(before < 16);
  control::EngineCommand stop;
  stop.op = op;
  stop.qpn = f.a.qpn;
  stop.qp_slot = 0;
  f.a.submit(stop);
  REQUIRE(run_until(
              f.a, f.a, [] { return false; }, 60) == false);  // 35 frame gaps
  CHECK(writes() == before);
}

TEST_CASE("engine: a stop takes the commands posted before it and sends what they owe peers",
          "[engine][cm]") {
  // conduitd stops by releasing every client (the control thread posts kRemoveClient, and
  // kRemoveQp for each QP, without waiting for the engine) and then stopping the engine. An
  // engine that left its loop at once, with those commands still in its ring, never removed
  // the QPs: their peers got no DREQ (nor final ACK) and learned of the stop only by
  // retrying into nothing.
  Fixture f(Fixture::Options{.connect_qps = false});
  CmEvents ev{f};
  REQUIRE(ev.establish(7));
  const uint64_t commands = f.b.engine->counters().commands;
  control::EngineCommand gone;
  gone.op = control::EngineOp::kRemoveClient;
  f.b.submit(gone);
  f.b.engine->stop();
  const uint64_t t0 = engine::tsc_now_ns();
  f.b.engine->run();  // stopped already: its last round only
  CHECK(engine::tsc_now_ns() - t0 < 1'000'000'000);
  CHECK(f.b.engine->counters().commands == commands + 1);
  // a alone (b runs no more) hears of the disconnect.
  CHECK(run_until(
      f.a, f.a,
      [&] {
        take_events(f.a, ev.a);
        return find_cm(ev.a, proto::CmEventKind::kDisconnected) != nullptr;
      },
      2000));
}

TEST_CASE("engine: QPs created after a reload connect with its transport defaults",
          "[engine][cm][policy]") {
  Fixture f(Fixture::Options{.connect_qps = false});
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  // Both daemons reload: path MTU 512 and selective repeat for every connection. The QPs
  // made before keep theirs; new ones (same slot, new QPNs) get the new defaults.
  for (Host* h : {&f.a, &f.b}) {
    engine::PolicyUpdate u;
    u.classes.push_back(class_spec("default", 26, wire::kEcnEct0, cc::ControllerKind::kNone));
    u.qp_defaults.reset_attr.pmtu_bytes = 512;  // (below the old default, 1024)
    u.offer_selective_repeat = true;
    REQUIRE(set_policy(f, *h, &u) == 0);
    control::EngineCommand c;
    c.op = control::EngineOp::kRemoveQp;
    c.qpn = h->qpn;
    h->submit(c);
    h->qpn += 0x100;
    c = {};
    c.op = control::EngineOp::kAddQp;
    c.qpn = h->qpn;
    c.qp_slot = 0;
    h->submit(c);
  }
  CmEvents ev{f};
  auto& ev_a = ev.a;
  auto& ev_b = ev.b;
  control::EngineCommand listen;
  listen.op = control::EngineOp::kCmListen;
  listen.cm.service = 6;
  f.b.submit(listen);
  // Neither side names an MTU or asks for selective repeat.
  auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, 0, false, "req");
  conn.cm.peer = proto::cm_addr_v4(f.addr_b.value);
  conn.cm.service = 6;
  f.a.submit(conn);
  REQUIRE(ev.pump([&] { return find_cm(ev_b, proto::CmEventKind::kRequest) != nullptr; }));
  const control::CmEventInfo req = find_cm(ev_b, proto::CmEventKind::kRequest)->cm;
  CHECK(req.pmtu_bytes == 512);
  CHECK(req.flags == proto::kCmFlagSelectiveRepeat);
  auto accept = cm_cmd(control::EngineOp::kCmAccept, f.b.qpn, 0, false, "rep");
  accept.cm.conn = req.conn;
  f.b.submit(accept);
  REQUIRE(ev.pump([&] {
    return find_cm(ev_a, proto::CmEventKind::kEstablished) != nullptr &&
           find_cm(ev_b, proto::CmEventKind::kEstablished) != nullptr;
  }));
  const control::CmEventInfo ea = find_cm(ev_a, proto::CmEventKind::kEstablished)->cm;
  CHECK(ea.qpn == f.a.qpn);
  CHECK(ea.pmtu_bytes == 512);
  CHECK(ea.flags == proto::kCmFlagSelectiveRepeat);
  CHECK(find_cm(ev_b, proto::CmEventKind::kEstablished)->cm.pmtu_bytes == 512);
  // And a SEND crosses it.
  std::memcpy(f.a.arena(), "new defaults", 13);
  post_recv(f.b, 1, 0, 64);
  post_send(f.a, 2, CONDUIT_SHM_WR_SEND, 0, 13);
  conduit_shm_cqe cqe = wait_cqe(f, f.b);
  CHECK(cqe.status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.b.arena(), "new defaults", 13) == 0);
}

// The statuses of the commands acknowledged so far, in order.
std::vector<int32_t> ack_statuses(Host& h) {
  std::vector<int32_t> out;
  control::EngineEvent ev[64];
  uint32_t n;
  while ((n = h.channel->poll_events(ev, 64)) > 0) {
    for (uint32_t i = 0; i < n; ++i) {
      if (ev[i].kind == control::EngineEventKind::kAck) out.push_back(ev[i].status);
    }
  }
  return out;
}

// With the fixture's QPs left in RESET: a's client, CQ and QP acknowledged, a's QP moved to
// INIT (acknowledged 0 in turn), and the RTR modify toward b's QP returned for the test to
// finish (its GID and path MTU) and submit.
control::EngineCommand init_a_for_rtr(Fixture& f) {
  for (int i = 0; i < 100; ++i) f.a.engine->poll_once(engine::tsc_now_ns());
  ack_statuses(f.a);  // the client, CQ and QP
  control::EngineCommand c;
  c.op = control::EngineOp::kModifyQp;
  c.qpn = f.a.qpn;
  c.attr.mask = proto::kAttrState | proto::kAttrAccess;
  c.attr.state = proto::QpState::kInit;
  c.attr.access = proto::kAccessAll;
  f.a.submit(c);
  c.attr = {};
  c.attr.mask = proto::kAttrState | proto::kAttrPathMtu | proto::kAttrDestQpn | proto::kAttrRqPsn |
                proto::kAttrDgid;
  c.attr.state = proto::QpState::kRtr;
  c.attr.dest_qpn = f.b.qpn;
  c.attr.path_mtu = 3;  // 1024 B
  return c;
}

TEST_CASE("engine: a path MTU the port cannot carry is refused with EINVAL, as verbs does",
          "[engine]") {
  Fixture::Options o;
  o.connect_qps = false;
  Fixture f(o);
  REQUIRE(f.a.port->mtu_bytes() == 1500);
  control::EngineCommand c = init_a_for_rtr(f);
  c.attr.dgid[10] = c.attr.dgid[11] = 0xFF;
  c.attr.dgid[12] = 198;
  c.attr.dgid[13] = 18;
  c.attr.dgid[15] = 2;
  c.attr.path_mtu = 4;  // 2048 B: needs an IP MTU of 2112
  f.a.submit(c);
  c.attr.path_mtu = 3;  // 1024 B: fits 1500
  f.a.submit(c);
  for (int i = 0; i < 100; ++i) f.a.engine->poll_once(engine::tsc_now_ns());
  CHECK(ack_statuses(f.a) == std::vector<int32_t>{0, -EINVAL, 0});
}

namespace {
void enqueue_frame(Host& from, rte_ring* ring, const std::vector<uint8_t>& bytes);  // below

// A Router Advertisement from fe80::fe to ff02::1 (router lifetime 0: no default router) with
// one MTU option.
std::vector<uint8_t> ra_with_mtu(uint32_t mtu) {
  const net::Ipv6Addr src{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFE}};
  const net::Ipv6Addr dst{{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  std::vector<uint8_t> icmp = {134,
                               0,
                               0,
                               0,
                               64,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               5,
                               1,
                               0,
                               0,
                               static_cast<uint8_t>(mtu >> 24),
                               static_cast<uint8_t>(mtu >> 16),
                               static_cast<uint8_t>(mtu >> 8),
                               static_cast<uint8_t>(mtu)};
  const uint16_t sum = net::checksum_finish(net::checksum_partial(
      icmp, net::ipv6_pseudo_header_sum(src, dst, static_cast<uint32_t>(icmp.size()), 58)));
  icmp[2] = static_cast<uint8_t>(sum >> 8);
  icmp[3] = static_cast<uint8_t>(sum);
  std::vector<uint8_t> f = {
      0x33, 0x33, 0,    0,    0,    1, 0x02, 0, 0, 0,
      0,    0xFE, 0x86, 0xDD, 0x60, 0, 0,    0, 0, static_cast<uint8_t>(icmp.size()),
      58,   255};
  f.insert(f.end(), src.bytes.begin(), src.bytes.end());
  f.insert(f.end(), dst.bytes.begin(), dst.bytes.end());
  f.insert(f.end(), icmp.begin(), icmp.end());
  return f;
}
}  // namespace

TEST_CASE("engine: a link MTU from a Router Advertisement bounds IPv6 path MTUs and CM offers",
          "[engine][ipv6][cm]") {
  struct Restore {
    ~Restore() {
      g_ipv6 = false;
      g_port_mtu = 0;
    }
  } restore;
  g_ipv6 = true;
  g_port_mtu = 2200;  // carries a 2048-byte path MTU over IPv6 (2048 + 84)
  Fixture::Options o;
  o.connect_qps = false;
  Fixture f(o);
  REQUIRE(f.a.port->mtu_bytes() == 2200);
  // Without an RA, 2048 would fit the port.
  control::EngineCommand c = init_a_for_rtr(f);
  c.attr.dgid = host_addr6(0x22).bytes;
  c.attr.path_mtu = 4;  // 2048 B
  // The router says the link carries 1280: a's IPv6 frames must fit it from now on.
  enqueue_frame(f.b, f.ba, ra_with_mtu(1280));
  REQUIRE(run_until(f.a, f.b, [&] { return f.a.engine->net().link_mtu6() == 1280; }));
  CHECK(take_snapshot(f, f.a).counters.at("net.link_mtu6") == 1280);
  f.a.submit(c);
  c.attr.path_mtu = 3;  // 1024 B: 1108 bytes fit 1280
  f.a.submit(c);
  for (int i = 0; i < 100; ++i) f.a.engine->poll_once(engine::tsc_now_ns());
  CHECK(ack_statuses(f.a) == std::vector<int32_t>{-EINVAL, 0});  // (INIT's was taken above)
  // A CM connect from a that asks for 4096 offers 1024 (what 1280 carries); b, whose link MTU
  // is the port's 2200, would have offered 2048.
  CmEvents ev{f};
  control::EngineCommand listen;
  listen.op = control::EngineOp::kCmListen;
  listen.cm.service = 9;
  f.b.submit(listen);
  control::EngineCommand add;
  add.op = control::EngineOp::kAddQp;
  add.qpn = f.a.qpn + 0x100;
  add.qp_slot = 1;
  f.a.submit(add);
  auto conn = cm_cmd(control::EngineOp::kCmConnect, add.qpn, 4096, false, "");
  conn.cm.peer = host_addr6(0x22).bytes;
  conn.cm.service = 9;
  f.a.submit(conn);
  REQUIRE(ev.pump([&] { return find_cm(ev.b, proto::CmEventKind::kRequest) != nullptr; }));
  CHECK(find_cm(ev.b, proto::CmEventKind::kRequest)->cm.pmtu_bytes == 1024);
  CHECK(f.b.engine->net().link_mtu6() == 0);
}

TEST_CASE("engine: an IPv6 GID without port.address6 is refused with EINVAL", "[engine][ipv6]") {
  Fixture::Options o;
  o.connect_qps = false;
  Fixture f(o);
  control::EngineCommand c = init_a_for_rtr(f);
  c.attr.dgid = host_addr6(0x22).bytes;
  f.a.submit(c);
  for (int i = 0; i < 100; ++i) f.a.engine->poll_once(engine::tsc_now_ns());
  CHECK(ack_statuses(f.a) == std::vector<int32_t>{0, -EINVAL});
}

TEST_CASE("engine: a connect to a service nobody listens on is rejected with the reason",
          "[engine][cm]") {
  Fixture f(Fixture::Options{.connect_qps = false});
  std::vector<control::EngineEvent> ev_a, ev_b;
  auto conn = cm_cmd(control::EngineOp::kCmConnect, f.a.qpn, 1024, false, "x");
  conn.cm.peer = proto::cm_addr_v4(f.addr_b.value);
  conn.cm.service = 6;
  f.a.submit(conn);
  REQUIRE(run_until(f.a, f.b, [&] {
    take_events(f.a, ev_a);
    take_events(f.b, ev_b);
    return find_cm(ev_a, proto::CmEventKind::kRejected) != nullptr;
  }));
  const control::CmEventInfo r = find_cm(ev_a, proto::CmEventKind::kRejected)->cm;
  CHECK(r.reason == proto::kCmNoListener);
  CHECK(r.qpn == f.a.qpn);
  CHECK(find_cm(ev_b, proto::CmEventKind::kRequest) == nullptr);
}

namespace {
// The first RoCE frame (to UDP 4791) waiting in `ring`, copied; the ring keeps its frames.
std::vector<uint8_t> copy_roce_frame(rte_ring* ring) {
  std::vector<uint8_t> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    if (out.empty() && len >= 58 && f[12] == 0x08 && f[23] == 17 &&
        (f[36] << 8 | f[37]) == wire::kRoceUdpPort) {
      out.assign(f, f + len);
    }
  });
  return out;
}

void enqueue_frame(Host& from, rte_ring* ring, const std::vector<uint8_t>& bytes) {
  rte_mbuf* m = from.port->alloc_mbuf();
  REQUIRE(m != nullptr);
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), bytes.data(), bytes.size());
  m->data_len = m->pkt_len = static_cast<uint32_t>(bytes.size());
  void* obj = m;
  REQUIRE(rte_ring_enqueue_bulk(ring, &obj, 1, nullptr) == 1);
}
}  // namespace

TEST_CASE(
    "engine: an established QP's frames take the fast path; altered ones get the full path's "
    "verdict",
    "[engine][rxfast]") {
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const uint32_t len = 200'000;
  fill_random(f.a.arena(), len, 3);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, len, 1 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), len) == 0);
  const engine::EngineCounters& cb = f.b.engine->counters();
  const engine::EngineCounters& ca = f.a.engine->counters();
  INFO(describe(f.a) << "; " << describe(f.b));
  // The data on b and the ACKs on a: all but the first frames of each QP.
  CHECK(cb.rx_roce_fast > 0);
  CHECK(cb.rx_roce_fast + 2 >= cb.rx_roce);
  CHECK(ca.rx_roce_fast > 0);
  // Every frame was still counted by the stack and delivered as before.
  CHECK(f.b.engine->net().counters().rx_udp_delivered == cb.rx_roce);
  CHECK(f.b.engine->net().counters().rx_frames == cb.rx_frames);
  CHECK(take_snapshot(f, f.b).counters.at("engine.rx_roce_fast") == cb.rx_roce_fast);

  // One more WRITE, its first frame held back and replayed altered into b.
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 2 << 20);
  std::vector<uint8_t> frame;
  REQUIRE(run_until(f.a, f.a, [&] {
    frame = copy_roce_frame(f.ab);
    return !frame.empty();
  }));
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  expect_acks_ok(f.b);
  struct Alteration {
    const char* name;
    void (*edit)(std::vector<uint8_t>&);
    bool fast;  // the fast path takes it (and decides as the full path would)
  };
  const Alteration alterations[] = {
      {"dst MAC", [](std::vector<uint8_t>& x) { x[5] ^= 1; }, false},
      {"src IP another host",
       [](std::vector<uint8_t>& x) {
         x[29] = 3;
         fix_ipv4_checksum(x.data());
         // A whole valid frame from 198.18.0.3 (the ICRC covers the address).
         wire::icrc_store(wire::icrc_ipv4_datagram(x.data() + 14, x.size() - 18),
                          x.data() + x.size() - 4);
       },
       false},
      {"IP checksum", [](std::vector<uint8_t>& x) { x[25] ^= 1; }, false},
      {"UDP checksum", [](std::vector<uint8_t>& x) { x[41] = 1; }, false},
      {"dest QPN", [](std::vector<uint8_t>& x) { x[49] ^= 0x40; }, false},
      {"ICRC", [](std::vector<uint8_t>& x) { x.back() ^= 1; }, true},
      {"unchanged (a duplicate)", [](std::vector<uint8_t>&) {}, true},
  };
  for (const Alteration& alt : alterations) {
    INFO(alt.name);
    std::vector<uint8_t> x = frame;
    alt.edit(x);
    const engine::EngineCounters before = cb;
    const net::NetCounters net_before = f.b.engine->net().counters();
    enqueue_frame(f.a, f.ab, x);
    REQUIRE(run_until(f.a, f.b, [&] { return cb.rx_frames == before.rx_frames + 1; }));
    const net::NetCounters& n = f.b.engine->net().counters();
    CHECK(cb.rx_roce_fast == before.rx_roce_fast + (alt.fast ? 1 : 0));
    CHECK(n.rx_frames == net_before.rx_frames + 1);
    if (std::string(alt.name) == "dst MAC") {
      CHECK(n.drops(net::RxDrop::kNotOurMac) == net_before.drops(net::RxDrop::kNotOurMac) + 1);
    } else if (std::string(alt.name) == "src IP another host") {
      CHECK(cb.rx_wrong_peer == before.rx_wrong_peer + 1);
    } else if (std::string(alt.name) == "IP checksum") {
      CHECK(n.drops(net::RxDrop::kIpBadChecksum) ==
            net_before.drops(net::RxDrop::kIpBadChecksum) + 1);
    } else if (std::string(alt.name) == "UDP checksum") {
      CHECK(n.drops(net::RxDrop::kUdpBadChecksum) ==
            net_before.drops(net::RxDrop::kUdpBadChecksum) + 1);
    } else if (std::string(alt.name) == "dest QPN") {
      CHECK(cb.rx_unknown_qp == before.rx_unknown_qp + 1);
    } else if (std::string(alt.name) == "ICRC") {
      const size_t icrc = static_cast<size_t>(wire::DropReason::kIcrc);
      CHECK(cb.rx_wire_drops[icrc] == before.rx_wire_drops[icrc] + 1);
      CHECK(n.rx_udp_delivered == net_before.rx_udp_delivered + 1);
    }
  }

  // Valid frames from the peer that differ from the others (another TTL: the
  // ICRC does not cover it), accepted by the full path as duplicates, neither
  // move the expectation nor switch the fast path off: the next WRITE's
  // frames all take it.
  {
    std::vector<uint8_t> x = frame;
    x[22] = static_cast<uint8_t>(x[22] - 7);
    fix_ipv4_checksum(x.data());
    const engine::EngineCounters before = cb;
    for (int k = 0; k < 8; ++k) {
      enqueue_frame(f.a, f.ab, x);
      REQUIRE(run_until(f.a, f.b, [&] { return cb.rx_frames == before.rx_frames + k + 1; }));
    }
    CHECK(cb.rx_roce_fast == before.rx_roce_fast);
    CHECK(cb.rx_roce == before.rx_roce + 8);
    expect_acks_ok(f.b);
    const engine::EngineCounters mid = cb;
    post_send(f.a, 4, CONDUIT_SHM_WR_RDMA_WRITE, 0, 8192, 4 << 20);
    REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
    CHECK(cb.rx_roce - mid.rx_roce >= 2);
    CHECK(cb.rx_roce_fast - mid.rx_roce_fast == cb.rx_roce - mid.rx_roce);
  }

  // A modify resets the expectation: the next frame takes the full path and re-learns it.
  control::EngineCommand c;
  c.op = control::EngineOp::kModifyQp;
  c.qpn = f.b.qpn;
  c.attr.mask = proto::kAttrMinRnrTimer;
  c.attr.min_rnr_timer = 2;
  f.b.submit(c);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 20) == false);
  expect_acks_ok(f.b);
  const engine::EngineCounters before = cb;
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_WRITE, 0, 8192, 3 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(cb.rx_roce - before.rx_roce >= 2);
  CHECK(cb.rx_roce_fast - before.rx_roce_fast == cb.rx_roce - before.rx_roce - 1);
}

namespace {
// An untagged ARP packet (op 1 request, 2 reply), written byte by byte (RFC 826).
std::vector<uint8_t> arp_packet(uint16_t op, net::MacAddr eth_dst, net::MacAddr sender_mac,
                                net::Ipv4Addr sender_ip, net::Ipv4Addr target_ip) {
  std::vector<uint8_t> f(eth_dst.bytes.begin(), eth_dst.bytes.end());
  f.insert(f.end(), sender_mac.bytes.begin(), sender_mac.bytes.end());
  const auto be32 = [&f](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) f.push_back(static_cast<uint8_t>(v >> s));
  };
  const uint8_t fixed[] = {0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, static_cast<uint8_t>(op)};
  f.insert(f.end(), std::begin(fixed), std::end(fixed));
  f.insert(f.end(), sender_mac.bytes.begin(), sender_mac.bytes.end());
  be32(sender_ip.value);
  f.insert(f.end(), 6, 0);  // target MAC
  be32(target_ip.value);
  f.resize(60, 0);
  return f;
}

// The destination MACs of the RoCE frames (to UDP 4791, untagged, over IPv4 or IPv6) waiting in
// `ring`, in order; the ring keeps its frames.
std::vector<net::MacAddr> roce_dst_macs(rte_ring* ring) {
  std::vector<net::MacAddr> out;
  for_each_frame(ring, [&](const uint8_t* f, size_t len) {
    const bool v4 = len >= 58 && f[12] == 0x08 && f[13] == 0x00 && f[23] == 17 &&
                    (f[36] << 8 | f[37]) == wire::kRoceUdpPort;
    const bool v6 = len >= 78 && f[12] == 0x86 && f[13] == 0xDD && f[20] == 17 &&
                    (f[56] << 8 | f[57]) == wire::kRoceUdpPort;
    if (v4 || v6) {
      net::MacAddr mac;
      std::memcpy(mac.bytes.data(), f, 6);
      out.push_back(mac);
    }
  });
  return out;
}
}  // namespace

TEST_CASE(
    "engine: a connected QP follows its peer's new MAC; an ARP repeating the MAC changes "
    "nothing",
    "[engine][arp]") {
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const net::MacAddr mac_b{{0x02, 0, 0, 0, 0, 0x22}};  // make_engine's MAC of b
  const net::MacAddr mac_a{{0x02, 0, 0, 0, 0, 0x11}};
  const net::MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};  // b's NIC replaced
  fill_random(f.a.arena(), 16384, 5);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  const engine::EngineCounters& ca = f.a.engine->counters();
  const net::NetStack& na = f.a.engine->net();
  REQUIRE(na.neighbours().find(f.addr_b)->mac == mac_b);
  const uint64_t arp_tx = na.counters().tx_arp_requests;

  // b repeats its MAC, as a busy peer does: an ARP reply to a and a gratuitous ARP.
  const uint64_t gen = na.generation();
  const uint64_t replies = na.counters().rx_arp_replies;
  const uint64_t not_for_us = na.counters().drops(net::RxDrop::kArpNotForUs);
  enqueue_frame(f.b, f.ba, arp_packet(2, mac_a, mac_b, f.addr_b, f.addr_a));
  enqueue_frame(f.b, f.ba, arp_packet(1, net::MacAddr::broadcast(), mac_b, f.addr_b, f.addr_b));
  REQUIRE(run_until(f.a, f.a, [&] {
    return na.counters().rx_arp_replies == replies + 1 &&
           na.counters().drops(net::RxDrop::kArpNotForUs) == not_for_us + 1;
  }));
  CHECK(na.generation() == gen);
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 2 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(ca.peers_reresolved == 0);  // the QP did not look its peer up again
  CHECK(na.counters().tx_arp_requests == arp_tx);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), 4096) == 0);

  // b's address announced at a new MAC (gratuitous ARP): the QP's next frames go there, at
  // once, no broadcast ARP request; the entry is STALE (a gratuitous ARP does not prove the
  // new MAC reachable), so its use probes it with one unicast request to the new MAC.
  enqueue_frame(f.b, f.ba, arp_packet(1, net::MacAddr::broadcast(), moved, f.addr_b, f.addr_b));
  REQUIRE(run_until(f.a, f.a, [&] { return na.neighbours().find(f.addr_b)->mac == moved; }));
  CHECK(na.generation() != gen);
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_WRITE, 4096, 4096, 3 << 20);
  std::vector<net::MacAddr> macs;
  REQUIRE(run_until(f.a, f.a, [&] {
    macs = roce_dst_macs(f.ab);
    return !macs.empty();
  }));
  for (const net::MacAddr& m : macs) CHECK(m == moved);
  CHECK(ca.peers_reresolved == 1);
  CHECK(ca.peers_reresolve_kept == 0);
  CHECK(na.counters().tx_arp_requests == arp_tx + 1);

  // b (still at 0x22) drops those; announced back at its own MAC, the QP's retransmissions
  // reach it and the WRITE completes.
  enqueue_frame(f.b, f.ba, arp_packet(1, net::MacAddr::broadcast(), mac_b, f.addr_b, f.addr_b));
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(f.b.engine->net().counters().drops(net::RxDrop::kNotOurMac) >= macs.size());
  CHECK(std::memcmp(f.a.arena() + 4096, f.b.arena() + (3 << 20), 4096) == 0);
  CHECK(ca.peers_reresolved == 2);
  CHECK(take_snapshot(f, f.a).counters.at("engine.peers_reresolved") == 2);
}

namespace {
// An untagged Ethernet/IPv6 frame (hop limit 255, as neighbour discovery requires) from `src`
// at `src_mac` to `dst` at `dst_mac` carrying the ICMPv6 message `icmp`, its checksum filled in.
std::vector<uint8_t> icmp6_frame(net::MacAddr dst_mac, net::MacAddr src_mac,
                                 const net::Ipv6Addr& src, const net::Ipv6Addr& dst,
                                 std::vector<uint8_t> icmp) {
  const uint16_t sum = net::checksum_finish(net::checksum_partial(
      icmp, net::ipv6_pseudo_header_sum(src, dst, static_cast<uint32_t>(icmp.size()), 58)));
  icmp[2] = static_cast<uint8_t>(sum >> 8);
  icmp[3] = static_cast<uint8_t>(sum);
  std::vector<uint8_t> f(dst_mac.bytes.begin(), dst_mac.bytes.end());
  f.insert(f.end(), src_mac.bytes.begin(), src_mac.bytes.end());
  const uint8_t ip[] = {0x86, 0xDD, 0x60, 0, 0, 0, 0, static_cast<uint8_t>(icmp.size()), 58, 255};
  f.insert(f.end(), std::begin(ip), std::end(ip));
  f.insert(f.end(), src.bytes.begin(), src.bytes.end());
  f.insert(f.end(), dst.bytes.begin(), dst.bytes.end());
  f.insert(f.end(), icmp.begin(), icmp.end());
  return f;
}

// A Router Advertisement from `router` (link-local) at `mac` to ff02::1: router lifetime
// `lifetime_s` (0: not a default router), its MAC in an SLLA option and, when `onlink_len` is
// not 0, a Prefix Information option making onlink/onlink_len on-link for an hour.
std::vector<uint8_t> ra_frame6(const net::Ipv6Addr& router, net::MacAddr mac, uint16_t lifetime_s,
                               const net::Ipv6Addr& onlink = {}, uint8_t onlink_len = 0,
                               uint8_t cur_hop_limit = 64) {
  const net::Ipv6Addr dst{{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  std::vector<uint8_t> icmp = {134, 0, 0, 0, cur_hop_limit, 0};
  icmp.push_back(static_cast<uint8_t>(lifetime_s >> 8));
  icmp.push_back(static_cast<uint8_t>(lifetime_s));
  icmp.insert(icmp.end(), 8, 0);  // reachable time, retrans timer: unspecified
  icmp.push_back(1);              // SLLA, 8 bytes
  icmp.push_back(1);
  icmp.insert(icmp.end(), mac.bytes.begin(), mac.bytes.end());
  if (onlink_len != 0) {
    const uint8_t pio[16] = {3, 4, onlink_len, 0x80, 0, 0, 0x0E, 0x10, 0, 0, 0x0E, 0x10};
    icmp.insert(icmp.end(), std::begin(pio), std::end(pio));
    icmp.insert(icmp.end(), onlink.bytes.begin(), onlink.bytes.end());
  }
  return icmp6_frame(net::MacAddr{{0x33, 0x33, 0, 0, 0, 1}}, mac, router, dst, std::move(icmp));
}

// The Neighbor Advertisement `router` at `mac` answers a's probe with (Router, Solicited,
// Override, its MAC in a TLLA option), to a (host_addr6(0x11) at 02::11).
std::vector<uint8_t> router_na6(const net::Ipv6Addr& router, net::MacAddr mac) {
  const net::Ipv6Addr dst = host_addr6(0x11);
  std::vector<uint8_t> icmp = {136, 0, 0, 0, 0xE0, 0, 0, 0};
  icmp.insert(icmp.end(), router.bytes.begin(), router.bytes.end());
  icmp.push_back(2);  // TLLA, 8 bytes
  icmp.push_back(1);
  icmp.insert(icmp.end(), mac.bytes.begin(), mac.bytes.end());
  return icmp6_frame(net::MacAddr{{0x02, 0, 0, 0, 0, 0x11}}, mac, router, dst, std::move(icmp));
}

// Frees every frame waiting in `ring`; returns how many there were.
size_t drain_ring(rte_ring* ring) {
  void* objs[1024];
  size_t total = 0;
  for (unsigned n; (n = rte_ring_dequeue_burst(ring, objs, 1024, nullptr)) > 0; total += n) {
    for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
  }
  return total;
}

net::Ipv6Addr link_local(uint8_t low) {
  return net::Ipv6Addr{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, low}};
}

// Two hosts with global IPv6 addresses in different /64s, connected through routers: a learns
// its default router from RAs (none yet); b sends everything for a through gateway6 fe80::a,
// a static neighbour at a's MAC. a's QP is connected by the test once a has a route (set_peer6
// refuses a peer without one). a rechecks a resolved peer every 10 ms (refresh window 40 ms).
struct RoutedIpv6 {
  struct Restore {
    ~Restore() {
      g_ipv6 = false;
      g_ipv6_global = false;
      g_engine_config_hook = nullptr;
    }
  } restore;
  std::optional<Fixture> f;
  const net::MacAddr mac_a{{0x02, 0, 0, 0, 0, 0x11}};
  const net::MacAddr mac_b{{0x02, 0, 0, 0, 0, 0x22}};
  const net::MacAddr nowhere{{0x02, 0, 0, 0, 0, 0x33}};  // a router port nobody receives on

  RoutedIpv6() {
    g_ipv6 = true;
    g_ipv6_global = true;
    g_engine_config_hook = [](engine::EngineConfig& ec, uint8_t mac_low) {
      if (mac_low == 0x22) {
        ec.net.gateway6 = link_local(0x0A);
        ec.net.static_neighbours6.push_back({link_local(0x0A), {{0x02, 0, 0, 0, 0, 0x11}}});
      } else {
        ec.net.neighbour.refresh_window_ns = 40'000'000;
      }
    };
    Fixture::Options o;
    o.connect_qps = false;
    f.emplace(o);
  }
  void connect_qps() {
    connect(f->a, f->b, f->addr_b);
    connect(f->b, f->a, f->addr_a);
    REQUIRE(run_until(
                f->a, f->b, [] { return false; }, 50) == false);
    expect_acks_ok(f->a);
    expect_acks_ok(f->b);
  }
  // Frames from "the link" to a, then a runs until pred().
  template <class Pred>
  void to_a(const std::vector<uint8_t>& frame, Pred pred) {
    enqueue_frame(f->b, f->ba, frame);
    REQUIRE(run_until(f->a, f->a, pred));
  }
  // An RA from `router` at `mac`, then the router's answer to a's probe: an RA leaves a
  // router's new MAC STALE (probed on use, aged out unconfirmed); a real router answers the
  // probe, and this one is nobody's port.
  template <class Pred>
  void ra_to_a(const std::vector<uint8_t>& ra, const net::Ipv6Addr& router, net::MacAddr mac,
               Pred pred) {
    to_a(ra, pred);
    const net::NetStack& na = f->a.engine->net();
    const uint64_t rx_na = na.counters().rx_na;
    to_a(router_na6(router, mac), [&] { return na.counters().rx_na == rx_na + 1; });
  }
};
}  // namespace

TEST_CASE(
    "engine: a connected QP to a global IPv6 peer follows its router (a new RA router, a new "
    "router MAC); one that loses its route is counted once",
    "[engine][ipv6][route]") {
  RoutedIpv6 r;
  Fixture& f = *r.f;
  const net::NetStack& na = f.a.engine->net();
  const engine::EngineCounters& ca = f.a.engine->counters();
  const net::Ipv6Addr r1 = link_local(1);  // b's port, as a router
  const net::Ipv6Addr r2 = link_local(2);  // first at a MAC nobody receives on
  r.ra_to_a(ra_frame6(r1, r.mac_b, 1800), r1, r.mac_b, [&] { return na.learned_router6() == r1; });
  r.connect_qps();
  fill_random(f.a.arena(), 16384, 11);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), 4096) == 0);
  CHECK(ca.peers_reresolved == 0);

  // Another router takes over (r1 withdraws): the QP's next frames go to r2's MAC.
  enqueue_frame(f.b, f.ba, ra_frame6(r2, r.nowhere, 1800));
  r.ra_to_a(ra_frame6(r1, r.mac_b, 0), r2, r.nowhere, [&] { return na.learned_router6() == r2; });
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 4096, 4096, 2 << 20);
  std::vector<net::MacAddr> macs;
  REQUIRE(run_until(f.a, f.a, [&] {
    macs = roce_dst_macs(f.ab);
    return !macs.empty();
  }));
  for (const net::MacAddr& m : macs) CHECK(m == r.nowhere);
  CHECK(ca.peers_reresolved == 1);

  // r2's port moves to b's MAC (its RA says so): the retransmissions reach b.
  r.ra_to_a(ra_frame6(r2, r.mac_b, 1800), r2, r.mac_b,
            [&] { return na.neighbours6().find(r2)->mac == r.mac_b; });
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + 4096, f.b.arena() + (2 << 20), 4096) == 0);
  CHECK(f.b.engine->net().counters().drops(net::RxDrop::kNotOurMac) >= macs.size());
  CHECK(ca.peers_reresolved == 2);
  CHECK(ca.peers_reresolve_kept == 0);

  // r2 withdraws, no router is left: the QP keeps r2's MAC and still gets through. Counted
  // once, not again when the net stack changes without giving a route back (an RA whose
  // prefix does not cover b), nor at its rechecks (every 10 ms).
  r.to_a(ra_frame6(r2, r.mac_b, 0), [&] { return !na.learned_router6(); });
  const net::Ipv6Addr other_prefix{{0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0x99}};
  r.to_a(ra_frame6(r1, r.mac_b, 0, other_prefix, 64),
         [&] { return na.learned_prefixes6().size() == 1; });
  post_send(f.a, 3, CONDUIT_SHM_WR_RDMA_WRITE, 8192, 4096, 3 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + 8192, f.b.arena() + (3 << 20), 4096) == 0);
  const uint64_t until = engine::tsc_now_ns() + 60'000'000;
  REQUIRE(run_until(f.a, f.b, [&] { return engine::tsc_now_ns() > until; }));
  CHECK(ca.peers_reresolve_kept == 1);
  CHECK(ca.peers_reresolved == 4);

  // A route again (r1 back), then lost again: counted again.
  r.to_a(ra_frame6(r1, r.mac_b, 1800), [&] { return na.learned_router6() == r1; });
  post_send(f.a, 4, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 4 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(ca.peers_reresolve_kept == 1);
  r.to_a(ra_frame6(r1, r.mac_b, 0), [&] { return !na.learned_router6(); });
  post_send(f.a, 5, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 5 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(ca.peers_reresolve_kept == 2);
  CHECK(take_snapshot(f, f.a).counters.at("engine.peers_reresolve_kept") == 2);
}

TEST_CASE(
    "engine: a connected QP to a global IPv6 peer goes to it directly once an RA makes its "
    "prefix on-link",
    "[engine][ipv6][route]") {
  RoutedIpv6 r;
  Fixture& f = *r.f;
  const net::NetStack& na = f.a.engine->net();
  const net::Ipv6Addr router = link_local(2);
  // The router's port is nowhere: the QP's frames to b through it are lost.
  r.ra_to_a(ra_frame6(router, r.nowhere, 1800), router, r.nowhere,
            [&] { return na.learned_router6() == router; });
  r.connect_qps();
  fill_random(f.a.arena(), 8192, 12);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
  std::vector<net::MacAddr> macs;
  REQUIRE(run_until(f.a, f.a, [&] {
    macs = roce_dst_macs(f.ab);
    return !macs.empty();
  }));
  for (const net::MacAddr& m : macs) CHECK(m == r.nowhere);
  const net::Ipv6Addr b6 = host_addr6(0x22);
  CHECK_FALSE(na.neighbours6().find(b6));

  // The router says b's /64 is on-link: a resolves b itself (NS, b's NA) and the
  // retransmissions go straight to b.
  const net::Ipv6Addr b_prefix{{0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0x22}};
  r.to_a(ra_frame6(router, r.nowhere, 1800, b_prefix, 64),
         [&] { return na.learned_prefixes6().size() == 1; });
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (1 << 20), 4096) == 0);
  REQUIRE(na.neighbours6().find(b6));
  CHECK(na.neighbours6().find(b6)->mac == r.mac_b);
  CHECK(f.a.engine->counters().peers_reresolved == 1);
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 4096, 4096, 2 << 20);
  REQUIRE(run_until(f.a, f.a, [&] {
    macs = roce_dst_macs(f.ab);
    return !macs.empty();
  }));
  for (const net::MacAddr& m : macs) CHECK(m == r.mac_b);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena() + 4096, f.b.arena() + (2 << 20), 4096) == 0);
}

TEST_CASE(
    "engine: frames waiting in the pacer when the next hop's MAC changes leave with the new one",
    "[engine][arp]") {
  Fixture::Options o;
  o.class_max_rate_bps = 50'000'000;  // 1 KB frames leave every ~170 us: the pacer holds some
  Fixture f(o);
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // commands, ARP
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const net::MacAddr mac_b{{0x02, 0, 0, 0, 0, 0x22}};
  const net::MacAddr moved{{0x02, 0, 0, 0, 0, 0x33}};
  const engine::EngineCounters& ca = f.a.engine->counters();
  const net::NetStack& na = f.a.engine->net();
  fill_random(f.a.arena(), 65536, 13);
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 1 << 20);
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);  // b resolved
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, 65536, 2 << 20);
  // a alone: its pacer fills; what already left (to b's MAC) is thrown away.
  const uint64_t until = engine::tsc_now_ns() + 2'000'000;
  REQUIRE(run_until(f.a, f.a, [&] { return engine::tsc_now_ns() > until; }));
  REQUIRE(drain_ring(f.ab) > 0);
  CHECK(ca.tx_restamped == 0);

  // b announced at another MAC: every frame that leaves from now on goes there, the ones
  // already queued included.
  enqueue_frame(f.b, f.ba, arp_packet(1, net::MacAddr::broadcast(), moved, f.addr_b, f.addr_b));
  REQUIRE(run_until(f.a, f.a, [&] { return na.neighbours().find(f.addr_b)->mac == moved; }));
  const uint64_t until2 = engine::tsc_now_ns() + 10'000'000;
  REQUIRE(run_until(f.a, f.a, [&] { return engine::tsc_now_ns() > until2; }));
  const std::vector<net::MacAddr> macs = roce_dst_macs(f.ab);
  REQUIRE(!macs.empty());
  size_t old_mac = 0;
  for (const net::MacAddr& m : macs) old_mac += m == mac_b;
  CHECK(old_mac == 0);
  CHECK(ca.tx_restamped > 0);
  // take_snapshot runs the engine, which may restamp more frames meanwhile: the snapshot's
  // value lies between the counter before and after it.
  const uint64_t restamped_before = ca.tx_restamped;
  const uint64_t restamped_snap = take_snapshot(f, f.a).counters.at("engine.tx_restamped");
  CHECK(restamped_snap >= restamped_before);
  CHECK(restamped_snap <= ca.tx_restamped);

  // Back at b's MAC: the WRITE completes (retransmitted).
  drain_ring(f.ab);
  enqueue_frame(f.b, f.ba, arp_packet(1, net::MacAddr::broadcast(), mac_b, f.addr_b, f.addr_b));
  REQUIRE(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);
  CHECK(std::memcmp(f.a.arena(), f.b.arena() + (2 << 20), 65536) == 0);
}

TEST_CASE("engine: an RA's Cur Hop Limit is the hop limit of a connected IPv6 QP's next frames",
          "[engine][ipv6][route]") {
  // RFC 4861 6.3.4: a nonzero Cur Hop Limit is the host's default hop limit; the QP's frame
  // template is rebuilt with it (the net stack's generation moved).
  const Ipv6Hosts ipv6_hosts;
  Fixture f;
  REQUIRE(run_until(
              f.a, f.b, [] { return false; }, 50) == false);  // apply commands
  expect_acks_ok(f.a);
  expect_acks_ok(f.b);
  const auto first_roce_hop_limit = [&] {
    int hop = -1;
    REQUIRE(run_until(f.a, f.a, [&] {
      for_each_frame(f.ab, [&](const uint8_t* fr, size_t len) {
        if (hop < 0 && len >= 62 && fr[12] == 0x86 && fr[13] == 0xDD && fr[20] == 17 &&
            (fr[56] << 8 | fr[57]) == wire::kRoceUdpPort) {
          hop = fr[21];
        }
      });
      return hop >= 0;
    }));
    return hop;
  };
  post_send(f.a, 1, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 2 << 20);
  CHECK(first_roce_hop_limit() == 64);
  CHECK(wait_cqe(f, f.a).status == CONDUIT_SHM_WC_SUCCESS);

  const net::NetStack& na = f.a.engine->net();
  enqueue_frame(f.b, f.ba, ra_frame6(link_local(0x0A), {{0x02, 0, 0, 0, 0, 0x33}}, 0, {}, 0, 9));
  REQUIRE(run_until(f.a, f.a, [&] { return na.hop_limit6() == 9; }));
  CHECK(na.counters().ra_hop_limit_set == 1);
  post_send(f.a, 2, CONDUIT_SHM_WR_RDMA_WRITE, 0, 4096, 2 << 20);
  CHECK(first_roce_hop_limit() == 9);
  CHECK(take_snapshot(f, f.a).counters.at("net.ra_hop_limit_set") == 1);
}
