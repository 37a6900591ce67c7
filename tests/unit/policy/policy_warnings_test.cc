#include "policy/policy_warnings.h"

#include <catch2/catch.hpp>

#include "policy/loader.h"
#include "policy_test_util.h"

using namespace conduit::policy;
using namespace conduit::policy::test;

TEST_CASE("policy_warnings: one lcore is carried out, more are named as unused") {
  Policy p = *load(kPort).policy;
  p.daemon.lcores = {1};
  CHECK(policy_warnings(p).empty());

  p.daemon.lcores = {2, 3};
  CHECK(policy_warnings(p) ==
        std::vector<std::string>{"daemon.lcores lists 2 lcores, but this conduitd runs one "
                                 "engine, on lcore 2; lcore 3 stays unused (QPs are not "
                                 "sharded across engines yet)"});

  p.daemon.lcores = {5, 0, 7};
  const auto w = policy_warnings(p);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("lists 3 lcores") != std::string::npos);
  CHECK(w[0].find("on lcore 5; lcores 0, 7 stay unused") != std::string::npos);
}

TEST_CASE("policy_warnings: a metrics address is served, so it is not warned about") {
  Policy p = *load(kPort).policy;
  CHECK(policy_warnings(p).empty());  // off by default
  p.daemon.metrics = SocketAddress{{0x7F000001}, 9464};
  CHECK(policy_warnings(p).empty());
}

TEST_CASE("policy_warnings: DCQCN knobs between two mlx5 units are named with the value used") {
  const std::string head = std::string(kPort) +
                           "traffic_classes:\n"
                           "  - name: bulk\n"
                           "    default: true\n"
                           "    dscp: 26\n"
                           "    congestion_control:\n";
  LoadResult whole = load(head + "      rpg_ai_rate: 40mbit\n      rpg_time_reset: 55us\n");
  REQUIRE(whole.ok());
  CHECK(policy_warnings(*whole.policy).empty());

  LoadResult r = load(head +
                      "      rpg_ai_rate: 2500kbit\n"
                      "      rate_reduce_monitor_period: 1500ns\n"
                      "      rpg_byte_reset: 1001\n");
  REQUIRE(r.ok());
  CHECK(policy_warnings(*r.policy) ==
        std::vector<std::string>{
            "traffic_classes[0].congestion_control.rpg_byte_reset: 1001B is not a whole number "
            "of 64B (mlx5's unit) and is used as 960B",
            "traffic_classes[0].congestion_control.rpg_ai_rate: 2500kbit is not a whole number "
            "of 1mbit (mlx5's unit) and is used as 2mbit",
            "traffic_classes[0].congestion_control.rate_reduce_monitor_period: 1500ns is not a "
            "whole number of 1us (mlx5's unit) and is used as 1us"});
}

TEST_CASE("policy_warnings: a DCQCN class that sends not-ECT packets is named") {
  // Switches CE-mark only ECT packets: such a class never gets a CNP.
  const std::string head = std::string(kPort) + "traffic_classes:\n" +
                           "  - {name: a, default: true, dscp: 26, ecn: ect1}\n";
  LoadResult ok = load(head + "  - {name: b, dscp: 8, ecn: not_ect, congestion_control: none}\n");
  REQUIRE(ok.ok());
  CHECK(policy_warnings(*ok.policy).empty());

  LoadResult r = load(head + "  - {name: b, dscp: 8, ecn: not_ect}\n");
  REQUIRE(r.ok());
  CHECK(policy_warnings(*r.policy) ==
        std::vector<std::string>{
            "traffic_classes[1].ecn: not_ect with congestion_control dcqcn: switches CE-mark "
            "only ECT packets, so class 'b' gets no CNPs and DCQCN never lowers its rate; use "
            "ect0 or ect1, or algorithm fixed or none"});
}

TEST_CASE("policy_warnings: a CNP spacing between two microseconds is named with the value used") {
  // The engine counts it in whole microseconds, as mlx5 does; under 1us it is 0, a CNP
  // for every CE-marked packet.
  LoadResult whole = load(std::string(kPort) + "cnp: {min_time_between_cnps: 50us}\n");
  REQUIRE(whole.ok());
  CHECK(policy_warnings(*whole.policy).empty());
  LoadResult r = load(std::string(kPort) + "cnp: {min_time_between_cnps: 2500ns}\n");
  REQUIRE(r.ok());
  CHECK(policy_warnings(*r.policy) ==
        std::vector<std::string>{"cnp.min_time_between_cnps: 2500ns is not a whole number of 1us "
                                 "and is used as 2us"});
  LoadResult zero = load(std::string(kPort) + "cnp: {min_time_between_cnps: 500ns}\n");
  REQUIRE(zero.ok());
  CHECK(policy_warnings(*zero.policy) ==
        std::vector<std::string>{"cnp.min_time_between_cnps: 500ns is not a whole number of 1us "
                                 "and is used as 0 (a CNP for every CE-marked packet)"});
}

TEST_CASE("policy_warnings: DCQCN rates above their ceiling are named with the value used") {
  // The reaction point clamps them to rpg_max_rate or the line rate; the loader refuses
  // only the contradictions among the knobs themselves.
  const auto warnings = [](const std::string& port_extra, const std::string& cc) {
    LoadResult r =
        load(std::string(kPort) + port_extra + "traffic_classes:\n" +
             "  - {name: a, default: true, dscp: 26, congestion_control: {" + cc + "}}\n");
    INFO(r.error_text());
    REQUIRE(r.ok());
    return policy_warnings(*r.policy);
  };
  const std::string at = "traffic_classes[0].congestion_control.";
  // Within their ceilings, or no line rate known before start-up: nothing to say.
  CHECK(warnings("", "rpg_max_rate: 40gbit, rate_to_set_on_first_cnp: 20gbit").empty());
  CHECK(warnings("", "rpg_min_rate: 500gbit").empty());
  CHECK(warnings("  line_rate: 25gbit\n",
                 "rpg_max_rate: 25gbit, rpg_min_rate: 25gbit, "
                 "rate_to_set_on_first_cnp: 25gbit")
            .empty());

  CHECK(warnings("", "rpg_max_rate: 10gbit, rate_to_set_on_first_cnp: 20gbit") ==
        std::vector<std::string>{at + "rate_to_set_on_first_cnp: 20gbit is above rpg_max_rate "
                                      "10gbit and is used as 10gbit"});
  CHECK(warnings("  line_rate: 25gbit\n", "rpg_max_rate: 40gbit, rpg_min_rate: 30gbit") ==
        std::vector<std::string>{
            at + "rpg_max_rate: 40gbit is above port.line_rate 25gbit and is used as 25gbit",
            at + "rpg_min_rate: 30gbit is above port.line_rate 25gbit and is used as 25gbit "
                 "(DCQCN cannot lower this class's rate)"});
  CHECK(warnings("  line_rate: 25gbit\n", "rate_to_set_on_first_cnp: 30gbit") ==
        std::vector<std::string>{at + "rate_to_set_on_first_cnp: 30gbit is above "
                                      "port.line_rate 25gbit and is used as 25gbit"});
}
