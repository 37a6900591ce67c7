#include "sched/timing_wheel.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace conduit::sched;

TEST_CASE("wheel expires ids in slot order once their slot starts") {
  TimingWheel w(100, 64);
  w.reserve_ids(8);
  w.insert(1, 450);
  w.insert(2, 120);
  w.insert(3, 199);
  CHECK(w.size() == 3);
  CHECK(w.next_expiry_ns() == 100);
  std::vector<uint32_t> got;
  w.expire(99, [&](uint32_t id) { got.push_back(id); });
  CHECK(got.empty());
  w.expire(100, [&](uint32_t id) { got.push_back(id); });
  REQUIRE(got.size() == 2);  // 120 and 199 share the slot [100, 200)
  CHECK(((got[0] == 2 && got[1] == 3) || (got[0] == 3 && got[1] == 2)));
  CHECK(w.next_expiry_ns() == 400);
  w.expire(1000, [&](uint32_t id) { got.push_back(id); });
  CHECK(got.back() == 1);
  CHECK(w.size() == 0);
  CHECK(w.next_expiry_ns() == kNever);
}

TEST_CASE("wheel remove and contains") {
  TimingWheel w(10, 64);
  w.reserve_ids(4);
  w.insert(0, 50);
  w.insert(1, 50);
  w.insert(2, 50);
  w.remove(1);
  CHECK_FALSE(w.contains(1));
  CHECK(w.contains(0));
  std::vector<uint32_t> got;
  w.expire(60, [&](uint32_t id) { got.push_back(id); });
  CHECK(got.size() == 2);
  CHECK_FALSE(w.contains(0));
}

TEST_CASE("wheel parks ids beyond the horizon at its far end") {
  TimingWheel w(10, 64);  // horizon 640 ns
  w.reserve_ids(2);
  w.insert(0, 100'000);
  CHECK(w.next_expiry_ns() == 630);
  int laps = 0;
  uint64_t now = 0;
  bool done = false;
  while (!done && laps < 1000) {
    now = w.next_expiry_ns();
    w.expire(now, [&](uint32_t id) {
      if (now / 10 >= 100'000 / 10) {
        done = true;
      } else {
        w.insert(id, 100'000);
        ++laps;
      }
    });
  }
  CHECK(done);
  CHECK(now == 100'000);
  // Parked at slots 63, 127, 191, ...: one lap per 64 slots until slot 10000.
  CHECK(laps == (10'000 - 63 - 1) / 64 + 1);
}

TEST_CASE("wheel wraps around many times and handles times in the past") {
  TimingWheel w(1, 64);
  w.reserve_ids(1);
  uint64_t now = 0;
  for (int i = 0; i < 1000; ++i) {
    w.insert(0, now + 37);
    CHECK(w.next_expiry_ns() == now + 37);
    int n = 0;
    w.expire(now + 37, [&](uint32_t) { ++n; });
    CHECK(n == 1);
    now += 37;
  }
  w.insert(0, 5);  // in the past: goes to the current slot
  int n = 0;
  w.expire(now + 1, [&](uint32_t) { ++n; });
  CHECK(n == 1);
}
