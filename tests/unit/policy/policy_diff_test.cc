#include "policy/policy_diff.h"

#include <catch2/catch.hpp>

#include "policy/loader.h"
#include "policy_test_util.h"

using namespace conduit::policy;
using namespace conduit::policy::test;

TEST_CASE("restart_required_changes lists start-up-bound keys only") {
  Policy a = *load(kPort).policy;
  Policy b = a;
  CHECK(restart_required_changes(a, b).empty());

  // What a reload applies: the log level, the idle mode, the clients' limits.
  b.daemon.log_level = LogLevel::kDebug;
  b.daemon.idle_mode =
      a.daemon.idle_mode == IdleMode::kSpin ? IdleMode::kAdaptive : IdleMode::kSpin;
  b.clients.quotas.max_qps = 1;
  b.daemon.metrics_max_qps = 7;
  CHECK(restart_required_changes(a, b).empty());

  b.port.mtu_bytes = 9000;
  b.daemon.lcores = {1, 2};
  b.port.device = "net_null1";
  CHECK(restart_required_changes(a, b) ==
        std::vector<std::string>{"daemon.lcores", "port.device", "port.mtu"});
}

TEST_CASE("restart_required_changes: classes, CNPs and transport defaults apply in place") {
  // The running engine takes them (engine::PolicyUpdate): nothing waits for a restart.
  const Policy a = *load(kPort).policy;
  Policy b = a;
  b.traffic_classes[0].dscp = 10;
  CHECK(restart_required_changes(a, b).empty());
  b = a;
  b.traffic_classes.push_back(b.traffic_classes[0]);
  b.traffic_classes.back().name = "bulk";
  b.traffic_classes.back().is_default = false;
  CHECK(restart_required_changes(a, b).empty());
  b = a;
  b.cnp.min_time_between_cnps_ns = 50'000;
  CHECK(restart_required_changes(a, b).empty());
  b = a;
  b.transport.retry_cnt = 1;
  CHECK(restart_required_changes(a, b).empty());
  // Next to a port change, only the port is named.
  b.port.mtu_bytes = 9000;
  CHECK(restart_required_changes(a, b) == std::vector<std::string>{"port.mtu"});
  b = a;
  b.port.line_rate_bps = 40'000'000'000ull;
  CHECK(restart_required_changes(a, b) == std::vector<std::string>{"port.line_rate"});
  // The tags every frame carries are the port's (and the XDP program's) from the start.
  b = a;
  b.port.vlan = 100;
  CHECK(restart_required_changes(a, b) == std::vector<std::string>{"port.vlan"});
  b = a;
  b.port.priority_tagging = true;
  CHECK(restart_required_changes(a, b) == std::vector<std::string>{"port.priority_tagging"});
}

TEST_CASE("restart_required_changes: static IPv6 neighbours are bound at start-up too") {
  // The engine takes port.neighbours (both families) only when it starts; a reload that
  // changed only the IPv6 entries was reported as needing nothing.
  const Policy a = *load(std::string(kPort) + "  address6: fe80::c0:1/64\n").policy;
  Policy b = a;
  b.port.neighbours6.push_back(
      {Ipv6Address{{0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xC0, 0, 2}},
       MacAddress{{0x02, 0, 0, 0, 0, 2}}});
  CHECK(restart_required_changes(a, b) == std::vector<std::string>{"port.neighbours"});
}
