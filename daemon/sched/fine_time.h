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

// Time to serialise len_bytes at rate_bps, in ps, rounded down. len_bytes <=
// 2^20 and rate_bps >= 1 keep the product within 64 bits.
constexpr uint64_t wire_time_ps(uint64_t len_bytes, uint64_t rate_bps) {
  return len_bytes * 8'000'000'000'000ULL / rate_bps;
}

// The same for a stream of packets at one rate: *frac (< rate_bps, in units of
// 1/rate_bps ps; 0 to start, and again after a rate change) carries what each
// rounding dropped to the next packet, so the gaps add up to the exact time
// to within 1 ps however many packets there are (a 64-byte packet at 399.7
// Gbit/s is 1280.9 ps: rounded down alone, 0.07 % too fast).
constexpr uint64_t wire_time_ps(uint64_t len_bytes, uint64_t rate_bps, uint64_t* frac) {
  const uint64_t bits_ps = len_bytes * 8'000'000'000'000ULL;
  uint64_t t = bits_ps / rate_bps;
  const uint64_t rem = bits_ps % rate_bps;  // the same division
  if (*frac >= rate_bps - rem) {            // *frac + rem >= rate_bps, without overflow
    *frac -= rate_bps - rem;
    ++t;
  } else {
    *frac += rem;
  }
  return t;
}

}  // namespace conduit::sched
