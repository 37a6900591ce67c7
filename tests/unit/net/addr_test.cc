#include <catch2/catch.hpp>

#include "net/ipv4_addr.h"
#include "net/ipv6_addr.h"
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

TEST_CASE("Ipv6Addr parses RFC 4291 text forms", "[addr][ipv6]") {
  const auto full = Ipv6Addr::parse("2001:0DB8:0000:0000:0008:0800:200C:417A");
  REQUIRE(full);
  CHECK(*full == Ipv6Addr::from_groups({0x2001, 0xdb8, 0, 0, 8, 0x800, 0x200c, 0x417a}));
  CHECK(Ipv6Addr::parse("2001:db8::8:800:200c:417a") == full);
  CHECK(Ipv6Addr::parse("::")->is_unspecified());
  CHECK(Ipv6Addr::parse("::1")->is_loopback());
  CHECK(*Ipv6Addr::parse("1::") == Ipv6Addr::from_groups({1, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(*Ipv6Addr::parse("1:2:3:4:5:6:7::") == Ipv6Addr::from_groups({1, 2, 3, 4, 5, 6, 7, 0}));
  CHECK(*Ipv6Addr::parse("::2:3:4:5:6:7:8") == Ipv6Addr::from_groups({0, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(*Ipv6Addr::parse("1:2:3::8") == Ipv6Addr::from_groups({1, 2, 3, 0, 0, 0, 0, 8}));
  CHECK(*Ipv6Addr::parse("fe80::1") == Ipv6Addr::from_groups({0xfe80, 0, 0, 0, 0, 0, 0, 1}));
  const auto mapped = Ipv6Addr::parse("::ffff:1.2.3.4");
  REQUIRE(mapped);
  CHECK(mapped->is_v4_mapped());
  CHECK(*mapped == Ipv6Addr::v4_mapped(0x01020304));
  CHECK(*Ipv6Addr::parse("::FFFF:129.144.52.38") ==
        Ipv6Addr::from_groups({0, 0, 0, 0, 0, 0xffff, 0x8190, 0x3426}));
  CHECK(*Ipv6Addr::parse("0:0:0:0:0:0:13.1.68.3") ==
        Ipv6Addr::from_groups({0, 0, 0, 0, 0, 0, 0x0d01, 0x4403}));
  CHECK(*Ipv6Addr::parse("1:2:3:4:5::1.2.3.4") ==
        Ipv6Addr::from_groups({1, 2, 3, 4, 5, 0, 0x0102, 0x0304}));
}

TEST_CASE("Ipv6Addr rejects malformed text", "[addr][ipv6]") {
  for (const char* bad : {
           "",
           ":",
           ":::",
           "1:2:3:4:5:6:7:8:9",      // too many groups
           "1:2:3:4:5:6:7",          // too few, no "::"
           "1:2:3:4:5:6:7:8::",      // "::" must stand for at least one group
           "::1:2:3:4:5:6:7:8",      // likewise
           "1::2::3",                // two "::"
           "1:::2",                  // ":::"
           "12345::",                // group > 4 digits
           "::00001",                // likewise, even with leading zeros
           "1:2:3:4:5:6:7:",         // trailing colon
           "1:2:3:4:5:6:7:8:",       // trailing colon
           ":1:2:3:4:5:6:7:8",       // leading colon
           ":1::",                   // leading colon
           "1::2:",                  // trailing colon after "::"
           "g::1",                   // bad hex
           "::1x",                   // bad hex
           "-1::",                   // sign
           "+1::",                   // sign
           " ::1",                   // spaces
           "::1 ",                   // spaces
           "fe80::1%eth0",           // zone id
           "2001:db8::/32",          // prefix
           "[::1]",                  // brackets
           "1.2.3.4",                // IPv4 alone
           "::1.2.3",                // short dotted tail
           "::1.2.3.4.5",            // long dotted tail
           "::256.1.1.1",            // bad octet
           "::1.2.3.4:5",            // dotted quad not last
           "1.2.3.4::",              // dotted quad before "::"
           "1:2:3:4:5:6:7:1.2.3.4",  // dotted quad makes 9 groups
           "1:2:3:4:5:6::1.2.3.4",   // "::" for zero groups
       }) {
    INFO(bad);
    CHECK_FALSE(Ipv6Addr::parse(bad));
  }
}

TEST_CASE("Ipv6Addr prints RFC 5952 canonical text", "[addr][ipv6]") {
  const auto canon = [](const char* text) {
    const auto a = Ipv6Addr::parse(text);
    REQUIRE(a);
    return a->to_string();
  };
  CHECK(canon("::") == "::");
  CHECK(canon("0:0:0:0:0:0:0:1") == "::1");
  CHECK(canon("1:0:0:0:0:0:0:0") == "1::");
  CHECK(canon("2001:0DB8:0000:0000:0000:0000:0000:0001") == "2001:db8::1");  // 4.1, 4.3
  CHECK(canon("2001:db8:0:0:1:0:0:1") == "2001:db8::1:0:0:1");               // 4.2.3: leftmost
  CHECK(canon("2001:0:0:1:0:0:0:1") == "2001:0:0:1::1");                     // 4.2.3: longest
  CHECK(canon("2001:db8:0:1:1:1:1:1") == "2001:db8:0:1:1:1:1:1");            // 4.2.2: one 0
  CHECK(canon("2001:db8::0:1") == "2001:db8::1");
  CHECK(canon("fe80::0200:00ff:fe00:0001") == "fe80::200:ff:fe00:1");
  CHECK(canon("1:2:3:4:5:6:7:8") == "1:2:3:4:5:6:7:8");
  CHECK(canon("0:1:0:1:0:1:0:1") == "0:1:0:1:0:1:0:1");
  CHECK(canon("1:0:0:2:0:0:0:0") == "1:0:0:2::");
  CHECK(canon("::ffff:1.2.3.4") == "::ffff:1.2.3.4");  // section 5
  CHECK(canon("::ffff:0:0") == "::ffff:0.0.0.0");
  CHECK(canon("::1.2.3.4") == "::102:304");  // only v4-mapped prints dotted
}

TEST_CASE("Ipv6Addr classifies and derives group addresses", "[addr][ipv6]") {
  const Ipv6Addr ll = *Ipv6Addr::parse("fe80::200:ff:fe12:3456");
  CHECK(ll.is_link_local());
  CHECK(ll.is_unicast());
  CHECK(Ipv6Addr::parse("febf::1")->is_link_local());
  CHECK_FALSE(Ipv6Addr::parse("fec0::1")->is_link_local());
  CHECK_FALSE(Ipv6Addr::parse("fe7f::1")->is_link_local());
  CHECK(Ipv6Addr::parse("ff02::1")->is_multicast());
  CHECK(Ipv6Addr::all_nodes() == *Ipv6Addr::parse("ff02::1"));
  CHECK_FALSE(Ipv6Addr::parse("ff02::1")->is_unicast());
  CHECK_FALSE(Ipv6Addr::parse("::")->is_unicast());
  CHECK_FALSE(Ipv6Addr::parse("::1")->is_unicast());
  CHECK_FALSE(Ipv6Addr::parse("::ffff:10.0.0.1")->is_unicast());
  CHECK_FALSE(Ipv6Addr::parse("::")->is_loopback());
  CHECK_FALSE(Ipv6Addr::parse("::2")->is_loopback());

  const Ipv6Addr sn = Ipv6Addr::solicited_node(*Ipv6Addr::parse("2001:db8::abcd:1234:5678"));
  CHECK(sn.to_string() == "ff02::1:ff34:5678");
  CHECK(sn.is_solicited_node());
  CHECK_FALSE(Ipv6Addr::all_nodes().is_solicited_node());
  CHECK(sn.multicast_mac() == MacAddr{{0x33, 0x33, 0xff, 0x34, 0x56, 0x78}});
  CHECK(Ipv6Addr::all_nodes().multicast_mac() == MacAddr{{0x33, 0x33, 0, 0, 0, 1}});

  const Ipv6Addr a = *Ipv6Addr::parse("2001:db8:1:2::1");
  CHECK(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:2:ffff::"), 64));
  CHECK_FALSE(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:3::1"), 64));
  CHECK(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:3::1"), 63));  // ..:2 vs ..:3
  CHECK(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:1::1"), 62));
  CHECK_FALSE(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:1::1"), 63));
  CHECK(ipv6_prefix_match(a, *Ipv6Addr::parse("::"), 0));
  CHECK(ipv6_prefix_match(a, a, 128));
  CHECK_FALSE(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:2::0"), 128));
  CHECK(ipv6_prefix_match(a, *Ipv6Addr::parse("2001:db8:1:2::0"), 127));
}
