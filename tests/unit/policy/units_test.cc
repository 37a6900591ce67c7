#include "policy/units.h"

#include <catch2/catch.hpp>

using namespace conduit::policy;

namespace {

std::optional<uint64_t> rate(std::string_view s, std::string* err = nullptr) {
  std::string e;
  auto v = parse_rate_bps(s, &e);
  if (err) *err = e;
  return v;
}
std::optional<uint64_t> duration(std::string_view s, std::string* err = nullptr) {
  std::string e;
  auto v = parse_duration_ns(s, &e);
  if (err) *err = e;
  return v;
}
std::optional<uint64_t> size(std::string_view s, std::string* err = nullptr) {
  std::string e;
  auto v = parse_size_bytes(s, &e);
  if (err) *err = e;
  return v;
}

}  // namespace

TEST_CASE("rates in bits per second, decimal SI prefixes") {
  CHECK(rate("25gbit") == 25'000'000'000ull);
  CHECK(rate("100mbit") == 100'000'000ull);
  CHECK(rate("40Gbps") == 40'000'000'000ull);
  CHECK(rate("40gbps") == 40'000'000'000ull);
  CHECK(rate("1.5gbit/s") == 1'500'000'000ull);
  CHECK(rate("25 gbit") == 25'000'000'000ull);
  CHECK(rate("400Gbit") == 400'000'000'000ull);
  CHECK(rate("1tbit") == 1'000'000'000'000ull);
  CHECK(rate("5kbit") == 5'000ull);
  CHECK(rate("7bit") == 7ull);
  CHECK(rate("0") == 0ull);  // zero needs no unit
  CHECK(rate("0.000000001gbit") == 1ull);
}

TEST_CASE("bad rates are rejected with a reason") {
  std::string err;
  CHECK_FALSE(rate("10qbit", &err));
  // kbit, mbit, gbit and tbit are all one edit away: any of them is a fair guess.
  CHECK(err.rfind("unknown rate unit 'qbit' in '10qbit'; did you mean '", 0) == 0);
  CHECK_FALSE(rate("10gibt", &err));
  CHECK(err == "unknown rate unit 'gibt' in '10gibt'; did you mean 'gbit'?");
  CHECK_FALSE(rate("-5mbit", &err));
  CHECK(err == "rate must not be negative");
  CHECK_FALSE(rate("1e400gbit", &err));
  CHECK(err == "exponent notation is not accepted in '1e400gbit'");
  CHECK_FALSE(rate("25", &err));
  CHECK(err == "missing unit in '25' (write e.g. 25gbit)");
  CHECK_FALSE(rate("40GB/s", &err));
  CHECK(err.find("byte rates are not accepted") == 0);
  // Upper-case B is bytes even where the unit would match case-insensitively.
  for (const char* bytes : {"40GBps", "40MBps", "40KBPS", "40Bps", "40TBps"}) {
    CHECK_FALSE(rate(bytes, &err));
    CHECK(err.find("byte rates are not accepted") == 0);
  }
  CHECK(rate("40Gbps", &err) == 40'000'000'000ull);
  CHECK_FALSE(rate("", &err));
  CHECK(err == "expected a rate such as 25gbit");
  CHECK_FALSE(rate("gbit", &err));
  CHECK(err == "expected a rate such as 25gbit, got 'gbit'");
  CHECK_FALSE(rate("0.5bit", &err));
  CHECK(err == "'0.5bit' is not a whole number of bit/s");
  CHECK_FALSE(rate("1.gbit", &err));
  CHECK(err == "expected digits after the decimal point in '1.gbit'");
  CHECK_FALSE(rate("0x10gbit", &err));
  CHECK(err == "hexadecimal is not accepted in '0x10gbit'");
  CHECK_FALSE(rate("+5gbit", &err));
  CHECK_FALSE(rate("inf"));
  CHECK_FALSE(rate("nan"));
  CHECK_FALSE(rate("5 gbit extra"));
  CHECK_FALSE(rate("1.0000000000000000001gbit", &err));
  CHECK(err.find("too many digits") == 0);
}

TEST_CASE("a rate spelled with bit is bits in any letter case") {
  // "GBit" is how many data sheets write gigabit: the B of "Bit" is not a byte.
  std::string err;
  CHECK(rate("1GBit", &err) == 1'000'000'000ull);
  CHECK(rate("1GBIT", &err) == 1'000'000'000ull);
  CHECK(rate("10MBit/s", &err) == 10'000'000ull);
  CHECK(rate("5KBIT", &err) == 5'000ull);
  CHECK(rate("7Bit", &err) == 7ull);
  // Without "bit" an upper-case B is still a byte.
  for (const char* bytes : {"1GB", "1GB/s", "1GBps", "1GBPS"}) {
    INFO(bytes);
    CHECK_FALSE(rate(bytes, &err));
    CHECK(err.find("byte rates are not accepted") == 0);
  }
}

TEST_CASE("rates that do not fit 64 bits are rejected, not wrapped") {
  std::string err;
  CHECK(rate("18446744073709551615bit") == 18446744073709551615ull);
  CHECK_FALSE(rate("18446744073709551616bit", &err));
  CHECK(err == "rate '18446744073709551616bit' is too large");
  CHECK_FALSE(rate("18446745tbit", &err));
  CHECK(err == "rate '18446745tbit' is too large");
  CHECK_FALSE(rate("99999999999999999999999999999999gbit", &err));
  CHECK(err.find("is too large") != std::string::npos);
}

TEST_CASE("durations in ns, us, ms, s") {
  CHECK(duration("300us") == 300'000ull);
  CHECK(duration("4us") == 4'000ull);
  CHECK(duration("1ms") == 1'000'000ull);
  CHECK(duration("2s") == 2'000'000'000ull);
  CHECK(duration("250ns") == 250ull);
  CHECK(duration("1.5us") == 1'500ull);
  CHECK(duration("4.096us") == 4'096ull);
  CHECK(duration("2\xC2\xB5s") == 2'000ull);  // micro sign
  CHECK(duration("2\xCE\xBCs") == 2'000ull);  // Greek mu
  CHECK(duration("0") == 0ull);
}

TEST_CASE("bad durations") {
  std::string err;
  CHECK_FALSE(duration("-5us", &err));
  CHECK(err == "duration must not be negative");
  CHECK_FALSE(duration("5", &err));
  CHECK(err == "missing unit in '5' (write e.g. 300us)");
  CHECK_FALSE(duration("5US", &err));
  CHECK(err == "unknown duration unit 'US' in '5US'; did you mean 'us'?");
  CHECK_FALSE(duration("1.5ns", &err));
  CHECK(err == "'1.5ns' is not a whole number of nanoseconds");
  CHECK_FALSE(duration("5min", &err));
  CHECK_FALSE(duration("18446744074s", &err));
  CHECK(err == "duration '18446744074s' is too large");
}

TEST_CASE("sizes: binary and decimal units, bare bytes") {
  CHECK(size("4KiB") == 4096ull);
  CHECK(size("1MB") == 1'000'000ull);
  CHECK(size("1MiB") == 1'048'576ull);
  CHECK(size("1kB") == 1'000ull);
  CHECK(size("1500") == 1500ull);
  CHECK(size("1500B") == 1500ull);
  CHECK(size("1.5KiB") == 1536ull);
  CHECK(size("16TiB") == 16ull << 40);
}

TEST_CASE("bad sizes") {
  std::string err;
  CHECK_FALSE(size("4kb", &err));
  CHECK(err == "unknown size unit 'kb' in '4kb'; did you mean 'kB'?");
  CHECK_FALSE(size("-1", &err));
  CHECK(err == "size must not be negative");
  CHECK_FALSE(size("17179869184GiB", &err));  // 2^34 GiB = 2^64 bytes
  CHECK(err == "size '17179869184GiB' is too large");
  CHECK_FALSE(size("1.1B", &err));
  CHECK(err == "'1.1B' is not a whole number of bytes");
  CHECK_FALSE(size("4 K"));
}

TEST_CASE("formatting picks the largest exact unit and parses back") {
  CHECK(format_rate(25'000'000'000ull) == "25gbit");
  CHECK(format_rate(1'500'000'000ull) == "1500mbit");
  CHECK(format_rate(0) == "0");
  CHECK(format_rate(7) == "7bit");
  CHECK(format_duration(300'000) == "300us");
  CHECK(format_duration(4'096) == "4096ns");
  CHECK(format_duration(2'000'000'000) == "2s");
  CHECK(format_size(4096) == "4KiB");
  CHECK(format_size(1'000'000) == "1MB");
  CHECK(format_size(2'097'088) == "2097088B");
  for (uint64_t v : {uint64_t{1}, uint64_t{999}, uint64_t{1000}, uint64_t{123456789},
                     uint64_t{1} << 40, uint64_t{18446744073709551615ull}}) {
    std::string err;
    CHECK(parse_rate_bps(format_rate(v), &err) == v);
    CHECK(parse_duration_ns(format_duration(v), &err) == v);
    CHECK(parse_size_bytes(format_size(v), &err) == v);
  }
}
