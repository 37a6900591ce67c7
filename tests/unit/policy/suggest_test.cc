#include "policy/suggest.h"

#include <catch2/catch.hpp>

using conduit::policy::did_you_mean;

TEST_CASE("did_you_mean finds typos and ignores unrelated words") {
  std::vector<std::string_view> keys = {"control_socket", "socket_group", "lcores", "log_level"};
  CHECK(did_you_mean("contrl_socket", keys) == "control_socket");
  CHECK(did_you_mean("control_sokcet", keys) == "control_socket");  // transposition
  CHECK(did_you_mean("LCORES", keys) == "lcores");
  CHECK(did_you_mean("loglevel", keys) == "log_level");
  CHECK_FALSE(did_you_mean("metrics", keys));
  CHECK_FALSE(did_you_mean("", keys));
  CHECK_FALSE(did_you_mean(std::string(200, 'x'), keys));
  CHECK_FALSE(did_you_mean("lcores", {}));
}
