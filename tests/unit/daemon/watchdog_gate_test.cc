// When conduitd may ping systemd's watchdog (telemetry/watchdog_gate.h): only
// while both the control thread and the engine loop make progress.
#include "telemetry/watchdog_gate.h"

#include <string>

#include <catch2/catch.hpp>

using conduit::telemetry::WatchdogGate;
using Stall = WatchdogGate::Stall;

TEST_CASE("pings while both loops progress", "[watchdog]") {
  WatchdogGate g(100);
  CHECK(g.may_ping(true, 150));
  CHECK(g.stall() == Stall::kNone);
  CHECK(g.may_ping(true, 151));
  CHECK(g.may_ping(true, 9000));
}

TEST_CASE("a hung engine stops the pings until its loop moves again", "[watchdog]") {
  WatchdogGate g(100);
  REQUIRE(g.may_ping(true, 200));
  // The engine counter stands still: no ping, however often we ask.
  for (int tick = 0; tick < 5; ++tick) {
    CHECK_FALSE(g.may_ping(true, 200));
    CHECK(g.stall() == Stall::kEngine);
  }
  CHECK(g.may_ping(true, 201));
  CHECK(g.stall() == Stall::kNone);
}

TEST_CASE("the engine must move after the watchdog starts", "[watchdog]") {
  WatchdogGate g(7);
  CHECK_FALSE(g.may_ping(true, 7));
  CHECK(g.stall() == Stall::kEngine);
  CHECK(g.may_ping(true, 8));
}

TEST_CASE("progress is counted from the last ping, not the last check", "[watchdog]") {
  WatchdogGate g(0);
  // The engine moved while the control thread was stalled: no ping then ...
  CHECK_FALSE(g.may_ping(false, 10));
  CHECK(g.stall() == Stall::kControl);
  // ... and once the control thread answers, that engine progress counts.
  CHECK(g.may_ping(true, 10));
  // Now both must move again.
  CHECK_FALSE(g.may_ping(true, 10));
}

TEST_CASE("a stalled control thread stops the pings, also together with the engine", "[watchdog]") {
  WatchdogGate g(0);
  CHECK_FALSE(g.may_ping(false, 5));
  CHECK(g.stall() == Stall::kControl);
  WatchdogGate both(5);
  CHECK_FALSE(both.may_ping(false, 5));
  CHECK(both.stall() == Stall::kBoth);
  CHECK(conduit::telemetry::stall_name(Stall::kBoth) == std::string("control and engine threads"));
}
