// The engine's adaptive idle spin window (engine/idle_spin.h).
#include "engine/idle_spin.h"

#include <catch2/catch.hpp>

using conduit::engine::IdleSpin;

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
