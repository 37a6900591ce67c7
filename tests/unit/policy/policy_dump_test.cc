#include "policy/policy_dump.h"

#include <catch2/catch.hpp>

#include "policy/loader.h"
#include "policy_test_util.h"

using namespace conduit::policy;
using namespace conduit::policy::test;

TEST_CASE("the dump of the defaults reloads to the same policy") {
  Policy p = *load(kPort).policy;
  std::string yaml = to_yaml(p);
  CHECK(yaml.find("rpg_time_reset: 300us") != std::string::npos);
  CHECK(yaml.find("rpg_ai_rate: 5mbit") != std::string::npos);
  CHECK(yaml.find("max_registered_memory: 4GiB") != std::string::npos);
  CHECK(yaml.find("metrics_address: off") != std::string::npos);
  CHECK(yaml.find("max_send_wr: 256") != std::string::npos);
  CHECK(yaml.find("max_recv_wr: 256") != std::string::npos);
  CHECK(yaml.find("max_cqe: 1024") != std::string::npos);
  LoadResult again = load(yaml);
  INFO(yaml << again.error_text());
  REQUIRE(again.ok());
  CHECK(*again.policy == p);
}

TEST_CASE("the dump keeps port.priority_tagging") {
  Policy p = *load(kPort).policy;
  CHECK(to_yaml(p).find("priority_tagging") == std::string::npos);  // off: not written
  p.port.priority_tagging = true;
  const std::string yaml = to_yaml(p);
  CHECK(yaml.find("priority_tagging: true") != std::string::npos);
  LoadResult again = load(yaml);
  INFO(yaml << again.error_text());
  REQUIRE(again.ok());
  CHECK(*again.policy == p);
}

TEST_CASE("the dump round-trips every kind of value") {
  Policy p = *load(kPort).policy;
  p.daemon.socket_group = "rdma";
  p.daemon.lcores = {3, 1};
  p.daemon.log_level = LogLevel::kOff;
  p.daemon.metrics = SocketAddress{{0x7F000001}, 9464};
  p.daemon.idle_mode = IdleMode::kSpin;
  p.port.device = "net_memif0,role=server,socket=/tmp/a:b.sock,x=";
  p.port.eal_args = {"--no-huge", "-m", "512", "#not-a-comment", "a: b", ""};
  p.port.eal_args.pop_back();  // empty arguments are invalid
  p.port.gateway = Ipv4Address{0xC61200FE};
  p.port.vlan = 4094;
  p.port.address6 = Ipv6Address{{0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}};
  p.port.prefix_len6 = 48;
  p.port.gateway6 = Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFE}};
  p.port.neighbours = {{Ipv4Address{0xC6120002}, MacAddress{{2, 0, 0, 0, 0, 2}}}};
  p.port.neighbours6 = {{Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}},
                         MacAddress{{2, 0, 0, 0, 0, 3}}},
                        {Ipv6Address{{0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}},
                         MacAddress{{2, 0, 0, 0, 0, 9}}}};
  TrafficClass fixed;
  fixed.name = "f";
  fixed.dscp = 10;
  fixed.strict = true;
  fixed.ecn = EcnCodepoint::kNotEct;
  fixed.max_rate_bps = 3'000'000'001ull;
  fixed.congestion_control.algorithm = CcAlgorithm::kFixed;
  fixed.congestion_control.fixed_rate_bps = 1'234'567ull;
  TrafficClass none;
  none.name = "n";
  none.dscp = 0;
  none.congestion_control.algorithm = CcAlgorithm::kNone;
  p.traffic_classes.push_back(fixed);
  p.traffic_classes.push_back(none);
  p.traffic_classes[0].congestion_control.preset = DcqcnPreset::kPaper;
  p.traffic_classes[0].congestion_control.dcqcn = dcqcn_preset(DcqcnPreset::kPaper);
  p.traffic_classes[0].congestion_control.dcqcn.rpg_time_reset_ns = 1'234;
  p.cnp.min_time_between_cnps_ns = 0;
  p.transport.min_rnr_timer = 0;
  p.transport.bdp_cap_bytes = 100'000;
  p.transport.window_packets = 64;
  p.clients.allowed_uids = {0, 4294967294u};
  p.clients.allowed_peers = {{Ipv4Address{0xC6120000}, 15}};
  p.clients.allowed_peers6 = {
      {Ipv6Address{{0xFD, 0, 0, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, 48},
      {Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 0x12}}, 128}};
  p.clients.quotas.max_region_bytes = 4096;
  p.clients.quotas.max_send_wr = 2048;
  p.clients.quotas.max_recv_wr = 16;
  p.clients.quotas.max_cqe = 65536;

  std::string yaml = to_yaml(p);
  LoadResult again = load(yaml);
  INFO(yaml << again.error_text());
  REQUIRE(again.ok());
  CHECK(*again.policy == p);
}
