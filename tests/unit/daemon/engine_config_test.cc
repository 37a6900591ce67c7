// engine_config_from_policy: what the engine is built with, from the policy and the port.
#include "engine/engine_config.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "net/net_stack.h"
#include "policy/loader.h"

namespace conduit {
namespace {

policy::Policy load(const std::string& port_extra, const std::string& transport = "") {
  const std::string text = "version: 1\nport:\n  device: net_null0\n  address: 198.18.0.1/24\n" +
                           port_extra + (transport.empty() ? "" : "transport:\n" + transport);
  policy::LoadResult r = policy::load_policy_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return *r.policy;
}

TEST_CASE("engine config: port.line_rate wins over the port's speed; 10 Gbit/s without either",
          "[engine][policy]") {
  const policy::Policy plain = load("");
  CHECK(engine::engine_config_from_policy(plain, {}, 25'000'000'000ull).line_rate_bps ==
        25'000'000'000ull);
  CHECK(engine::engine_config_from_policy(plain, {}, 0).line_rate_bps == 10'000'000'000ull);
  const policy::Policy set = load("  line_rate: 100gbit\n");
  CHECK(engine::engine_config_from_policy(set, {}, 10'000'000'000ull).line_rate_bps ==
        100'000'000'000ull);
  CHECK(engine::engine_config_from_policy(set, {}, 0).line_rate_bps == 100'000'000'000ull);
  const policy::Policy slow = load("  line_rate: 2.5gbit\n");
  CHECK(engine::engine_config_from_policy(slow, {}, 100'000'000'000ull).line_rate_bps ==
        2'500'000'000ull);
}

TEST_CASE("engine config: port.vlan tags the stack's frames; each class's priority is its PCP",
          "[engine][policy]") {
  const policy::Policy plain = load("");
  CHECK_FALSE(engine::engine_config_from_policy(plain, {}, 0).net.vlan_id);
  const policy::Policy p = load("  vlan: 42\n");
  const engine::EngineConfig c = engine::engine_config_from_policy(p, {}, 0);
  CHECK(c.net.vlan_id == 42);
  CHECK(c.net.vlan_pcp == 0);  // ARP, NDP, ICMP and the CMs: best effort
  REQUIRE(c.classes.size() == 1);
  CHECK(c.classes[0].vlan_pcp == 3);  // the default class's priority
  CHECK_FALSE(c.priority_tagging);
  CHECK_FALSE(engine::engine_config_from_policy(plain, {}, 0).priority_tagging);
}

TEST_CASE("engine config: port.priority_tagging without a VLAN", "[engine][policy]") {
  const engine::EngineConfig c =
      engine::engine_config_from_policy(load("  priority_tagging: true\n"), {}, 0);
  CHECK(c.priority_tagging);
  CHECK_FALSE(c.net.vlan_id);  // ARP, NDP, ICMP and the CMs stay untagged
  REQUIRE(c.classes.size() == 1);
  CHECK(c.classes[0].vlan_pcp == 3);
}

TEST_CASE("engine config: READ depths: the policy's as requester, the transport's as responder",
          "[engine][policy]") {
  const policy::Policy p = load("", "  max_outstanding_reads: 4\n");
  const engine::EngineConfig c = engine::engine_config_from_policy(p, {}, 0);
  CHECK(c.qp_defaults.reset_attr.max_rd_atomic == 4);
  CHECK(c.qp_defaults.reset_attr.max_dest_rd_atomic == transport::kMaxReadDepth);
  const policy::Policy d = load("");
  CHECK(engine::engine_config_from_policy(d, {}, 0).qp_defaults.reset_attr.max_rd_atomic ==
        transport::kMaxReadDepth);
}

TEST_CASE("engine config: transport.window bounds every QP's packets in flight",
          "[engine][policy]") {
  CHECK(engine::engine_config_from_policy(load(""), {}, 0).qp_defaults.window_packets == 1024);
  const policy::Policy p = load("", "  window: 1000\n");
  CHECK(engine::engine_config_from_policy(p, {}, 0).qp_defaults.window_packets == 1000);
}

TEST_CASE("engine config: strict classes are served higher priority first, not in file order",
          "[engine][policy]") {
  const std::string text =
      "version: 1\nport:\n  device: net_null0\n  address: 198.18.0.1/24\n"
      "traffic_classes:\n"
      "  - {name: bulk, default: true, dscp: 10, priority: 1, weight: 4}\n"
      "  - {name: low, dscp: 12, priority: 2, weight: strict}\n"
      "  - {name: high, dscp: 14, priority: 5, weight: strict}\n";
  policy::LoadResult r = policy::load_policy_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const engine::EngineConfig c = engine::engine_config_from_policy(*r.policy, {}, 0);
  REQUIRE(c.classes.size() == 3);
  const auto find = [&](const std::string& name) {
    for (const auto& k : c.classes) {
      if (k.name == name) return k;
    }
    FAIL("no class " << name);
    return c.classes.front();
  };
  CHECK_FALSE(find("bulk").sched.strict);
  CHECK(find("high").sched.strict);
  CHECK(find("low").sched.strict);
  CHECK(find("high").sched.strict_rank < find("low").sched.strict_rank);
}

TEST_CASE("engine config: many static neighbours fit, and learned entries keep their room",
          "[engine][policy]") {
  // 300 static entries: more than the table's default 256 slots.
  std::string neighbours = "  neighbours:\n";
  for (int i = 0; i < 300; ++i) {
    char line[64];
    std::snprintf(line, sizeof line, "    198.18.%d.%d: \"02:00:00:00:%02x:%02x\"\n", 1 + i / 200,
                  1 + i % 200, i / 256, i % 256);
    neighbours += line;
  }
  const std::string text =
      "version: 1\nport:\n  device: net_null0\n  address: 198.18.0.1/16\n" + neighbours;
  policy::LoadResult r = policy::load_policy_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const engine::EngineConfig c =
      engine::engine_config_from_policy(*r.policy, net::MacAddr{{0x02, 0, 0, 0, 0, 1}}, 0);
  CHECK(c.net.static_neighbours.size() == 300);
  CHECK(c.net.neighbour.capacity == net::NeighbourConfig{}.capacity + 300);
  net::NetStack stack(c.net);  // threw "no room in the neighbour table" before
  CHECK(stack.neighbours().size() == 300);
}

TEST_CASE("engine config: IPv6 static neighbours reach the stack's NDP table", "[engine][policy]") {
  const std::string text =
      "version: 1\nport:\n  device: net_null0\n  address: 198.18.0.1/16\n"
      "  address6: fe80::c0:1/64\n  neighbours:\n    198.18.0.2: \"02:00:00:00:00:02\"\n"
      "    fe80::c0:2: \"02:00:00:00:01:02\"\n    fe80::c0:3: \"02:00:00:00:01:03\"\n";
  policy::LoadResult r = policy::load_policy_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const engine::EngineConfig c =
      engine::engine_config_from_policy(*r.policy, net::MacAddr{{0x02, 0, 0, 0, 0, 1}}, 0);
  REQUIRE(c.net.static_neighbours6.size() == 2);
  CHECK(c.net.static_neighbours6[0].mac == net::MacAddr{{0x02, 0, 0, 0, 1, 2}});
  net::NetStack stack(c.net);
  CHECK(stack.neighbours().size() == 1);
  CHECK(stack.neighbours6().size() == 2);
  // A static entry resolves at once: no Neighbor Solicitation.
  const auto r6 = stack.resolve6(
      net::Ipv6Addr{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 3}}, 1'000'000);
  CHECK(r6.status == net::NeighbourTable6::Resolve::kResolved);
  CHECK(r6.mac == net::MacAddr{{0x02, 0, 0, 0, 1, 3}});
  CHECK(stack.counters().tx_ns == 0);
}

}  // namespace
}  // namespace conduit
