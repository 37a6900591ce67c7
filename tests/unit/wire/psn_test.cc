#include "wire/psn.h"

#include <catch2/catch.hpp>

using namespace conduit::wire;

TEST_CASE("psn_next wraps at 2^24") {
  CHECK(psn_next(0) == 1);
  CHECK(psn_next(0xFFFFFE) == 0xFFFFFF);
  CHECK(psn_next(0xFFFFFF) == 0);
  CHECK(psn_add(0xFFFFF0, 0x20) == 0x10);
  CHECK(psn_mask(0x1234567) == 0x234567);
}

TEST_CASE("psn_diff is the signed 24-bit distance") {
  CHECK(psn_diff(5, 3) == 2);
  CHECK(psn_diff(3, 5) == -2);
  CHECK(psn_diff(0, 0xFFFFFF) == 1);  // 0 follows 0xFFFFFF
  CHECK(psn_diff(0xFFFFFF, 0) == -1);
  CHECK(psn_diff(0x10, 0xFFFFF0) == 0x20);
  CHECK(psn_diff(kPsnHalfRange - 1, 0) == static_cast<int32_t>(kPsnHalfRange - 1));
  CHECK(psn_diff(kPsnHalfRange, 0) == -static_cast<int32_t>(kPsnHalfRange));
}

TEST_CASE("psn ordering across the wrap") {
  CHECK(psn_lt(0xFFFFFF, 0));
  CHECK(psn_gt(0, 0xFFFFFF));
  CHECK(psn_le(7, 7));
  CHECK(psn_ge(7, 7));
  CHECK_FALSE(psn_lt(7, 7));
  CHECK(psn_lt(0xFFFF00, 0x000100));
  CHECK_FALSE(psn_lt(0x000100, 0xFFFF00));
}

TEST_CASE("psn_in_range is half-open and modular") {
  CHECK(psn_in_range(0xFFFFFE, 0xFFFFFE, 2));
  CHECK(psn_in_range(0, 0xFFFFFE, 2));
  CHECK(psn_in_range(1, 0xFFFFFE, 2));
  CHECK_FALSE(psn_in_range(2, 0xFFFFFE, 2));
  CHECK_FALSE(psn_in_range(0xFFFFFD, 0xFFFFFE, 2));
  CHECK_FALSE(psn_in_range(5, 5, 5));
}

TEST_CASE("psn arithmetic is usable at compile time") {
  static_assert(psn_next(0xFFFFFF) == 0);
  static_assert(psn_lt(0xFFFFFF, 0));
  SUCCEED();
}
