// The engine's adaptive idle spin window (engine/idle_spin.h).
#include "engine/idle_spin.h"

#include <catch2/catch.hpp>

using conduit::engine::IdleSpin;
using conduit::engine::PacedSleepGate;

TEST_CASE("idle spin starts at its minimum", "[engine][idle]") {
  IdleSpin s(10'000, 200'000);
  CHECK(s.window_ns() == 10'000);
}

TEST_CASE("short sleeps grow the window up to the maximum", "[engine][idle]") {
  IdleSpin s(10'000, 200'000);
  s.after_sleep(50'000);  // work came back after 50 us: spinning would have caught it
  CHECK(s.window_ns() == 20'000);
  s.after_sleep(0);  // work was already pending
  CHECK(s.window_ns() == 40'000);
  for (int i = 0; i < 10; ++i) s.after_sleep(199'999);
  CHECK(s.window_ns() == 200'000);
}

TEST_CASE("long sleeps shrink the window down to the minimum", "[engine][idle]") {
  IdleSpin s(10'000, 200'000);
  for (int i = 0; i < 10; ++i) s.after_sleep(1'000);
  REQUIRE(s.window_ns() == 200'000);
  s.after_sleep(200'000);  // as long as the longest spin: sleeping was right
  CHECK(s.window_ns() == 100'000);
  s.after_sleep(5'000'000);
  CHECK(s.window_ns() == 50'000);
  for (int i = 0; i < 10; ++i) s.after_sleep(1'000'000);
  CHECK(s.window_ns() == 10'000);
}

TEST_CASE("ping-pong keeps the engine spinning, bulk bursts let it sleep", "[engine][idle]") {
  IdleSpin s(10'000, 200'000);
  // Round trips of 80 us: after a few exchanges the window covers them.
  for (int i = 0; i < 5; ++i) s.after_sleep(80'000);
  CHECK(s.window_ns() >= 80'000);
  // Windows of work 5 ms apart: the window falls back to the minimum.
  for (int i = 0; i < 5; ++i) s.after_sleep(5'000'000);
  CHECK(s.window_ns() == 10'000);
}

TEST_CASE("a maximum below the minimum pins the window at the minimum", "[engine][idle]") {
  IdleSpin s(50'000, 10'000);
  s.after_sleep(1'000);
  CHECK(s.window_ns() == 50'000);
  s.after_sleep(10'000'000);
  CHECK(s.window_ns() == 50'000);
}

TEST_CASE("paced sleeps are allowed until one ends late", "[engine][idle]") {
  PacedSleepGate g(25'000, 1'000'000, 1'000'000'000);
  CHECK(g.allowed(0));
  CHECK_FALSE(g.after_paced_sleep(100'000, 125'000));  // 25 us late: on time
  CHECK(g.allowed(125'000));
  CHECK(g.after_paced_sleep(200'000, 225'001));  // late: off for the hold-off
  CHECK_FALSE(g.allowed(225'001));
  CHECK_FALSE(g.allowed(1'225'000));
  CHECK(g.allowed(1'225'001));
}

TEST_CASE("late paced sleeps double the hold-off, timely ones halve it", "[engine][idle]") {
  PacedSleepGate g(25'000, 1'000'000, 8'000'000);
  uint64_t t = 0;
  for (uint64_t want : {1'000'000u, 2'000'000u, 4'000'000u, 8'000'000u, 8'000'000u}) {
    CHECK(g.hold_ns() == want);
    t += 10'000'000;
    REQUIRE(g.allowed(t));
    CHECK(g.after_paced_sleep(t, t + 12'000'000));  // 12 ms late (a busy core)
    CHECK_FALSE(g.allowed(t + 12'000'000 + want - 1));
    t += 12'000'000 + want;
    CHECK(g.allowed(t));
  }
  CHECK(g.hold_ns() == 8'000'000);  // capped
  // Each run of kTimelyToShrink timely sleeps halves it; a late one starts the run again.
  const uint32_t run = PacedSleepGate::kTimelyToShrink;
  for (uint32_t i = 0; i + 1 < run; ++i) CHECK_FALSE(g.after_paced_sleep(t, t + 5'000));
  CHECK(g.after_paced_sleep(t, t + 30'000));
  CHECK(g.hold_ns() == 8'000'000);
  t += 30'000 + 8'000'000;
  for (uint64_t want : {4'000'000u, 2'000'000u, 1'000'000u, 1'000'000u}) {
    const uint64_t before = g.hold_ns();
    for (uint32_t i = 0; i + 1 < run; ++i) CHECK_FALSE(g.after_paced_sleep(t, t + 5'000));
    CHECK(g.hold_ns() == before);
    CHECK_FALSE(g.after_paced_sleep(t, t + 5'000));
    CHECK(g.hold_ns() == want);
    CHECK(g.allowed(t));
  }
}
