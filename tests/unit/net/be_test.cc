#include "net/be.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <type_traits>

using namespace conduit::net;

TEST_CASE("BigEndian stores the most significant byte first", "[be]") {
  const Be16 a = Be16::from_host(0x1234);
  CHECK(a.bytes_[0] == 0x12);
  CHECK(a.bytes_[1] == 0x34);
  CHECK(a.host() == 0x1234);

  const Be32 b = Be32::from_host(0xC6120001);
  const uint8_t want[4] = {0xC6, 0x12, 0x00, 0x01};
  CHECK(std::memcmp(&b, want, 4) == 0);
  CHECK(b.host() == 0xC6120001u);

  const Be64 c = Be64::from_host(0x0102030405060708ull);
  CHECK(c.bytes_[0] == 1);
  CHECK(c.bytes_[7] == 8);
  CHECK(c.host() == 0x0102030405060708ull);
}

TEST_CASE("Be24 keeps the low 24 bits", "[be]") {
  Be24 p{};
  p.set(0xABCDEF12);  // the top byte does not fit
  CHECK(p.host() == 0xCDEF12);
  CHECK(p.bytes_[0] == 0xCD);
  CHECK(Be24::kMax == 0xFFFFFF);
  CHECK(Be24::from_host(0xFFFFFF).host() == 0xFFFFFF);
}

TEST_CASE("BigEndian reads any alignment and compares by value", "[be]") {
  const uint8_t raw[5] = {0xEE, 0x80, 0x00, 0x00, 0x01};
  Be32 v;
  std::memcpy(&v, raw + 1, 4);
  CHECK(v.host() == 0x80000001u);
  CHECK(v == Be32::from_host(0x80000001u));
  CHECK_FALSE(v == Be32::from_host(0x01000080u));
  CHECK(Be16{}.host() == 0);
}

TEST_CASE("BigEndian does not convert implicitly", "[be]") {
  STATIC_REQUIRE_FALSE(std::is_convertible_v<Be16, uint16_t>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<uint16_t, Be16>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<Be32, Be16>);
  STATIC_REQUIRE(Be16::from_host(0xBEEF).host() == 0xBEEF);  // usable in constexpr
}
