#include <catch2/catch.hpp>

#include "net/ipv4_addr.h"
#include "net/mac_addr.h"

using namespace conduit::net;

TEST_CASE("Ipv4Addr parses and prints dotted quads", "[addr]") {
  const auto a = Ipv4Addr::parse("198.18.0.1");
  REQUIRE(a);
  CHECK(a->value == 0xC6120001u);
  CHECK(a->to_string() == "198.18.0.1");
  CHECK(Ipv4Addr::parse("0.0.0.0")->is_zero());
  CHECK(Ipv4Addr::parse("255.255.255.255")->is_limited_broadcast());
  CHECK(Ipv4Addr::parse("224.0.0.1")->is_multicast());
  CHECK(Ipv4Addr::from_octets(10, 1, 2, 3).to_be().host() == 0x0A010203u);
}

TEST_CASE("Ipv4Addr rejects malformed text", "[addr]") {
  for (const char* bad :
       {"", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1..2.3", "1.2.3.4 ", " 1.2.3.4", "01.2.3.4",
        "1.2.3.-4", "1.2.3.+4", "a.b.c.d", "1.2.3.4/24", "1234.1.1.1", "1.2.3."}) {
    INFO(bad);
    CHECK_FALSE(Ipv4Addr::parse(bad));
  }
}

TEST_CASE("ipv4_prefix_mask covers 0..32", "[addr]") {
  CHECK(ipv4_prefix_mask(0) == 0);
  CHECK(ipv4_prefix_mask(15) == 0xFFFE0000u);
  CHECK(ipv4_prefix_mask(24) == 0xFFFFFF00u);
  CHECK(ipv4_prefix_mask(32) == 0xFFFFFFFFu);
}

TEST_CASE("MacAddr parses and prints", "[addr]") {
  const auto m = MacAddr::parse("02:aB:cd:EF:00:9f");
  REQUIRE(m);
  CHECK(m->bytes[1] == 0xAB);
  CHECK(m->to_string() == "02:ab:cd:ef:00:9f");
  CHECK_FALSE(m->is_multicast());
  CHECK(MacAddr::broadcast().is_broadcast());
  CHECK(MacAddr::broadcast().is_multicast());
  CHECK(MacAddr::parse("01:00:5e:00:00:01")->is_multicast());
  CHECK(MacAddr{}.is_zero());
  for (const char* bad : {"", "02:ab:cd:ef:00", "02:ab:cd:ef:00:9f:", "02-ab-cd-ef-00-9f",
                          "02:ab:cd:ef:00:9g", "2:ab:cd:ef:00:9f0"}) {
    INFO(bad);
    CHECK_FALSE(MacAddr::parse(bad));
  }
}
