// Human-readable quantities in the policy file: rates, durations, sizes.
//
//   rate      25gbit  100mbit  40Gbps  1.5gbit/s  10GBit  (decimal SI, bits per
//             second; an upper-case B outside "bit" means bytes and is rejected)
//   duration  300us  4us  1.5ms  2s  250ns  (also µs)
//   size      4KiB  1MiB  1MB  1500B  1500  (KiB/MiB/GiB/TiB binary, kB/KB/MB/GB/TB
//             decimal; a bare integer is bytes)
//
// A decimal fraction is allowed when the result is a whole number of the base
// unit (bit/s, ns, bytes). Signs, exponents, hex, inf and nan are rejected; so
// are values that do not fit 64 bits. A bare 0 is accepted for rates and
// durations (zero needs no unit). The parsers never throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conduit::policy {

// On failure they return nullopt and set *error to a sentence fragment that
// names the problem ("unknown rate unit 'qbit'; did you mean 'gbit'?").
std::optional<uint64_t> parse_rate_bps(std::string_view text, std::string* error);
std::optional<uint64_t> parse_duration_ns(std::string_view text, std::string* error);
std::optional<uint64_t> parse_size_bytes(std::string_view text, std::string* error);

// The shortest exact spelling in the largest unit that divides the value:
// 25000000000 -> "25gbit", 300000 -> "300us", 4096 -> "4KiB". The parsers
// read these back to the same value.
std::string format_rate(uint64_t bps);
std::string format_duration(uint64_t ns);
std::string format_size(uint64_t bytes);

}  // namespace conduit::policy
