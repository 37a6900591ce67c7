// Integers, booleans and list items as operators write them: one reading only,
// reported where they stand.
#include <catch2/catch.hpp>

#include "policy/loader.h"
#include "policy/units.h"
#include "policy_test_util.h"

using namespace conduit::policy;
using namespace conduit::policy::test;
using Errors = std::vector<std::string>;

TEST_CASE("an integer with a leading zero is refused: YAML 1.1 reads it as octal") {
  CHECK(errors_of(std::string(kPort) + "cnp: {dscp: 026}\n") ==
        Errors{"t.yaml:4:13: cnp.dscp: '026' has a leading zero, which YAML 1.1 tools read as "
               "octal (22) and YAML 1.2 as decimal (26); write the decimal number without "
               "leading zeros"});
  // Not an octal number either: still refused, the same advice.
  CHECK(errors_of(std::string(kPort) + "transport: {window: 0128}\n") ==
        Errors{"t.yaml:4:21: transport.window: '0128' has a leading zero; write the decimal "
               "number without leading zeros"});
  CHECK(errors_of("port: {device: net_null0, address: 198.18.0.1/24, roce_udp_port: 04791}\n") ==
        Errors{"t.yaml:1:66: port.roce_udp_port: '04791' has a leading zero; write the decimal "
               "number without leading zeros"});
  CHECK(errors_of(std::string(kPort) + "cnp: {priority: 00}\n") ==
        Errors{"t.yaml:4:17: cnp.priority: '00' has a leading zero; write the decimal number "
               "without leading zeros"});
  // In lists, RNR codes and class weights too.
  CHECK(errors_of(std::string(kPort) + "daemon: {lcores: [1, 02]}\n") ==
        Errors{"t.yaml:4:22: daemon.lcores[1]: '02' has a leading zero; write the decimal "
               "number without leading zeros"});
  CHECK(errors_of(std::string(kPort) + "transport: {min_rnr_timer: 012}\n") ==
        Errors{"t.yaml:4:28: transport.min_rnr_timer: '012' has a leading zero, which YAML 1.1 "
               "tools read as octal (10) and YAML 1.2 as decimal (12); write the decimal number "
               "without leading zeros"});
  CHECK(errors_of(std::string(kPort) +
                  "traffic_classes:\n  - {name: a, default: true, dscp: 1, weight: 010}\n") ==
        Errors{"t.yaml:5:47: traffic_classes[0].weight: '010' has a leading zero, which YAML "
               "1.1 tools read as octal (8) and YAML 1.2 as decimal (10); write the decimal "
               "number without leading zeros"});
  // Plain 0 and numbers without a leading zero stay valid.
  LoadResult r =
      load(std::string(kPort) + "cnp: {dscp: 0, priority: 0}\ntransport: {window: 10}\n");
  INFO(r.error_text());
  REQUIRE(r.ok());
  CHECK(r.policy->cnp.dscp == 0);
  CHECK(r.policy->transport.window_packets == 10);
}

TEST_CASE("integers in another base are refused with their decimal value") {
  CHECK(errors_of(std::string(kPort) + "cnp: {dscp: 0x1A}\n") ==
        Errors{"t.yaml:4:13: cnp.dscp: '0x1A' is hexadecimal; write the decimal number (26)"});
  CHECK(errors_of(std::string(kPort) + "cnp: {dscp: 0o32}\n") ==
        Errors{"t.yaml:4:13: cnp.dscp: '0o32' is octal; write the decimal number (26)"});
  CHECK(errors_of(std::string(kPort) + "cnp: {dscp: 0b11010}\n") ==
        Errors{"t.yaml:4:13: cnp.dscp: '0b11010' is binary; write the decimal number (26)"});
  // Digits that do not belong to the base: just not an integer.
  CHECK(errors_of(std::string(kPort) + "cnp: {dscp: 0xZZ}\n") ==
        Errors{"t.yaml:4:13: cnp.dscp: expected an integer, got '0xZZ'"});
}

TEST_CASE("a bare size or a quantity with a leading zero is refused the same way") {
  CHECK(errors_of(std::string(kPort) + "transport: {pmtu: 01024}\n") ==
        Errors{"t.yaml:4:19: transport.pmtu: leading zeros are not accepted in '01024' (YAML "
               "1.1 tools read a number with a leading zero as octal); write 1024"});
  std::string err;
  CHECK_FALSE(parse_duration_ns("0300us", &err));
  CHECK(err ==
        "leading zeros are not accepted in '0300us' (YAML 1.1 tools read a number with a "
        "leading zero as octal); write 300us");
  CHECK_FALSE(parse_rate_bps("00.5gbit", &err));
  CHECK(err ==
        "leading zeros are not accepted in '00.5gbit' (YAML 1.1 tools read a number with "
        "a leading zero as octal); write 0.5gbit");
  CHECK_FALSE(parse_size_bytes("0o10", &err));
  CHECK(err == "octal is not accepted in '0o10'");
  CHECK_FALSE(parse_size_bytes("00", &err));
  CHECK(err ==
        "leading zeros are not accepted in '00' (YAML 1.1 tools read a number with a "
        "leading zero as octal); write 0");
  // A zero before the decimal point, a zero alone and zero bytes stay valid.
  CHECK(parse_duration_ns("0.5us", &err) == 500ull);
  CHECK(parse_rate_bps("0", &err) == 0ull);
  CHECK(parse_size_bytes("0B", &err) == 0ull);
  CHECK(parse_size_bytes("0", &err) == 0ull);
}

TEST_CASE("booleans take exactly the YAML 1.2 core spellings and 1 or 0") {
  auto is_default = [](std::string_view v) -> std::optional<bool> {
    LoadResult r =
        load(std::string(kPort) + "traffic_classes:\n  - {name: a, default: " + std::string(v) +
             ", dscp: 1}\n  - {name: b, default: true, dscp: 2}\n");
    if (r.ok()) return r.policy->traffic_classes[0].is_default;
    return std::nullopt;
  };
  CHECK(is_default("false") == false);
  CHECK(is_default("False") == false);
  CHECK(is_default("FALSE") == false);
  CHECK(is_default("0") == false);
  auto clamp = [](std::string_view v) -> std::optional<bool> {
    LoadResult r = load(std::string(kPort) +
                        "traffic_classes:\n  - {name: a, default: true, dscp: 1, "
                        "congestion_control: {clamp_tgt_rate: " +
                        std::string(v) + "}}\n");
    if (r.ok()) return r.policy->traffic_classes[0].congestion_control.dcqcn.clamp_tgt_rate;
    return std::nullopt;
  };
  CHECK(clamp("true") == true);
  CHECK(clamp("True") == true);
  CHECK(clamp("TRUE") == true);
  CHECK(clamp("1") == true);
  CHECK(clamp("tRuE") == std::nullopt);
  CHECK(clamp("fALSE") == std::nullopt);
  CHECK(clamp("01") == std::nullopt);
  CHECK(
      errors_of(std::string(kPort) + "traffic_classes:\n  - {name: a, default: tRuE, dscp: 1}\n") ==
      Errors{"t.yaml:5:24: traffic_classes[0].default: 'tRuE' is not a boolean spelling; "
             "write true, True or TRUE"});
  CHECK(errors_of(std::string(kPort) +
                  "traffic_classes:\n  - {name: a, default: fAlse, dscp: 1}\n") ==
        Errors{"t.yaml:5:24: traffic_classes[0].default: 'fAlse' is not a boolean spelling; "
               "write false, False or FALSE"});
  // YAML 1.1's other booleans say why they are not taken.
  for (const char* word : {"yes", "No", "on", "OFF", "y", "N"}) {
    INFO(word);
    CHECK(errors_of(std::string(kPort) + "traffic_classes:\n  - {name: a, default: " + word +
                    ", dscp: 1}\n") ==
          Errors{"t.yaml:5:24: traffic_classes[0].default: '" + std::string(word) +
                 "' is a boolean only to YAML 1.1 tools; write true or false"});
  }
}

TEST_CASE("an empty list item is reported at its own line and column") {
  // In the middle of a list: at its '-', not at the list.
  CHECK(errors_of(std::string(kPort) + "daemon:\n  lcores:\n    - 1\n    -\n    - 3\n") ==
        Errors{"t.yaml:7:5: daemon.lcores[1]: expected an integer, got nothing"});
  // The last item, followed by another key, by a comment or by the end of the file.
  CHECK(
      errors_of(std::string(kPort) + "daemon:\n  lcores:\n    - 1\n    - \n  idle_mode: spin\n") ==
      Errors{"t.yaml:7:5: daemon.lcores[1]: expected an integer, got nothing"});
  CHECK(errors_of(std::string(kPort) + "clients:\n  allowed_uids:\n  - 0\n  -   # later\n\n") ==
        Errors{"t.yaml:7:3: clients.allowed_uids[1]: expected an integer, got nothing"});
  CHECK(errors_of(std::string(kPort) + "clients:\n  allowed_uids:\n  - 0\n  -") ==
        Errors{"t.yaml:7:3: clients.allowed_uids[1]: expected an integer, got nothing"});
  // With Windows line ends.
  CHECK(errors_of("port:\r\n  device: net_null0\r\n  address: 198.18.0.1/24\r\n"
                  "  eal_args:\r\n    -\r\n    - --no-pci\r\n") ==
        Errors{"t.yaml:5:5: port.eal_args[0]: expected a string, got nothing"});
  // After a byte-order mark, at the end of a file without a final line end.
  CHECK(errors_of("\xEF\xBB\xBF" + std::string(kPort) +
                  "daemon: {lcores: [0]}\nclients:\n"
                  "  allowed_gids:\n    - 1\n    -") ==
        Errors{"t.yaml:8:5: clients.allowed_gids[1]: expected an integer, got nothing"});
  // A class that is an empty item.
  CHECK(errors_of(std::string(kPort) + "traffic_classes:\n  - {name: a, default: true, dscp: 1}\n"
                                       "  -\n") ==
        Errors{"t.yaml:6:3: traffic_classes[1]: missing required key 'name'",
               "t.yaml:6:3: traffic_classes[1]: missing required key 'dscp'"});
  // An explicit null is reported where it is written.
  CHECK(errors_of(std::string(kPort) + "daemon:\n  lcores:\n    - 1\n    - ~\n") ==
        Errors{"t.yaml:7:7: daemon.lcores[1]: expected an integer, got nothing"});
  // In a flow list: next to the empty entry, on its line.
  CHECK(errors_of(std::string(kPort) + "daemon: {lcores: [1, , 3]}\n") ==
        Errors{"t.yaml:4:22: daemon.lcores[1]: expected an integer, got nothing"});
}

TEST_CASE("an RNR timer number too large for a code is named as a time without its unit") {
  CHECK(errors_of(std::string(kPort) + "transport: {min_rnr_timer: 640}\n") ==
        Errors{"t.yaml:4:28: transport.min_rnr_timer: 640 is not an RNR timer code (0..31); a "
               "time needs its unit, e.g. 640us"});
  CHECK(errors_of(std::string(kPort) + "transport: {min_rnr_timer: 99999999999999999999999}\n") ==
        Errors{"t.yaml:4:28: transport.min_rnr_timer: 99999999999999999999999 is out of range "
               "0..31"});
  CHECK(errors_of(std::string(kPort) + "transport: {min_rnr_timer: -1}\n") ==
        Errors{"t.yaml:4:28: transport.min_rnr_timer: duration must not be negative"});
}
