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

TEST_CASE("policy_warnings: a metrics address is named: nothing listens on it") {
  Policy p = *load(kPort).policy;
  CHECK(policy_warnings(p).empty());  // off by default
  p.daemon.metrics = SocketAddress{{0x7F000001}, 9464};
  const auto w = policy_warnings(p);
  REQUIRE(w.size() == 1);
  CHECK(w[0].find("daemon.metrics_address is set, but this conduitd has no Prometheus endpoint") ==
        0);
}
