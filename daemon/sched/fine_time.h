// A time with picosecond resolution for pacing arithmetic: whole nanoseconds
// plus a 0..999 ps remainder. Keeping the remainder makes a flow's long-run
// rate exact (a 64-byte packet at 400 Gbit/s is 1.28 ns apart) without
// limiting the range of the nanosecond clock the engine passes in.
#pragma once

#include <compare>
#include <cstdint>

namespace conduit::sched {

struct FineTime {
  uint64_t ns = 0;
  uint32_t ps = 0;  // 0..999

  static constexpr FineTime from_ns(uint64_t ns) { return FineTime{ns, 0}; }
  constexpr FineTime plus_ps(uint64_t d_ps) const {
    const uint64_t sum_ps = ps + d_ps % 1000;
    return FineTime{ns + d_ps / 1000 + sum_ps / 1000, static_cast<uint32_t>(sum_ps % 1000)};
  }
  // Saturates at zero.
  constexpr FineTime minus_ps(uint64_t d_ps) const {
    const uint64_t d_ns = d_ps / 1000;
    const auto d_rem = static_cast<uint32_t>(d_ps % 1000);
    const uint64_t borrow = d_rem > ps ? 1 : 0;
    if (ns < d_ns + borrow) return FineTime{};
    return FineTime{ns - d_ns - borrow, static_cast<uint32_t>(ps + borrow * 1000 - d_rem)};
  }
  friend constexpr auto operator<=>(const FineTime&, const FineTime&) = default;
};

// Time to serialise len_bytes at rate_bps, in ps. len_bytes <= 2^20 and
// rate_bps >= 1 keep the product within 64 bits.
constexpr uint64_t wire_time_ps(uint64_t len_bytes, uint64_t rate_bps) {
  return len_bytes * 8'000'000'000'000ULL / rate_bps;
}

}  // namespace conduit::sched
