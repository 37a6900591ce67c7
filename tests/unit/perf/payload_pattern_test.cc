#include "payload_pattern.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace conduit::perf;

TEST_CASE("patterns verify at every length and catch every kind of damage") {
  for (size_t len : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{9}, size_t{63},
                     size_t{4096}, size_t{65537}}) {
    std::vector<uint8_t> buf(len);
    const uint64_t seed = payload_seed(3, 42);
    fill_pattern(buf.data(), len, seed);
    INFO(len);
    CHECK(check_pattern(buf.data(), len, seed));
    CHECK_FALSE(check_pattern(buf.data(), len, payload_seed(3, 43)));  // stale message
    CHECK_FALSE(check_pattern(buf.data(), len, payload_seed(4, 42)));  // other QP
    buf[len - 1] ^= 1;                                                 // last byte
    CHECK_FALSE(check_pattern(buf.data(), len, seed));
    buf[len - 1] ^= 1;
    buf[0] ^= 0x80;  // first byte
    CHECK_FALSE(check_pattern(buf.data(), len, seed));
  }
}

TEST_CASE("a shifted payload does not verify") {
  std::vector<uint8_t> buf(1025);
  fill_pattern(buf.data() + 1, 1024, 7);
  CHECK_FALSE(check_pattern(buf.data(), 1024, 7));
  CHECK(check_pattern(buf.data() + 1, 1024, 7));
}

TEST_CASE("seeds differ for every QP and message") {
  CHECK(payload_seed(0, 1) != payload_seed(1, 0));
  CHECK(payload_seed(0, 0) != payload_seed(0, 1));
  CHECK(payload_seed(255, 1u << 20) != payload_seed(254, 1u << 20));
}
