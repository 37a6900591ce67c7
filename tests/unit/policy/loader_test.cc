#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "policy/loader.h"
#include "policy_test_util.h"

using namespace conduit::policy;
using namespace conduit::policy::test;

TEST_CASE("a minimal file gets every default") {
  LoadResult r = load(kPort);
  REQUIRE(r.ok());
  REQUIRE(r.errors.empty());
  const Policy& p = *r.policy;

  Policy expected;
  expected.port.device = "net_null0";
  expected.port.device_kind = DeviceKind::kVdev;
  expected.port.address = Ipv4Address{0xC6120001};
  expected.port.prefix_len = 24;
  CHECK(p == expected);

  CHECK(p.daemon.control_socket == "/run/conduit/conduitd.sock");
  CHECK(p.daemon.lcores == std::vector<uint32_t>{1});
  CHECK(p.daemon.idle_mode == IdleMode::kAdaptive);
  CHECK(p.daemon.metrics_max_qps == kDefaultMetricsMaxQps);
  CHECK_FALSE(p.daemon.metrics);  // off by default
  CHECK(p.port.mtu_bytes == 1500);
  CHECK_FALSE(p.port.vlan);  // untagged
  CHECK_FALSE(p.port.priority_tagging);
  CHECK(p.port.roce_udp_port == 4791);
  REQUIRE(p.traffic_classes.size() == 1);
  const TrafficClass& tc = p.default_class();
  CHECK(tc.name == "default");
  CHECK(tc.dscp == 26);
  CHECK(tc.ecn == EcnCodepoint::kEct0);
  CHECK(tc.priority == 3);
  CHECK(tc.congestion_control.algorithm == CcAlgorithm::kDcqcn);
  CHECK(tc.congestion_control.dcqcn == dcqcn_preset(DcqcnPreset::kMlx5));
  CHECK(p.cnp.dscp == 48);
  CHECK(p.cnp.priority == 6);
  CHECK(p.cnp.min_time_between_cnps_ns == 2'000);
  CHECK(p.transport.pmtu_bytes == 1024);
  CHECK(p.transport.local_ack_timeout_ns() == 4096ull << 14);
  CHECK(p.transport.loss_recovery == LossRecovery::kGoBackN);
  CHECK(p.clients.quotas.max_registered_bytes == 4ull << 30);
  CHECK(p.clients.quotas.max_send_wr == 256);
  CHECK(p.clients.quotas.max_recv_wr == 256);
  CHECK(p.clients.quotas.max_cqe == 1024);
  CHECK(p.clients.quotas.ring_bytes() == 24ull << 20);  // 256 x 64 KiB + 256 x 32 KiB
}

TEST_CASE("mlx5 preset carries the firmware defaults") {
  DcqcnParams m = dcqcn_preset(DcqcnPreset::kMlx5);
  CHECK(m.rpg_time_reset_ns == 300'000);
  CHECK(m.rpg_byte_reset_bytes == 32767ull * 64);
  CHECK(m.rpg_threshold == 1);
  CHECK(m.rpg_ai_rate_bps == 5'000'000);
  CHECK(m.rpg_hai_rate_bps == 50'000'000);
  CHECK(m.rpg_gd == 11);
  CHECK(m.rpg_min_dec_fac_percent == 50);
  CHECK(m.rpg_min_rate_bps == 1'000'000);
  CHECK(m.rpg_max_rate_bps == 0);
  CHECK(m.rate_to_set_on_first_cnp_bps == 0);
  CHECK(m.rate_reduce_monitor_period_ns == 4'000);
  CHECK(m.initial_alpha_value == 1023);
  CHECK(m.dce_tcp_g == 1019);
  CHECK(m.dce_tcp_rtt_ns == 1'000);
  CHECK_FALSE(m.clamp_tgt_rate);
  CHECK(m.clamp_tgt_rate_after_time_inc);

  DcqcnParams paper = dcqcn_preset(DcqcnPreset::kPaper);
  CHECK(paper.rpg_threshold == 5);
  CHECK(paper.dce_tcp_g == 1020);  // g = 1/256
  CHECK(paper.dce_tcp_rtt_ns == 55'000);
  CHECK(paper.rpg_ai_rate_bps == 40'000'000);
}

TEST_CASE("a preset is the starting point and knobs override it") {
  LoadResult r = load(std::string(kPort) +
                      "traffic_classes:\n"
                      "  - name: roce\n"
                      "    default: true\n"
                      "    dscp: 26\n"
                      "    congestion_control:\n"
                      "      preset: paper\n"
                      "      rpg_ai_rate: 20mbit\n"
                      "      clamp_tgt_rate: 0\n");
  REQUIRE(r.ok());
  const CongestionControl& cc = r.policy->default_class().congestion_control;
  DcqcnParams expected = dcqcn_preset(DcqcnPreset::kPaper);
  expected.rpg_ai_rate_bps = 20'000'000;
  expected.clamp_tgt_rate = false;
  CHECK(cc.preset == DcqcnPreset::kPaper);
  CHECK(cc.dcqcn == expected);
}

TEST_CASE("every section is read into its typed field") {
  LoadResult r = load(
      "daemon:\n"
      "  control_socket: /tmp/c.sock\n"
      "  socket_group: rdma\n"
      "  lcores: [2, 3]\n"
      "  log_level: debug\n"
      "  metrics_address: off\n"
      "  metrics_max_qps: 0\n"
      "  idle_mode: spin\n"
      "port:\n"
      "  device: 0000:3b:00.1\n"
      "  eal_args: [--no-huge, -m, '512']\n"
      "  address: 10.1.2.3/16\n"
      "  gateway: 10.1.0.1\n"
      "  address6: 2001:db8::3/64\n"
      "  neighbours:\n"
      "    10.1.9.9: 02-AA-bb-00-00-01\n"
      "    fe80::c0:12: 02:00:00:00:00:12\n"
      "    '2001:db8::9': 02:00:00:00:00:09\n"
      "  mtu: 9000\n"
      "  vlan: 100\n"
      "  line_rate: 100gbit\n"
      "  roce_udp_port: 4791\n"
      "  cm_udp_port: 5000\n"
      "  rx_descriptors: 4096\n"
      "  tx_descriptors: 512\n"
      "  mbufs: 16383\n"
      "traffic_classes:\n"
      "  - {name: a, default: true, dscp: 26, priority: 3, weight: 7, max_rate: 40gbit}\n"
      "  - {name: b, dscp: 46, ecn: not_ect, priority: 5, weight: strict,\n"
      "     congestion_control: {algorithm: fixed, rate: 2.5gbit}}\n"
      "  - {name: c, dscp: 0, ecn: ect1, congestion_control: none}\n"
      "cnp: {dscp: 40, priority: 7, min_time_between_cnps: 50us}\n"
      "transport:\n"
      "  pmtu: 4KiB\n"
      "  timeout: 0\n"
      "  retry_cnt: 3\n"
      "  rnr_retry: 0\n"
      "  min_rnr_timer: 1ms\n"
      "  ack_frequency: 16\n"
      "  window: 1000\n"
      "  loss_recovery: selective\n"
      "  bdp_cap: 128KiB\n"
      "  max_outstanding_reads: 8\n"
      "clients:\n"
      "  allowed_uids: [0, 1000]\n"
      "  allowed_gids: 2000\n"
      "  allowed_peers: [198.18.0.0/15, 10.1.9.9, 'fd00:0:12::/48', 'fe80::c0:12']\n"
      "  quotas: {max_qps: 8, max_cqs: 9, max_mrs: 10, max_registered_memory: 1GiB,\n"
      "           max_region_size: 1GiB, max_send_wr: 4096, max_recv_wr: 16, max_cqe: 65536}\n");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const Policy& p = *r.policy;
  CHECK(p.daemon.control_socket == "/tmp/c.sock");
  CHECK(p.daemon.socket_group == "rdma");
  CHECK(p.daemon.lcores == std::vector<uint32_t>{2, 3});
  CHECK(p.daemon.log_level == LogLevel::kDebug);
  CHECK_FALSE(p.daemon.metrics);
  CHECK(p.daemon.metrics_max_qps == 0);
  CHECK(p.daemon.idle_mode == IdleMode::kSpin);
  CHECK(p.port.device_kind == DeviceKind::kPci);
  CHECK(p.port.eal_args == std::vector<std::string>{"--no-huge", "-m", "512"});
  CHECK(p.port.address == Ipv4Address{0x0A010203});
  CHECK(p.port.prefix_len == 16);
  CHECK(p.port.gateway == Ipv4Address{0x0A010001});
  REQUIRE(p.port.neighbours.size() == 1);
  CHECK(p.port.neighbours[0].ip == Ipv4Address{0x0A010909});
  CHECK(p.port.neighbours[0].mac == MacAddress{{0x02, 0xAA, 0xBB, 0, 0, 1}});
  REQUIRE(p.port.neighbours6.size() == 2);
  CHECK(p.port.neighbours6[0].ip ==
        Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x12}});
  CHECK(p.port.neighbours6[0].mac == MacAddress{{0x02, 0, 0, 0, 0, 0x12}});
  CHECK(p.port.neighbours6[1].ip ==
        Ipv6Address{{0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}});
  CHECK(p.port.mtu_bytes == 9000);
  CHECK(p.port.vlan == 100);
  CHECK_FALSE(p.port.priority_tagging);
  CHECK(p.port.line_rate_bps == 100'000'000'000ull);
  CHECK(p.port.cm_udp_port == 5000);
  CHECK(p.port.rx_descriptors == 4096);
  CHECK(p.port.tx_descriptors == 512);
  CHECK(p.port.mbufs == 16383);
  REQUIRE(p.traffic_classes.size() == 3);
  CHECK(p.default_class().name == "a");
  CHECK(p.traffic_classes[0].weight == 7);
  CHECK(p.traffic_classes[0].max_rate_bps == 40'000'000'000ull);
  CHECK(p.traffic_classes[1].strict);
  CHECK(p.traffic_classes[1].ecn == EcnCodepoint::kNotEct);
  CHECK(p.traffic_classes[1].congestion_control.algorithm == CcAlgorithm::kFixed);
  CHECK(p.traffic_classes[1].congestion_control.fixed_rate_bps == 2'500'000'000ull);
  CHECK(p.traffic_classes[2].ecn == EcnCodepoint::kEct1);
  CHECK(p.traffic_classes[2].congestion_control.algorithm == CcAlgorithm::kNone);
  CHECK(p.class_for_dscp(46) == &p.traffic_classes[1]);
  CHECK(p.find_class("c") == &p.traffic_classes[2]);
  CHECK(p.find_class("zz") == nullptr);
  CHECK(p.cnp.dscp == 40);
  CHECK(p.cnp.priority == 7);
  CHECK(p.cnp.min_time_between_cnps_ns == 50'000);
  CHECK(p.transport.pmtu_bytes == 4096);
  CHECK(p.transport.local_ack_timeout_ns() == 0);
  CHECK(p.transport.retry_cnt == 3);
  CHECK(p.transport.rnr_retry == 0);
  CHECK(p.transport.min_rnr_timer == 14);  // 1.28 ms: the first code >= 1 ms
  CHECK(p.transport.ack_frequency == 16);
  CHECK(p.transport.window_packets == 1000);
  CHECK(p.transport.loss_recovery == LossRecovery::kSelective);
  CHECK(p.transport.bdp_cap_bytes == 128 * 1024);
  CHECK(p.transport.max_outstanding_reads == 8);
  CHECK(p.clients.allowed_uids == std::vector<uint32_t>{0, 1000});
  CHECK(p.clients.allowed_gids == std::vector<uint32_t>{2000});
  REQUIRE(p.clients.allowed_peers.size() == 2);
  CHECK(p.clients.allowed_peers[0] == Ipv4Prefix{Ipv4Address{0xC6120000}, 15});
  CHECK(p.clients.allowed_peers[1] == Ipv4Prefix{Ipv4Address{0x0A010909}, 32});
  REQUIRE(p.clients.allowed_peers6.size() == 2);
  CHECK(p.clients.allowed_peers6[0] ==
        Ipv6Prefix{Ipv6Address{{0xFD, 0, 0, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, 48});
  CHECK(p.clients.allowed_peers6[1] ==
        Ipv6Prefix{Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x12}}, 128});
  CHECK(p.clients.quotas.max_qps == 8);
  CHECK(p.clients.quotas.max_region_bytes == 1ull << 30);
  CHECK(p.clients.quotas.max_send_wr == 4096);
  CHECK(p.clients.quotas.max_recv_wr == 16);
  CHECK(p.clients.quotas.max_cqe == 65536);
}

TEST_CASE("RNR timer codes and durations") {
  CHECK(rnr_timer_ns(0) == 655'360'000);
  CHECK(rnr_timer_ns(1) == 10'000);
  CHECK(rnr_timer_ns(12) == 640'000);
  CHECK(rnr_timer_ns(31) == 491'520'000);
  auto code_for = [](std::string_view v) {
    LoadResult r = load(std::string(kPort) + "transport: {min_rnr_timer: " + std::string(v) + "}");
    INFO(r.error_text());
    REQUIRE(r.ok());
    return r.policy->transport.min_rnr_timer;
  };
  CHECK(code_for("12") == 12);
  CHECK(code_for("0") == 0);
  CHECK(code_for("640us") == 12);
  CHECK(code_for("10us") == 1);
  CHECK(code_for("1ns") == 1);
  CHECK(code_for("491.52ms") == 31);
  CHECK(code_for("500ms") == 0);  // only 655.36 ms is longer
}

TEST_CASE("empty sections and lists read as empty") {
  LoadResult r = load(std::string(kPort) + "daemon:\ncnp:\nclients:\n  allowed_uids:\n");
  INFO(r.error_text());
  REQUIRE(r.ok());
  CHECK(r.policy->clients.allowed_uids.empty());
}

TEST_CASE("load_policy_file reads a file and names it in errors") {
  std::string path = "policy_loader_test.yaml";
  {
    std::ofstream out(path);
    out << kPort << "transport:\n  pmtu: 300\n";
  }
  LoadResult r = load_policy_file(path);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].to_string() ==
        path + ":5:9: transport.pmtu: 300 is not a path MTU (256, 512, 1024, 2048 or 4096)");
  CHECK(r.error_text() == r.errors[0].to_string() + "\n");
  {
    std::ofstream out(path);
    out << kPort;
  }
  CHECK(load_policy_file(path).ok());
  std::remove(path.c_str());

  LoadResult missing = load_policy_file("/nonexistent/conduitd.yaml");
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors[0].line == 0);
  CHECK(missing.errors[0].to_string() ==
        "/nonexistent/conduitd.yaml: cannot open: No such file or directory");
}

TEST_CASE("an oversized file is refused unread") {
  std::string path = "policy_loader_big.yaml";
  {
    std::ofstream out(path);
    out << std::string(kMaxPolicyFileBytes + 1, '#');
  }
  LoadResult r = load_policy_file(path);
  std::remove(path.c_str());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].message.find("larger than") == 0);
}

TEST_CASE("reload pattern: an invalid file yields no policy, so the old one stays") {
  Policy running = *load(kPort).policy;
  LoadResult next = load(std::string(kPort) + "cnp: {dscp: 99}\n");
  CHECK_FALSE(next.ok());
  CHECK_FALSE(next.policy.has_value());
  CHECK(running.cnp.dscp == 48);
}

TEST_CASE("a PCI device is named as DPDK names it and given to EAL with -a") {
  const std::string dev_short = "port:\n  device: 3B:00.1\n  address: 198.18.0.1/24\n";
  LoadResult r = load(dev_short);
  REQUIRE(r.ok());
  CHECK(r.policy->port.device == "0000:3b:00.1");
  CHECK(r.policy->port.device_kind == DeviceKind::kPci);
  CHECK(eal_arguments(*r.policy) == std::vector<std::string>{"-a", "0000:3b:00.1", "-l", "1"});

  // The operator's own PCI choice and lcores stand.
  for (const char* choice :
       {"[--no-pci]", "[-a, 0000:5e:00.0]", "[--allow=0000:5e:00.0]", "[-b0000:5e:00.0]"}) {
    LoadResult c = load(
        "port:\n  device: 0000:3b:00.1\n  address: 198.18.0.1/24\n"
        "  eal_args: " +
        std::string(choice) + "\n");
    REQUIRE(c.ok());
    const auto args = eal_arguments(*c.policy);
    CHECK(std::count(args.begin(), args.end(), "0000:3b:00.1") == 0);
  }
  LoadResult l = load(dev_short + "  eal_args: [--lcores=2]\n");
  REQUIRE(l.ok());
  CHECK(eal_arguments(*l.policy) == std::vector<std::string>{"--lcores=2", "-a", "0000:3b:00.1"});

  // A vdev is hot-plugged after EAL starts; nothing is added for it but the lcore.
  LoadResult v = load(kPort);
  REQUIRE(v.ok());
  CHECK(eal_arguments(*v.policy) == std::vector<std::string>{"-l", "1"});
}
