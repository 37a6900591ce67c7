#include "policy/units.h"

#include <cctype>
#include <vector>

#include "policy/quote.h"
#include "policy/suggest.h"

namespace conduit::policy {
namespace {

struct Unit {
  std::string_view name;
  uint64_t multiplier;
};

constexpr Unit kRateUnits[] = {
    {"bit", 1},
    {"bps", 1},
    {"bit/s", 1},
    {"kbit", 1'000},
    {"kbps", 1'000},
    {"kbit/s", 1'000},
    {"mbit", 1'000'000},
    {"mbps", 1'000'000},
    {"mbit/s", 1'000'000},
    {"gbit", 1'000'000'000},
    {"gbps", 1'000'000'000},
    {"gbit/s", 1'000'000'000},
    {"tbit", 1'000'000'000'000},
    {"tbps", 1'000'000'000'000},
    {"tbit/s", 1'000'000'000'000},
};

constexpr Unit kDurationUnits[] = {
    {"ns", 1},         {"us", 1'000},        {"\xC2\xB5s", 1'000}, {"\xCE\xBCs", 1'000},
    {"ms", 1'000'000}, {"s", 1'000'000'000},
};

constexpr Unit kSizeUnits[] = {
    {"B", 1},
    {"kB", 1'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

struct QuantitySpec {
  std::string_view what;       // "rate", "duration", "size"
  std::string_view base_unit;  // for "not a whole number of ..."
  const Unit* units;
  size_t unit_count;
  bool case_insensitive;
  bool bare_number_is_base;  // sizes: "1500" means bytes
  std::string_view example;
};

std::optional<uint64_t> parse_quantity(std::string_view text, const QuantitySpec& spec,
                                       std::string* error) {
  auto fail = [&](std::string msg) -> std::optional<uint64_t> {
    *error = std::move(msg);
    return std::nullopt;
  };
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty()) {
    return fail("expected a " + std::string(spec.what) + " such as " + std::string(spec.example));
  }
  if (text.front() == '-') return fail(std::string(spec.what) + " must not be negative");
  if (text.front() == '+') return fail("leading '+' is not accepted");

  size_t i = 0;
  uint64_t whole = 0;
  bool overflow = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, digit, &whole)) {
      overflow = true;
    }
    ++i;
  }
  if (i == 0) {
    return fail("expected a " + std::string(spec.what) + " such as " + std::string(spec.example) +
                ", got " + quote(text));
  }
  if (i > 1 && text.front() == '0') {
    // A bare 01024 is octal 532 to YAML 1.1 tools; one rule for every number.
    size_t first = 0;
    while (first + 1 < i && text[first] == '0') ++first;
    return fail("leading zeros are not accepted in " + quote(text) +
                " (YAML 1.1 tools read a number with a leading zero as octal); write " +
                std::string(text.substr(first)));
  }
  if (i == 1 && whole == 0 && i + 1 < text.size() && (text[i] == 'o' || text[i] == 'O') &&
      std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
    return fail("octal is not accepted in " + quote(text));
  }
  uint64_t frac = 0;
  uint64_t frac_scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (frac_scale >= 1'000'000'000'000'000'000ull) {
        return fail("too many digits after the decimal point in " + quote(text));
      }
      frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
      frac_scale *= 10;
      ++i;
    }
    if (i == start) return fail("expected digits after the decimal point in " + quote(text));
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E') && i + 1 < text.size() &&
      (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '-' ||
       text[i + 1] == '+')) {
    return fail("exponent notation is not accepted in " + quote(text));
  }
  if (i < text.size() && (text[i] == 'x' || text[i] == 'X') && whole == 0) {
    return fail("hexadecimal is not accepted in " + quote(text));
  }
  std::string_view unit_text = text.substr(i);
  while (!unit_text.empty() && unit_text.front() == ' ') unit_text.remove_prefix(1);

  uint64_t multiplier = 0;
  if (unit_text.empty()) {
    if (spec.bare_number_is_base || (whole == 0 && frac == 0 && !overflow)) {
      multiplier = 1;
    } else {
      return fail("missing unit in " + quote(text) + " (write e.g. " + std::string(spec.example) +
                  ")");
    }
  } else {
    // Before the case-insensitive match, which would read "GBps" as gigabits. The B of
    // "GBit" or "KBIT" is the bit's, not a byte.
    std::string lower(unit_text);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (spec.what == "rate" && unit_text.find('B') != std::string_view::npos &&
        lower.find("bit") == std::string::npos) {
      return fail("byte rates are not accepted in " + quote(text) +
                  "; write bits per second (e.g. 40gbit)");
    }
    for (size_t u = 0; u < spec.unit_count; ++u) {
      bool match = spec.case_insensitive ? iequal(unit_text, spec.units[u].name)
                                         : unit_text == spec.units[u].name;
      if (match) {
        multiplier = spec.units[u].multiplier;
        break;
      }
    }
    if (multiplier == 0) {
      std::vector<std::string_view> names;
      for (size_t u = 0; u < spec.unit_count; ++u) names.push_back(spec.units[u].name);
      std::string msg =
          "unknown " + std::string(spec.what) + " unit " + quote(unit_text) + " in " + quote(text);
      if (auto s = did_you_mean(unit_text, names)) msg += "; did you mean '" + *s + "'?";
      return fail(msg);
    }
  }

  std::string too_large = std::string(spec.what) + " " + quote(text) + " is too large";
  if (overflow) return fail(too_large);
  uint64_t value = 0;
  if (__builtin_mul_overflow(whole, multiplier, &value)) return fail(too_large);
  if (frac != 0) {
    uint64_t scaled = 0;
    if (__builtin_mul_overflow(frac, multiplier, &scaled) || scaled % frac_scale != 0) {
      return fail(quote(text) + " is not a whole number of " + std::string(spec.base_unit));
    }
    if (__builtin_add_overflow(value, scaled / frac_scale, &value)) return fail(too_large);
  }
  return value;
}

constexpr QuantitySpec kRate{"rate",      "bit/s",        kRateUnits, std::size(kRateUnits),
                             /*ci=*/true, /*bare=*/false, "25gbit"};
constexpr QuantitySpec kDuration{
    "duration", "nanoseconds", kDurationUnits, std::size(kDurationUnits), false, false, "300us"};
constexpr QuantitySpec kSize{"size", "bytes", kSizeUnits, std::size(kSizeUnits),
                             false,  true,    "4KiB"};

std::string format_with(uint64_t value, std::initializer_list<Unit> largest_first) {
  for (const Unit& u : largest_first) {
    if (value != 0 && value % u.multiplier == 0) {
      return std::to_string(value / u.multiplier) + std::string(u.name);
    }
  }
  return std::to_string(value);
}

}  // namespace

std::optional<uint64_t> parse_rate_bps(std::string_view text, std::string* error) {
  return parse_quantity(text, kRate, error);
}

std::optional<uint64_t> parse_duration_ns(std::string_view text, std::string* error) {
  return parse_quantity(text, kDuration, error);
}

std::optional<uint64_t> parse_size_bytes(std::string_view text, std::string* error) {
  return parse_quantity(text, kSize, error);
}

std::string format_rate(uint64_t bps) {
  return format_with(bps, {{"tbit", 1'000'000'000'000},
                           {"gbit", 1'000'000'000},
                           {"mbit", 1'000'000},
                           {"kbit", 1'000},
                           {"bit", 1}});
}

std::string format_duration(uint64_t ns) {
  return format_with(ns, {{"s", 1'000'000'000}, {"ms", 1'000'000}, {"us", 1'000}, {"ns", 1}});
}

std::string format_size(uint64_t bytes) {
  return format_with(bytes, {{"TiB", 1ull << 40},
                             {"GiB", 1ull << 30},
                             {"MiB", 1ull << 20},
                             {"KiB", 1ull << 10},
                             {"TB", 1'000'000'000'000},
                             {"GB", 1'000'000'000},
                             {"MB", 1'000'000},
                             {"kB", 1'000},
                             {"B", 1}});
}

}  // namespace conduit::policy
